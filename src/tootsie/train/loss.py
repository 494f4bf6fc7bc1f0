"""Next-token cross-entropy with a loss mask and optional z-loss, in float32.

z-loss (`w * logsumexp(logits)^2`, PaLM) keeps the softmax normalizer near 1 so
logits cannot drift upward; the 8B deep cooldowns needed it (1e-4). The mean
log normalizer itself (log Z, the quantity z-loss pulls toward 0) comes out of
the same pass as an auxiliary value: its drift is what z-loss exists to stop.
So do the largest output logit and the largest log Z over the loss positions
(`HeadStats`), the output-logit divergence signals of Wortsman et al. (2023):
each chunk reduces its own logits while they are in memory, so the signals
cost one max per chunk, not another pass over a `[positions, vocab]` array.

The training loss never materializes the `[batch, seq, vocab]` logits: the
output projection, softmax and their gradients run chunk by chunk inside the
forward pass (a fused linear cross-entropy with a custom VJP), so the step
keeps only hidden-sized residuals. Same FLOPs as the plain version, a fraction
of its memory and memory traffic.
"""

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from tootsie.models.llama import LlamaModel


def token_nll(
    model: LlamaModel, tokens: Int[Array, "b t"], segment_ids: Int[Array, "b t"]
) -> tuple[Float[Array, "b t"], Float[Array, "b t"]]:
    """Per-position negative log-likelihood of the next token, and the logsumexp of the logits."""
    logits = model(tokens, segment_ids).astype(jnp.float32)
    targets = jnp.roll(tokens, -1, axis=1)
    log_normalizer = jax.nn.logsumexp(logits, axis=-1)
    target_logits = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return log_normalizer - target_logits, log_normalizer


class HeadStats(NamedTuple):
    """What the loss pass reports besides the loss it returns: means and maxima over the loss positions."""

    cross_entropy: Float[Array, ""]
    """Mean next-token cross-entropy."""
    z_loss: Float[Array, ""]
    """Mean squared log normalizer (before its weight)."""
    log_z: Float[Array, ""]
    """Mean log normalizer, log Z."""
    logit_max: Float[Array, ""]
    """The largest output logit."""
    log_z_max: Float[Array, ""]
    """The largest log normalizer."""


def next_token_loss(
    model: LlamaModel,
    tokens: Int[Array, "b t"],
    segment_ids: Int[Array, "b t"],
    loss_mask: Float[Array, "b t"],
    z_loss_weight: float,
) -> tuple[Float[Array, ""], HeadStats]:
    """Masked mean loss to optimize, with the cross-entropy, z-loss, log Z and the output-logit maxima."""
    return head_loss(model, model.hidden_states(tokens, segment_ids), tokens, loss_mask, z_loss_weight)


def head_loss(
    model: LlamaModel,
    hidden: Float[Array, "b t h"],
    tokens: Int[Array, "b t"],
    loss_mask: Float[Array, "b t"],
    z_loss_weight: float,
    maxima: bool = True,
) -> tuple[Float[Array, ""], HeadStats]:
    """`next_token_loss` from hidden states the caller computed (the MoE training forward's, with its router terms).

    Without `maxima` the pass skips the two reductions and `logit_max`, `log_z_max` are -inf.
    """
    weights = loss_mask.astype(jnp.float32) / jnp.maximum(loss_mask.sum(), 1.0)
    targets = jnp.roll(tokens, -1, axis=1).reshape(-1)
    total, *aux = fused_head_loss(
        hidden.reshape(-1, hidden.shape[-1]),
        model.output_head().astype(hidden.dtype),
        targets,
        weights.reshape(-1),
        z_loss_weight,
        maxima,
    )
    return total, HeadStats(*(jax.lax.stop_gradient(value) for value in aux))


LOSS_CHUNK_TOKENS = 1024
"""Positions projected to the vocabulary at once: bounds the logits in memory to `LOSS_CHUNK_TOKENS × vocab`."""


def _chunked(array: jax.Array, chunk: int) -> jax.Array:
    """`array` padded with zeros along axis 0 to a multiple of `chunk` and split into `[n_chunks, chunk, ...]`."""
    pad = (-array.shape[0]) % chunk
    padded = jnp.pad(array, [(0, pad)] + [(0, 0)] * (array.ndim - 1))
    return padded.reshape(-1, chunk, *array.shape[1:])


@partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def fused_head_loss(
    hidden: Float[Array, "n h"],
    head: Float[Array, "h v"],
    targets: Int[Array, " n"],
    weights: Float[Array, " n"],
    z_loss_weight: float,
    maxima: bool = True,
) -> tuple[Float[Array, ""], ...]:
    """`(ce + z_loss_weight·z, ce, z, log_z, logit_max, log_z_max)` for logits `hidden @ head` in float32.

    `ce`, `z` (squared log normalizers) and `log_z` are `weights`-weighted sums;
    the maxima are over the positions of positive weight (-inf when there are
    none, or when `maxima` is off). Only the first output is differentiable (its gradient is computed in
    the forward pass); `head_loss` stops the gradient of the others.
    """
    outputs, _ = _fused_forward(hidden, head, targets, weights, z_loss_weight, maxima)
    return outputs


def _fused_forward(
    hidden: jax.Array, head: jax.Array, targets: jax.Array, weights: jax.Array, z_loss_weight: float, maxima: bool
):
    """The four outputs and the gradients of the total w.r.t. `hidden` and `head`, one chunk of positions at a time."""
    chunk = min(LOSS_CHUNK_TOKENS, hidden.shape[0])
    vocab = jnp.arange(head.shape[1])

    def one_chunk(head_grad, inputs):
        h, target, weight = inputs
        logits = jnp.dot(h, head, preferred_element_type=jnp.float32)  # bf16 compute: fp32 logits
        log_normalizer = jax.nn.logsumexp(logits, axis=-1)
        probs = jnp.exp(logits - log_normalizer[:, None])
        is_target = vocab[None, :] == target[:, None]
        nll = log_normalizer - jnp.where(is_target, logits, 0.0).sum(-1)
        # d/dlogits of sum w·(nll + z_loss_weight·lse²): w·(softmax − onehot) + 2·z_loss_weight·w·lse·softmax
        d_logits = (
            weight[:, None] * (probs * (1.0 + 2.0 * z_loss_weight * log_normalizer[:, None]) - is_target)
        ).astype(h.dtype)
        head_grad = head_grad + jnp.einsum("nh,nv->hv", h, d_logits, preferred_element_type=jnp.float32)
        losses = jnp.stack(
            [(weight * nll).sum(), (weight * jnp.square(log_normalizer)).sum(), (weight * log_normalizer).sum()]
        )
        counted = weight > 0
        largest = (
            jnp.stack(
                [
                    jnp.where(counted, logits.max(axis=-1), -jnp.inf).max(),
                    jnp.where(counted, log_normalizer, -jnp.inf).max(),
                ]
            )
            if maxima
            else jnp.full((2,), -jnp.inf)
        )
        return head_grad, (losses, largest, d_logits @ head.T)

    inputs = (_chunked(hidden, chunk), _chunked(targets, chunk), _chunked(weights, chunk))
    head_grad, (losses, largest, hidden_grad) = jax.lax.scan(one_chunk, jnp.zeros(head.shape, jnp.float32), inputs)
    cross_entropy, z_loss, log_z = losses.sum(0)
    logit_max, log_z_max = largest.max(0)
    outputs = (cross_entropy + z_loss_weight * z_loss, cross_entropy, z_loss, log_z, logit_max, log_z_max)
    return outputs, (hidden_grad.reshape(-1, hidden.shape[1])[: hidden.shape[0]], head_grad.astype(head.dtype))


def _fused_fwd(hidden, head, targets, weights, z_loss_weight, maxima):
    outputs, grads = _fused_forward(hidden, head, targets, weights, z_loss_weight, maxima)
    return outputs, (grads, targets, weights)


def _fused_bwd(z_loss_weight, maxima, residuals, cotangents):
    (hidden_grad, head_grad), targets, weights = residuals
    total_cotangent = cotangents[0]
    # Targets are integers (float0 cotangent); the weights come from the loss mask, which is data.
    return (
        total_cotangent.astype(hidden_grad.dtype) * hidden_grad,
        total_cotangent.astype(head_grad.dtype) * head_grad,
        np.zeros(targets.shape, dtype=jax.dtypes.float0),
        jnp.zeros_like(weights),
    )


fused_head_loss.defvjp(_fused_fwd, _fused_bwd)


def cast_floats(tree: eqx.Module, dtype: jnp.dtype) -> eqx.Module:
    """Cast every floating-point array of `tree` to `dtype` (bf16 compute over fp32 master weights)."""
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, tree)
