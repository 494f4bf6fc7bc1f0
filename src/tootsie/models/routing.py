"""Token-choice top-k routing for a mixture of experts: which experts each token goes to, at what weight, and where.

Every token's router logits `[tokens, experts]` (float32) go through a softmax;
the token picks its `k` most probable experts. Its combine weights are those
probabilities renormalised to sum to 1 over the chosen k (`renormalized`, the
default: Mixtral, Qwen3-MoE's `norm_topk_prob`), or the probabilities as they
are (`softmax`: the chosen experts' share of the whole distribution, Qwen2-MoE
and DeepSeek-V2).

Assignments (token, choice) are laid out choice-major, `[k, tokens]`: every
token's first choice before any second choice. An expert takes at most
`capacity` of them, in that order (GShard's priority: a token's first choice
is dropped only when the expert is full of first choices), and the rest are
dropped: their expert output is not computed into the token, which keeps only
its residual for that choice. `capacity_slots` turns a capacity factor into
slots per expert: `ceil(cf · tokens · k / experts)`, all the tokens when the
factor is None (dropless) or at least `experts / k`.

The statistics the objective and the run log read come out of the same pass
(`RouterStats`): the Switch load-balancing loss `E · Σ_i f_i · P_i` (f_i: the
share of routed slots sent to expert i before drops, P_i: its mean router
probability; 1.0 at uniform load, E/k when every token sends its k
choices to the same k experts), the router z-loss
(mean squared logsumexp of the logits, ST-MoE), the dropped fraction, the
busiest expert's share, and the router entropy.

Example: 4 tokens, 2 experts, k = 1, capacity factor 1.0 gives 2 slots per
expert; if all four tokens prefer expert 0, tokens 0 and 1 keep it, 2 and 3
are dropped, the dropped fraction is 0.5, the max load 1.0, and the
load-balancing loss 2 · (1.0 · P_0 + 0 · P_1).
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from tootsie.configfile import names_literal

ROUTER_WEIGHTS = {
    "renormalized": "softmax over all experts, renormalised over the chosen k",
    "softmax": "softmax over all experts, the chosen k's probabilities as they are",
}
"""How a token's combine weights come from its router probabilities (`MoeConfig.router_weights`)."""
RouterWeights = names_literal(ROUTER_WEIGHTS)
"""The type of `MoeConfig.router_weights`: a key of ROUTER_WEIGHTS."""


class Routing(NamedTuple):
    """Where each of a layer's `k × tokens` assignments goes, choice-major (`[k, tokens]`)."""

    experts: Int[Array, "k tokens"]
    """The chosen expert of each assignment."""
    weights: Float[Array, "k tokens"]
    """Combine weights; 0 for a dropped assignment."""
    position: Int[Array, "k tokens"]
    """The assignment's place in its expert's queue (kept when below the capacity)."""
    kept: Bool[Array, "k tokens"]
    """Whether the expert had room for it."""
    order: Int[Array, " assignments"]
    """Flat assignment indices sorted by expert (stable, so each expert's queue is in priority order)."""
    counts: Int[Array, " experts"]
    """Assignments per expert before drops."""


class RouterStats(NamedTuple):
    """One layer's router statistics: the two auxiliary losses and the diagnostics the run log keeps."""

    load_balancing_loss: Float[Array, ""]
    """Switch's `E · Σ_i f_i · P_i`: 1.0 at uniform load."""
    router_z_loss: Float[Array, ""]
    """Mean over tokens of logsumexp(router logits)²."""
    dropped_fraction: Float[Array, ""]
    """Dropped assignments over routed assignments."""
    max_load: Float[Array, ""]
    """The busiest expert's share of routed assignments (1/E at uniform load)."""
    router_entropy: Float[Array, ""]
    """Mean over tokens of the entropy of the router distribution (nats)."""
    expert_load: Float[Array, " experts"]
    """Each expert's share of routed assignments, before drops."""


def capacity_slots(tokens: int, num_experts: int, k: int, capacity_factor: float | None) -> int:
    """Slots per expert: `ceil(cf · tokens · k / experts)`, at most `tokens` (None: dropless, `tokens`)."""
    if capacity_factor is None:
        return tokens
    return max(1, min(tokens, math.ceil(capacity_factor * tokens * k / num_experts)))


def route(logits: Float[Array, "tokens experts"], k: int, weights: str, capacity: int) -> tuple[Routing, RouterStats]:
    """Top-k routing of every token under a per-expert `capacity`, and the layer's router statistics."""
    tokens, num_experts = logits.shape
    probs = jax.nn.softmax(logits, axis=-1)
    top_probs, top_experts = jax.lax.top_k(probs, k)
    if weights == "renormalized":
        top_probs = top_probs / top_probs.sum(axis=-1, keepdims=True)
    experts = top_experts.T.astype(jnp.int32)
    flat = experts.reshape(-1)
    order = jnp.argsort(flat, stable=True).astype(jnp.int32)
    counts = jnp.bincount(flat, length=num_experts).astype(jnp.int32)
    starts = jnp.cumsum(counts) - counts
    rank = jnp.arange(flat.size, dtype=jnp.int32) - starts[flat[order]]
    position = jnp.zeros_like(flat).at[order].set(rank).reshape(k, tokens)
    kept = position < capacity
    routing = Routing(experts, jnp.where(kept, top_probs.T, 0.0), position, kept, order, counts)
    load = counts.astype(jnp.float32) / flat.size
    log_normalizer = jax.nn.logsumexp(logits, axis=-1)
    stats = RouterStats(
        load_balancing_loss=num_experts * jnp.sum(load * probs.mean(axis=0)),
        router_z_loss=jnp.mean(jnp.square(log_normalizer)),
        dropped_fraction=1.0 - kept.mean(dtype=jnp.float32),
        max_load=load.max(),
        router_entropy=-jnp.mean(jnp.sum(probs * jax.nn.log_softmax(logits, axis=-1), axis=-1)),
        expert_load=load,
    )
    return routing, stats
