"""Atomic checkpoints of any pytree as safetensors, with a JSON state record.

Layout: `<root>/step-000100/` holds `model.safetensors`, `opt_state.safetensors`
and `state.json` (step, tokens, anything the trainer needs to resume). A
checkpoint is written into a temporary sibling directory and renamed into place
after every file is complete, and `state.json` is the last file written, so a
crash mid-write leaves the previous checkpoint untouched and the partial one
invisible. Tensors are keyed by their pytree path (`.layers.attn.wq`); restoring
checks every key and shape against a template, and names the first mismatch.
"""

import json
import os
import re
import shutil
from pathlib import Path
from typing import TypeVar

import jax
import numpy as np
from safetensors.numpy import load_file, save_file

from tootsie.errors import TootsieError

CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")
STATE_FILE = "state.json"
Tree = TypeVar("Tree")


def flatten_arrays(tree: object) -> dict[str, np.ndarray]:
    """Every array leaf of `tree` keyed by its path (None leaves are skipped)."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in flat}


def unflatten_arrays(template: Tree, tensors: dict[str, np.ndarray], source: Path) -> Tree:
    """Fill `template`'s array leaves from `tensors`, checking names, shapes and dtypes."""
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    expected = [jax.tree_util.keystr(path) for path, _ in leaves_with_paths]
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise TootsieError(
            f"{source} does not match this model: missing {missing[:3]}, unexpected {unexpected[:3]}; "
            "it was written for another architecture (warm-start with a conversion instead)"
        )
    leaves = []
    for name, (_, leaf) in zip(expected, leaves_with_paths):
        value = tensors[name]
        if value.shape != np.shape(leaf):
            raise TootsieError(f"{source}: tensor {name} has shape {value.shape}, the model expects {np.shape(leaf)}")
        leaves.append(jax.numpy.asarray(value, dtype=np.asarray(leaf).dtype))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def checkpoint_dir(root: str | Path, step: int) -> Path:
    """Directory of the checkpoint at `step`."""
    return Path(root) / f"step-{step:06d}"


def save_checkpoint(root: str | Path, step: int, trees: dict[str, object], state: dict[str, object]) -> Path:
    """Write each tree to `<name>.safetensors` plus `state.json`, atomically, and return the directory."""
    final = checkpoint_dir(root, step)
    if (final / STATE_FILE).is_file():
        return final
    tmp = Path(root) / f".tmp-step-{step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, tree in trees.items():
        save_file(flatten_arrays(tree), str(tmp / f"{name}.safetensors"))
    (tmp / STATE_FILE).write_text(json.dumps({"step": step, **state}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)  # an unfinished leftover without state.json
    os.replace(tmp, final)
    return final


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """Finished checkpoints under `root` as (step, path), oldest first."""
    base = Path(root)
    if not base.is_dir():
        return []
    found = []
    for child in base.iterdir():
        match = CHECKPOINT_PATTERN.match(child.name)
        if match and (child / STATE_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def latest_checkpoint(root: str | Path) -> Path | None:
    """The finished checkpoint with the highest step, or None."""
    found = list_checkpoints(root)
    return found[-1][1] if found else None


def load_checkpoint(path: str | Path, templates: dict[str, Tree]) -> tuple[dict[str, Tree], dict[str, object]]:
    """Restore each named tree from `path` into its template's structure; also return state.json."""
    directory = Path(path)
    if not (directory / STATE_FILE).is_file():
        raise TootsieError(f"{directory} is not a finished checkpoint ({STATE_FILE} missing)")
    state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    trees = {}
    for name, template in templates.items():
        file = directory / f"{name}.safetensors"
        if not file.is_file():
            raise TootsieError(f"checkpoint {directory} has no {file.name}")
        trees[name] = unflatten_arrays(template, load_file(str(file)), file)
    return trees, state


def prune_temporary(root: str | Path) -> None:
    """Delete temporary checkpoints except the newest checkpoint; permanent ones are always kept."""
    found = list_checkpoints(root)
    for _, path in found[:-1]:
        if json.loads((path / STATE_FILE).read_text(encoding="utf-8")).get("kind") == "temporary":
            shutil.rmtree(path)


def fill_matching(template: Tree, tensors: dict[str, np.ndarray]) -> tuple[Tree, list[str], list[str]]:
    """`template` with every leaf whose path and shape match a tensor replaced by it.

    Returns the tree and the names of leaves kept fresh (absent or reshaped in
    `tensors`) and of tensors left unused, so a warm start across a config
    change (an optimizer gaining update clipping, say) says what it carried over.
    """
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    leaves, fresh, used = [], [], set()
    for path, leaf in leaves_with_paths:
        name = jax.tree_util.keystr(path)
        value = tensors.get(name)
        if value is not None and value.shape == np.shape(leaf):
            leaves.append(jax.numpy.asarray(value, dtype=np.asarray(leaf).dtype))
            used.add(name)
        else:
            leaves.append(leaf)
            fresh.append(name)
    return jax.tree_util.tree_unflatten(treedef, leaves), fresh, sorted(set(tensors) - used)


def read_tensors(checkpoint: str | Path, name: str) -> dict[str, np.ndarray] | None:
    """The tensors of `<checkpoint>/<name>.safetensors`, or None when the checkpoint has no such file."""
    file = Path(checkpoint) / f"{name}.safetensors"
    return load_file(str(file)) if file.is_file() else None
