"""Warm starts: load a checkpoint's weights into a model (converting architectures) and carry its optimizer state.

Weights. The one conversion the seeds needed is Marin 32B's Phase 3 surgery:
Llama weights into the same shape with QK-norm (Qwen3 style). Every tensor of
the checkpoint is copied; the new per-head norm scales are initialized to one,
so at the first step the attention is exactly what it was, scaled by the norms.
Any other difference (a missing or extra tensor, a shape change) is an error
that names the tensor: converting it would be guessing.

Optimizer state. A checkpoint keys tensors by their position in the state tree
(`[1][0].mu.layers.attn.wq`), and that position moves whenever the optimizer
chain changes: AdamW → AdamC, or update clipping / skip-bad-steps wrapped
around it (`.inner_state[0][1].mu.layers.attn.wq`). So tensors are matched by
what they are: a tensor's *identity* is its state's kind (the sorted names of
that state's fields, e.g. `count+mu+nu` for Adam, whichever optax or tootsie
transform made it), its field, and, for moments (`mu`, `nu`), the parameter
path. Adam's moments and their bias-correction count thus carry across
optimizers and wrappers; statistics a new tool brings (a clip history, skip
thresholds, AdamC's running peak) start fresh and are reported; an identity
that occurs twice in one tree (the schedule counts inside Muon's partition) is
ambiguous and starts fresh. Schedule counts need no carrying: the trainer sets
them from the global step before every update.

Example: `[1][0].mu.layers.attn.wq` (AdamW) and `.inner_state[0][1].mu.layers.attn.wq`
(AdamC under skip-bad-steps and update clipping) are both
`count+mu+nu:mu.layers.attn.wq`, so the second is filled from the first.
"""

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TypeVar

import equinox as eqx
import jax
import numpy as np

from tootsie.errors import TootsieError
from tootsie.train.checkpoint import Location, is_tensor, read_tensors

Tree = TypeVar("Tree")
Model = TypeVar("Model", bound=eqx.Module)
QK_NORM_KEYS = (".layers.attn.q_norm.weight", ".layers.attn.k_norm.weight")
MOMENT_FIELDS = ("mu", "nu")
"""Optimizer-state fields that hold one tensor per parameter (optax's first and second moments, Muon's momentum)."""
_MOMENT = re.compile(r"\.(mu|nu)(?=[.\[]|$)")
_FIELD = re.compile(r"\.(\w+)$")


def warm_start_model(checkpoint: Location, template: Model, add_qk_norm: bool = False) -> Model:
    """`template` with every tensor of the checkpoint's model as host arrays, adding QK-norm scales if asked.

    The template may be abstract (`eqx.filter_eval_shape`): only its structure, shapes and dtypes are used.
    """
    file = f"{checkpoint}/model"
    source = read_tensors(checkpoint, "model")
    if source is None:
        raise TootsieError(f"{file} not found: warm starts need a finished tootsie checkpoint directory")
    params, static = eqx.partition(template, is_tensor)
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(params)
    expected = [jax.tree_util.keystr(path) for path, _ in leaves_with_paths]
    new = [key for key in expected if key not in source]
    allowed_new = set(QK_NORM_KEYS) if add_qk_norm else set()
    if set(new) - allowed_new:
        hint = " (a Llama checkpoint into a QK-norm model: set add_qk_norm)" if set(new) <= set(QK_NORM_KEYS) else ""
        raise TootsieError(f"checkpoint {file} lacks {sorted(set(new) - allowed_new)[:3]} that the model needs{hint}")
    extra = sorted(set(source) - set(expected))
    if extra:
        raise TootsieError(
            f"checkpoint {file} has tensors {extra[:3]} that the model does not; it is another architecture"
        )
    leaves = []
    for key, (_, leaf) in zip(expected, leaves_with_paths):
        if key in new:
            leaves.append(np.ones(leaf.shape, leaf.dtype))
            continue
        if source[key].shape != leaf.shape:
            raise TootsieError(
                f"checkpoint {file}: {key} has shape {source[key].shape}, the model expects {leaf.shape}"
            )
        leaves.append(np.asarray(source[key], dtype=leaf.dtype))
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), static)


def _split(name: str) -> tuple[str, str, str]:
    """(state, field, parameter path) of a flat optimizer-state tensor name."""
    moment = _MOMENT.search(name)
    if moment:
        return name[: moment.start()], moment.group(1), name[moment.end() :]
    field = _FIELD.search(name)
    if field:
        return name[: field.start()], field.group(1), ""
    return name, "", ""  # a bare array leaf, not a field of a state: its position is all it has


def state_identities(names: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Identity of each optimizer-state tensor name, and the names whose identity is not unique.

    An identity is `<state kind>:<field><parameter path>`.
    """
    parts = {name: _split(name) for name in names}
    fields: dict[str, set[str]] = defaultdict(set)
    for state, field, _ in parts.values():
        fields[state].add(field)
    identities = {
        name: f"{'+'.join(sorted(fields[state]))}:{field}{param}" for name, (state, field, param) in parts.items()
    }
    counts = Counter(identities.values())
    unique = {name: identity for name, identity in identities.items() if counts[identity] == 1}
    return unique, sorted(set(identities) - set(unique))


def carry_optimizer_state(fresh: Tree, saved: dict[str, np.ndarray]) -> tuple[Tree, list[str], list[str]]:
    """`fresh` with every leaf whose identity and shape match a saved tensor replaced by it.

    Each replacement is a host array in the leaf's dtype.


    Returns the tree, the names of leaves left fresh (new statistics, ambiguous
    identities, reshaped tensors) and the saved tensors left unused.
    """
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(fresh)
    names = [jax.tree_util.keystr(path) for path, _ in leaves_with_paths]
    target, _ = state_identities(names)
    source = {identity: name for name, identity in state_identities(saved)[0].items()}
    leaves, kept_fresh, used = [], [], set()
    for name, (_, leaf) in zip(names, leaves_with_paths):
        match = source.get(target.get(name, ""))
        if match is not None and saved[match].shape == np.shape(leaf):
            leaves.append(np.asarray(saved[match], dtype=leaf.dtype))
            used.add(match)
        else:
            leaves.append(leaf)
            kept_fresh.append(name)
    return jax.tree_util.tree_unflatten(treedef, leaves), kept_fresh, sorted(set(saved) - used)
