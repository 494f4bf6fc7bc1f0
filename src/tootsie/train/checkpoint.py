"""Sharded, asynchronous checkpoints on TensorStore (zarr v3), committed by a `state.json` written last.

Layout: `<root>/step-000100/` holds one zarr array per tensor,
`<tree>/<i>/` for the i-th array leaf of each tree (`model`, `opt_state`,
`ema`), and `state.json` (`STATE_FILE`: step, tokens, data position, kind,
model config, and under `tensors` the pytree path of every array, like
`.layers.attn.wq`). `<root>` is a local directory or an `s3://`/`gs://` URL,
given as a plain string (`Location`): `tootsie.storage` answers which, so no
function here asks again, and a `pathlib.Path` a caller passes is converted
with `os.fspath` where it enters. Every location returned is a string.

Writing (`start_checkpoint`): every process copies the shards it holds to host
memory (`tensor_store.host_shards`) and returns, and training goes on. A
background thread writes them (`tensor_store.write_arrays`: no gather, no
process writes another's data), waits for every process (a barrier of the
distributed client), and only then has process 0 write `state.json`: the
commit marker. A step directory without it is never listed or restored, and
process 0 deletes such leftovers when a run starts (`remove_uncommitted`). One
write is in flight at a time: the next `start_checkpoint`, and
`wait_for_checkpoints` at the end of training, wait for the previous one.

Restoring reads each tree into a template (abstract shapes are enough) and
places it with the given shardings, each device reading only its slice, so a
checkpoint written on one mesh (data × fsdp = 2 × 4) resumes on another (8 × 1,
one device, another process count). The old format (whole tensors in
`<tree>.safetensors`, `checkpoint_legacy`) still restores from local disk.

Example: the trainer at step 100 calls `start_checkpoint(root, 100, trees,
record)`; step 101 trains while `step-000100/model/0/c/...` are written; at
step 200 the next save first waits for step 100's `state.json`.
"""

import itertools
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import equinox as eqx
import jax
import numpy as np

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.models.registry import ModelConfig, model_config_from_plain
from tootsie.train import tensor_store
from tootsie.train.checkpoint_legacy import CONVERT_HINT, is_legacy, legacy_tensors, legacy_tree, legacy_trees
from tootsie.train.faults import checkpoint_fault

CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")
STATE_FILE = "state.json"
"""The name of a checkpoint's state record and commit marker, written last; every reader and writer uses this one."""
TENSORS_KEY = "tensors"
"""The state record's entry listing each tree's array paths, in leaf order (array i is stored at `<tree>/<i>`)."""
COMMIT_TIMEOUT_MS = 30 * 60 * 1000
"""How long a process waits for the others to finish writing a checkpoint (30 min: a 32B state to a slow store)."""
Location = str
"""A local checkpoint path, or the URL of one in object storage."""
PathOrUrl = Location | os.PathLike[str]
"""What the public functions accept: a `Location`, or a `pathlib.Path` (converted once, on entry)."""
Tree = TypeVar("Tree")
logger = logging.getLogger(__name__)
_barriers = itertools.count()


def flatten_arrays(tree: object) -> dict[str, np.ndarray]:
    """Every array leaf of `tree` keyed by its path, as host arrays (None leaves are skipped)."""
    return {name: np.asarray(leaf) for name, leaf in _flat(tree).items()}


def _flat(tree: object) -> dict[str, Any]:
    """Every array leaf of `tree` keyed by its path, as it is (device arrays stay on their devices)."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path): leaf for path, leaf in flat}


def is_tensor(leaf: object) -> bool:
    """An array leaf, concrete or abstract (`jax.ShapeDtypeStruct`, as from `eqx.filter_eval_shape`)."""
    return isinstance(leaf, jax.ShapeDtypeStruct) or eqx.is_array(leaf)


def checkpoint_dir(root: PathOrUrl, step: int) -> Location:
    """Directory of the checkpoint at `step`."""
    return storage.join(os.fspath(root), f"step-{step:06d}")


def _step_dirs(root: Location) -> list[tuple[int, Location]]:
    """Every `step-N` directory under `root`, committed or not, oldest first."""
    names = storage.list_dirs(root)
    return sorted(
        (int(match.group(1)), storage.join(root, name)) for name in names if (match := CHECKPOINT_PATTERN.match(name))
    )


def is_checkpoint(path: PathOrUrl) -> bool:
    """Whether `path` is a committed checkpoint directory (it holds `state.json`)."""
    return storage.exists(storage.join(os.fspath(path), STATE_FILE))


def list_checkpoints(root: PathOrUrl) -> list[tuple[int, Location]]:
    """Committed checkpoints under `root` (those with `state.json`) as (step, path), oldest first."""
    return [(step, path) for step, path in _step_dirs(os.fspath(root)) if is_checkpoint(path)]


def latest_checkpoint(root: PathOrUrl) -> Location | None:
    """The committed checkpoint with the highest step, or None."""
    found = list_checkpoints(root)
    return found[-1][1] if found else None


def delete_checkpoint(path: PathOrUrl) -> None:
    """Delete a checkpoint directory if it exists, uncommitting it first (`state.json` goes before any array)."""
    path = os.fspath(path)
    storage.remove(storage.join(path, STATE_FILE))
    storage.rmtree(path)


def remove_uncommitted(root: PathOrUrl) -> list[int]:
    """Delete step directories without `state.json` (writes cut short by a crash); return their steps.

    Call on process 0 only, before this run writes any checkpoint.
    """
    removed = []
    for step, path in _step_dirs(os.fspath(root)):
        if not is_checkpoint(path):
            delete_checkpoint(path)
            removed.append(step)
    if removed:
        logger.warning("removed uncommitted checkpoints of steps %s under %s", removed, root)
    return removed


def _barrier(name: str) -> None:
    """Wait until every process reaches `name`; callable from a background thread (the distributed client's barrier)."""
    if jax.process_count() == 1:
        return
    from jax._src.distributed import global_state  # the client Orbax's barriers use as well

    global_state.client.wait_at_barrier(name, COMMIT_TIMEOUT_MS)


class PendingCheckpoint:
    """A checkpoint being written in the background; `wait()` returns its path once it is committed."""

    def __init__(self, path: Location, commit: Callable[[], None]) -> None:
        self.path = path
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(commit,), name=f"checkpoint-{path}", daemon=True)
        self._thread.start()

    def _run(self, commit: Callable[[], None]) -> None:
        try:
            commit()
        except BaseException as error:  # re-raised in the training thread by wait()
            self._error = error

    def wait(self) -> Location:
        """Block until the checkpoint is committed; raise the write's error if it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self.path


_in_flight: PendingCheckpoint | None = None
_in_flight_lock = threading.Lock()


def wait_for_checkpoints() -> None:
    """Block until the checkpoint being written (if any) is committed: the end of training calls this."""
    global _in_flight
    with _in_flight_lock:
        pending, _in_flight = _in_flight, None
    if pending is not None:
        pending.wait()


def _write_record(directory: Location, record: dict[str, Any]) -> None:
    """Write `state.json` into `directory` atomically (a temporary file renamed, or one PUT)."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    storage.write_bytes(storage.join(directory, STATE_FILE), text.encode("utf-8"))


def start_write(
    directory: PathOrUrl,
    step: int,
    flat_trees: dict[str, dict[str, Any]],
    state: dict[str, object],
    on_commit: Callable[[], None] | None = None,
) -> PendingCheckpoint:
    """Start writing `flat_trees` ({tree: {path: array}}) to `directory`; `state.json` follows once all are written.

    Every process calls this with the same trees; each writes its own shards.
    `on_commit` runs on process 0 after the marker (pruning older checkpoints).
    """
    global _in_flight
    directory = os.fspath(directory)
    wait_for_checkpoints()
    main = jax.process_index() == 0
    if main:
        delete_checkpoint(directory)  # a leftover of a cut-short write, or a step a rewind trains again
    barrier = f"tootsie-checkpoint-{step}-{next(_barriers)}"
    _barrier(f"{barrier}-clear")
    staged = {
        tree: {str(i): tensor_store.host_shards(leaf) for i, leaf in enumerate(arrays.values())}
        for tree, arrays in flat_trees.items()
    }
    record = {
        "step": step,
        **state,
        TENSORS_KEY: {tree: list(arrays) for tree, arrays in flat_trees.items()},
    }

    def commit() -> None:
        futures = [
            future
            for tree, arrays in staged.items()
            for future in tensor_store.write_arrays(storage.join(directory, tree), arrays)
        ]
        for i, future in enumerate(futures):
            future.result()
            if i == len(futures) // 2:
                checkpoint_fault("mid-tensor", step)
        _barrier(f"{barrier}-written")
        checkpoint_fault("before-commit", step)
        if main:
            _write_record(directory, record)
            checkpoint_fault("after-commit", step)
            if on_commit is not None:
                on_commit()

    pending = PendingCheckpoint(directory, commit)
    with _in_flight_lock:
        _in_flight = pending
    return pending


def start_checkpoint(
    root: PathOrUrl,
    step: int,
    trees: dict[str, object],
    state: dict[str, object],
    on_commit: Callable[[], None] | None = None,
) -> PendingCheckpoint:
    """Start writing each tree's arrays under `<root>/step-N` (asynchronously); see `start_write`."""
    return start_write(
        checkpoint_dir(root, step), step, {name: _flat(tree) for name, tree in trees.items()}, state, on_commit
    )


def save_checkpoint(root: PathOrUrl, step: int, trees: dict[str, object], state: dict[str, object]) -> Location:
    """Write each tree plus `state.json` under `<root>/step-N` and wait until it is committed; return the directory."""
    return start_checkpoint(root, step, trees, state).wait()


def _check_names(checkpoint: Location, tree: str, stored: list[str], expected: list[str]) -> None:
    """A TootsieError naming the first missing and unexpected tensors when a tree does not match its template."""
    missing, unexpected = sorted(set(expected) - set(stored)), sorted(set(stored) - set(expected))
    if missing or unexpected:
        raise TootsieError(
            f"{checkpoint}/{tree} does not match this model: missing {missing[:3]}, unexpected {unexpected[:3]}; "
            "it was written for another architecture (warm-start with a conversion instead)"
        )


def _read_tree(checkpoint: Location, state: dict[str, Any], tree: str, template: Tree, sharding: Tree | None) -> Tree:
    """`template` with every array leaf read from the checkpoint's `tree`, placed on `sharding` when given."""
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    expected = [jax.tree_util.keystr(path) for path, _ in leaves_with_paths]
    stored = _stored_names(checkpoint, state, tree)
    _check_names(checkpoint, tree, stored, expected)
    position = {name: str(i) for i, name in enumerate(stored)}
    stores = tensor_store.open_arrays(storage.join(checkpoint, tree), [position[name] for name in expected])
    placements = [None] * len(expected) if sharding is None else jax.tree_util.tree_leaves(sharding)
    leaves = []
    for name, (_, leaf), place in zip(expected, leaves_with_paths, placements, strict=True):
        store, shape = stores[position[name]], tuple(np.shape(leaf))
        if tuple(store.shape) != shape or store.dtype.numpy_dtype != np.dtype(leaf.dtype):
            raise TootsieError(
                f"{checkpoint}/{tree}: tensor {name} is {store.dtype.numpy_dtype}{list(store.shape)}, "
                f"the model expects {np.dtype(leaf.dtype)}{list(shape)}"
            )
        if place is None:
            leaves.append(jax.numpy.asarray(tensor_store.read_host(store)))
        else:
            leaves.append(tensor_store.read_placed(store, place))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _stored_names(checkpoint: Location, state: dict[str, Any], tree: str) -> list[str]:
    """The array paths of `tree` as the state record lists them; a TootsieError when it has no such tree."""
    if TENSORS_KEY not in state:
        raise TootsieError(
            f"{checkpoint} is in the old safetensors format, which restores from local disk only; {CONVERT_HINT}"
        )
    names = state[TENSORS_KEY].get(tree)
    if names is None:
        raise TootsieError(
            f"checkpoint {checkpoint} has no {tree} (its {STATE_FILE} lists {sorted(state.get(TENSORS_KEY, {}))})"
        )
    return names


def load_checkpoint(
    path: PathOrUrl, templates: dict[str, Tree], shardings: dict[str, Tree] | None = None
) -> tuple[dict[str, Tree], dict[str, object]]:
    """Restore each named tree from `path` into its template's structure; also return state.json.

    Each tree is placed with `shardings[name]` when given (each device reads
    only its slice), else on the default device. Templates may be abstract
    (`jax.ShapeDtypeStruct` leaves): only shapes and dtypes are read from them.
    """
    path = os.fspath(path)
    state = read_checkpoint_state(path)
    trees = {}
    for name, template in templates.items():
        sharding = None if shardings is None else shardings[name]
        if is_legacy(path):
            trees[name] = legacy_tree(path, name, template, sharding)
        else:
            trees[name] = _read_tree(path, state, name, template, sharding)
        checkpoint_fault("restore", int(state["step"]))
    return trees, state


def read_checkpoint_state(checkpoint: PathOrUrl) -> dict[str, Any]:
    """A committed checkpoint's state.json (step, tokens, model config, ...).

    Errors name the file when it is missing or unreadable.
    """
    file = storage.join(os.fspath(checkpoint), STATE_FILE)
    data = storage.read_bytes(file)
    if data is None:
        raise TootsieError(
            f"{file} not found: {checkpoint} is not a finished checkpoint; "
            f"pass a checkpoints/step-N directory that holds {STATE_FILE}"
        )
    try:
        state = json.loads(data)
    except json.JSONDecodeError as error:
        raise TootsieError(
            f"{file} is not valid JSON ({error}); the checkpoint is damaged, use an earlier one"
        ) from None
    if not isinstance(state, dict):
        raise TootsieError(
            f"{file} holds a {type(state).__name__}, not a JSON object; the checkpoint is damaged, use an earlier one"
        )
    return state


def model_config_of(checkpoint: PathOrUrl) -> ModelConfig:
    """The model config a checkpoint's state.json records (a registry choice; no `kind:` is a Llama).

    How export, eval and release rebuild its model.
    """
    file = storage.join(os.fspath(checkpoint), STATE_FILE)
    model = read_checkpoint_state(checkpoint).get("model")
    if not isinstance(model, dict):
        raise TootsieError(
            f"{file} records no model config (its 'model' entry is {model!r}; written by "
            "an older tootsie); retrain or resave the checkpoint with a current trainer"
        )
    return model_config_from_plain(model, f"{file}:model")


def prune_temporary(root: PathOrUrl) -> None:
    """Delete temporary checkpoints except the newest checkpoint; permanent ones are always kept."""
    found = list_checkpoints(root)
    for _, path in found[:-1]:
        if read_checkpoint_state(path).get("kind") == "temporary":
            delete_checkpoint(path)


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


def has_tree(checkpoint: PathOrUrl, name: str) -> bool:
    """Whether a committed checkpoint holds the tree `name` (`ema` exists only when the run kept an EMA)."""
    checkpoint = os.fspath(checkpoint)
    if is_legacy(checkpoint):
        return name in legacy_trees(checkpoint)
    return name in read_checkpoint_state(checkpoint).get(TENSORS_KEY, {})


def convert_legacy_checkpoint(old: PathOrUrl, out: PathOrUrl) -> Location:
    """Rewrite an old-format checkpoint directory (`*.safetensors`) as a new one at `out`; return `out`."""
    if not is_legacy(old):
        raise TootsieError(f"{old} is not an old-format checkpoint (no model.safetensors); nothing to convert")
    if is_checkpoint(out):
        raise TootsieError(f"{out} already holds a checkpoint; pass a new --out directory")
    state = read_checkpoint_state(old)
    trees = {name: legacy_tensors(old, name) for name in legacy_trees(old)}
    record = {key: value for key, value in state.items() if key not in ("step", TENSORS_KEY)}
    return start_write(out, int(state["step"]), trees, record).wait()


def read_tensors(checkpoint: PathOrUrl, name: str) -> dict[str, np.ndarray] | None:
    """The whole tensors of tree `name` as host arrays keyed by path, or None when the checkpoint has no such tree.

    For warm starts and export, which read a checkpoint as saved, without a template.
    """
    checkpoint = os.fspath(checkpoint)
    if is_legacy(checkpoint):
        return legacy_tensors(checkpoint, name)
    state = read_checkpoint_state(checkpoint)
    if TENSORS_KEY in state and name not in state[TENSORS_KEY]:
        return None
    names = _stored_names(checkpoint, state, name)
    stores = tensor_store.open_arrays(storage.join(checkpoint, name), [str(i) for i in range(len(names))])
    return {path: tensor_store.read_host(stores[str(i)]) for i, path in enumerate(names)}
