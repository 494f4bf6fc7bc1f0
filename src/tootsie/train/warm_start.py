"""Warm starts: load a checkpoint's weights into a model, converting between architectures.

The one conversion the seeds needed is Marin 32B's Phase 3 surgery: Llama
weights into the same shape with QK-norm (Qwen3 style). Every tensor of the
checkpoint is copied; the new per-head norm scales are initialized to one, so
at the first step the attention is exactly what it was, scaled by the norms.
Any other difference (a missing or extra tensor, a shape change) is an error
that names the tensor: converting it would be guessing.

Example: `warm_start_model(llama_checkpoint, LlamaModel(qk_config, key=...), add_qk_norm=True)`
returns the QK-norm model with Llama's weights and `q_norm.weight == 1`.
"""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from safetensors.numpy import load_file

from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaModel
from tootsie.train.checkpoint import flatten_arrays

QK_NORM_KEYS = (".layers.attn.q_norm.weight", ".layers.attn.k_norm.weight")


def warm_start_model(checkpoint: Path, template: LlamaModel, add_qk_norm: bool = False) -> LlamaModel:
    """`template` with every tensor from `checkpoint/model.safetensors`, adding QK-norm scales if asked."""
    file = Path(checkpoint) / "model.safetensors"
    if not file.is_file():
        raise TootsieError(f"{file} not found: warm starts need a finished tootsie checkpoint directory")
    source = load_file(str(file))
    params, static = eqx.partition(template, eqx.is_array)
    expected = flatten_arrays(params)
    new = [key for key in expected if key not in source]
    allowed_new = set(QK_NORM_KEYS) if add_qk_norm else set()
    if set(new) - allowed_new:
        hint = " (a Llama checkpoint into a QK-norm model: set add_qk_norm)" if set(new) <= set(QK_NORM_KEYS) else ""
        raise TootsieError(f"checkpoint {file} lacks {sorted(set(new) - allowed_new)[:3]} that the model needs{hint}")
    extra = sorted(set(source) - set(expected))
    if extra:
        raise TootsieError(f"checkpoint {file} has tensors {extra[:3]} that the model does not; it is another architecture")
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(params)
    leaves = []
    for path, leaf in leaves_with_paths:
        key = jax.tree_util.keystr(path)
        if key in new:
            leaves.append(jnp.ones_like(leaf))
            continue
        if source[key].shape != leaf.shape:
            raise TootsieError(f"checkpoint {file}: {key} has shape {source[key].shape}, the model expects {leaf.shape}")
        leaves.append(jnp.asarray(np.asarray(source[key]), dtype=leaf.dtype))
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), static)
