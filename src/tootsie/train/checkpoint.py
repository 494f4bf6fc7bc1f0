"""Atomic checkpoints of any pytree as safetensors, with a JSON state record.

Layout: `<root>/step-000100/` holds `model.safetensors`, `opt_state.safetensors`
and `state.json` (step, tokens, anything the trainer needs to resume). A
checkpoint is written into a temporary sibling directory and renamed into place
after every file is complete, and `state.json` is the last file written, so a
crash mid-write leaves the previous checkpoint untouched and the partial one
invisible. Tensors are keyed by their pytree path (`.layers.attn.wq`); restoring
checks every key and shape against a template, and names the first mismatch.

Files hold whole (gathered) arrays, whatever mesh wrote them: the trainer
gathers a sharded state before saving, and a restore given shardings has each
device read only its slice of every tensor. So a checkpoint written on one
mesh (say data × fsdp = 2 × 4) resumes on another (8 × 1, or one device).

`state.json` (`STATE_FILE`) also records the model config, so every reader
(export, eval, release) rebuilds the model with `model_config_of(checkpoint)`.
"""

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, TypeVar

import equinox as eqx
import jax
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from tootsie.configfile import from_plain
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig

CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")
STATE_FILE = "state.json"
"""The name of a checkpoint's state record, written last; every reader and writer uses this one."""
Tree = TypeVar("Tree")


def flatten_arrays(tree: object) -> dict[str, np.ndarray]:
    """Every array leaf of `tree` keyed by its path (None leaves are skipped)."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in flat}


def is_tensor(leaf: object) -> bool:
    """An array leaf, concrete or abstract (`jax.ShapeDtypeStruct`, as from `eqx.filter_eval_shape`)."""
    return isinstance(leaf, jax.ShapeDtypeStruct) or eqx.is_array(leaf)


def _read_tree(template: Tree, handle: Any, source: Path, shardings: Tree | None) -> Tree:
    """Fill `template`'s array leaves from an open safetensors file, checking names, shapes and dtypes.

    With `shardings` (a tree of `jax.sharding.Sharding` like the template) each
    device reads only its own slice of every tensor, so a process never holds
    more than its part of the state; without, leaves land on the default device.
    """
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    expected = [jax.tree_util.keystr(path) for path, _ in leaves_with_paths]
    stored = set(handle.keys())
    missing, unexpected = sorted(set(expected) - stored), sorted(stored - set(expected))
    if missing or unexpected:
        raise TootsieError(
            f"{source} does not match this model: missing {missing[:3]}, unexpected {unexpected[:3]}; "
            "it was written for another architecture (warm-start with a conversion instead)"
        )
    placements = [None] * len(expected) if shardings is None else jax.tree_util.tree_leaves(shardings)
    leaves = []
    for name, (_, leaf), sharding in zip(expected, leaves_with_paths, placements, strict=True):
        stored_slice, shape, dtype = handle.get_slice(name), tuple(np.shape(leaf)), np.dtype(leaf.dtype)
        if tuple(stored_slice.get_shape()) != shape:
            raise TootsieError(
                f"{source}: tensor {name} has shape {tuple(stored_slice.get_shape())}, the model expects {shape}"
            )
        if sharding is None:
            leaves.append(jax.numpy.asarray(handle.get_tensor(name), dtype=dtype))
        else:
            leaves.append(
                jax.make_array_from_callback(
                    shape, sharding, lambda index, part=stored_slice, dtype=dtype: np.asarray(part[index], dtype=dtype)
                )
            )
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
    (tmp / STATE_FILE).write_text(
        json.dumps({"step": step, **state}, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
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


def load_checkpoint(
    path: str | Path, templates: dict[str, Tree], shardings: dict[str, Tree] | None = None
) -> tuple[dict[str, Tree], dict[str, object]]:
    """Restore each named tree from `path` into its template's structure; also return state.json.

    Each tree is placed with `shardings[name]` when given.


    Templates may be abstract (`jax.ShapeDtypeStruct` leaves): only shapes and dtypes are read from them.
    """
    directory = Path(path)
    if not (directory / STATE_FILE).is_file():
        raise TootsieError(f"{directory} is not a finished checkpoint ({STATE_FILE} missing)")
    state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    trees = {}
    for name, template in templates.items():
        file = directory / f"{name}.safetensors"
        if not file.is_file():
            raise TootsieError(f"checkpoint {directory} has no {file.name}")
        with safe_open(str(file), framework="numpy") as handle:
            trees[name] = _read_tree(template, handle, file, None if shardings is None else shardings[name])
    return trees, state


def read_checkpoint_state(checkpoint: str | Path) -> dict[str, Any]:
    """A finished checkpoint's state.json (step, tokens, model config, ...).

    Errors name the file when it is missing or unreadable.
    """
    file = Path(checkpoint) / STATE_FILE
    if not file.is_file():
        raise TootsieError(
            f"{file} not found: {checkpoint} is not a finished checkpoint; "
            f"pass a checkpoints/step-N directory that holds {STATE_FILE}"
        )
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TootsieError(
            f"{file} is not valid JSON ({error}); the checkpoint is damaged, use an earlier one"
        ) from None
    if not isinstance(state, dict):
        raise TootsieError(
            f"{file} holds a {type(state).__name__}, not a JSON object; the checkpoint is damaged, use an earlier one"
        )
    return state


def model_config_of(checkpoint: str | Path) -> LlamaConfig:
    """The model config a checkpoint's state.json records: how export, eval and release rebuild its model."""
    file = Path(checkpoint) / STATE_FILE
    model = read_checkpoint_state(checkpoint).get("model")
    if not isinstance(model, dict):
        raise TootsieError(
            f"{file} records no model config (its 'model' entry is {model!r}; written by "
            "an older tootsie); retrain or resave the checkpoint with a current trainer"
        )
    return from_plain(LlamaConfig, model, f"{file}:model")


def prune_temporary(root: str | Path) -> None:
    """Delete temporary checkpoints except the newest checkpoint; permanent ones are always kept."""
    found = list_checkpoints(root)
    for _, path in found[:-1]:
        if json.loads((path / STATE_FILE).read_text(encoding="utf-8")).get("kind") == "temporary":
            shutil.rmtree(path)


def fill_matching(template: Tree, tensors: dict[str, np.ndarray]) -> tuple[Tree, list[str], list[str]]:
    """`template` with every leaf whose path and shape match a tensor replaced by it (a host array in the leaf's dtype).

    Returns the tree and the names of leaves kept fresh (absent or reshaped in
    `tensors`) and of tensors left unused, so a warm start says what it carried
    over. Matching by path suits trees shaped like the model (weights, EMA); the
    optimizer state is matched by what each tensor is (`warm_start.carry_optimizer_state`).
    """
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    leaves, fresh, used = [], [], set()
    for path, leaf in leaves_with_paths:
        name = jax.tree_util.keystr(path)
        value = tensors.get(name)
        if value is not None and value.shape == np.shape(leaf):
            leaves.append(np.asarray(value, dtype=leaf.dtype))
            used.add(name)
        else:
            leaves.append(leaf)
            fresh.append(name)
    return jax.tree_util.tree_unflatten(treedef, leaves), fresh, sorted(set(tensors) - used)


def read_tensors(checkpoint: str | Path, name: str) -> dict[str, np.ndarray] | None:
    """The tensors of `<checkpoint>/<name>.safetensors`, or None when the checkpoint has no such file."""
    file = Path(checkpoint) / f"{name}.safetensors"
    return load_file(str(file)) if file.is_file() else None
