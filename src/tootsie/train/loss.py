"""Next-token cross-entropy with a loss mask and optional z-loss, in float32.

z-loss (`w * logsumexp(logits)^2`, PaLM) keeps the softmax normalizer near 1 so
logits cannot drift upward; the 8B deep cooldowns needed it (1e-4).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from tootsie.models.llama import LlamaModel


def token_nll(model: LlamaModel, tokens: Int[Array, "b t"], segment_ids: Int[Array, "b t"]) -> tuple[Float[Array, "b t"], Float[Array, "b t"]]:
    """Per-position negative log-likelihood of the next token, and the logsumexp of the logits."""
    logits = model(tokens, segment_ids).astype(jnp.float32)
    targets = jnp.roll(tokens, -1, axis=1)
    log_normalizer = jax.nn.logsumexp(logits, axis=-1)
    target_logits = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return log_normalizer - target_logits, log_normalizer


def next_token_loss(
    model: LlamaModel,
    tokens: Int[Array, "b t"],
    segment_ids: Int[Array, "b t"],
    loss_mask: Float[Array, "b t"],
    z_loss_weight: float,
) -> tuple[Float[Array, ""], tuple[Float[Array, ""], Float[Array, ""]]]:
    """Masked mean loss to optimize, with (cross-entropy, z-loss) as auxiliaries."""
    nll, log_normalizer = token_nll(model, tokens, segment_ids)
    count = jnp.maximum(loss_mask.sum(), 1.0)
    cross_entropy = (nll * loss_mask).sum() / count
    z_loss = (jnp.square(log_normalizer) * loss_mask).sum() / count
    return cross_entropy + z_loss_weight * z_loss, (cross_entropy, z_loss)


def cast_floats(tree: eqx.Module, dtype: jnp.dtype) -> eqx.Module:
    """Cast every floating-point array of `tree` to `dtype` (bf16 compute over fp32 master weights)."""
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, tree)
