"""Reading checkpoints of the old format: whole tensors in `<tree>.safetensors` files beside `state.json`.

Until issue 16 the trainer gathered the state to process 0 and wrote
`model.safetensors`, `opt_state.safetensors` and `ema.safetensors`. Such a
directory still restores (resume, warm start, export, eval) from local disk;
`tootsie checkpoint convert OLD_STEP_DIR --out NEW_STEP_DIR` rewrites it in
the sharded format (`tootsie.train.checkpoint`), which object stores need.
"""

from pathlib import Path
from typing import Any, TypeVar

import jax
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

from tootsie.errors import TootsieError
from tootsie.storage import is_remote

Tree = TypeVar("Tree")
LEGACY_SUFFIX = ".safetensors"
CONVERT_HINT = "convert it with `tootsie checkpoint convert OLD_STEP_DIR --out NEW_STEP_DIR`"


def is_legacy(checkpoint: str) -> bool:
    """Whether `checkpoint` is a directory of the old format (it holds `model.safetensors`)."""
    if is_remote(checkpoint):
        return False
    return (Path(checkpoint) / f"model{LEGACY_SUFFIX}").is_file()


def legacy_trees(checkpoint: str) -> list[str]:
    """Names of the trees an old-format checkpoint holds (`model`, `opt_state`, `ema`)."""
    return sorted(file.name.removesuffix(LEGACY_SUFFIX) for file in Path(checkpoint).glob(f"*{LEGACY_SUFFIX}"))


def legacy_tensors(checkpoint: str, name: str) -> dict[str, np.ndarray] | None:
    """The tensors of `<checkpoint>/<name>.safetensors`, or None when the checkpoint has no such file."""
    file = Path(checkpoint) / f"{name}{LEGACY_SUFFIX}"
    return load_file(str(file)) if file.is_file() else None


def legacy_tree(checkpoint: str, name: str, template: Tree, sharding: Tree | None) -> Tree:
    """Fill `template`'s array leaves from `<checkpoint>/<name>.safetensors`, checking names and shapes.

    With `sharding` (a tree of shardings like the template) each device reads only its slice.
    """
    file = Path(checkpoint) / f"{name}{LEGACY_SUFFIX}"
    if not file.is_file():
        raise TootsieError(f"checkpoint {checkpoint} has no {file.name}")
    with safe_open(str(file), framework="numpy") as handle:
        return _read_tree(template, handle, file, sharding)


def _read_tree(template: Tree, handle: Any, source: Path, shardings: Tree | None) -> Tree:
    """`template` with every leaf read from an open safetensors file."""
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
