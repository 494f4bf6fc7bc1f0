"""Policy-gradient math for RL with verifiable rewards: advantages, the clipped ratio objective, KL to a reference.

Pure JAX functions over arrays, no model and no rollout types, so the train
layer can build RLOO/GRPO objectives on them without importing `tootsie.rl`
(which sits above it). Shapes: rewards come as `[groups, G]` (G samples of
one prompt per row); token arrays as `[b, t]` with `mask` on the completion
tokens, aligned so that `logp[i, t] = log π(tokens[i, t] | tokens[i, :t])`
(`token_logprobs` builds them from logits that way).

- Advantages. GRPO (Shao et al. 2024): `A_i = (r_i − mean_g r) / (std_g r + eps)`,
  the population std (ddof 0) over the group's included samples. RLOO (Ahmadian
  et al. 2024): `A_i = r_i − mean_{j≠i} r_j`, which sums to zero over a group.
  A sample whose reward is excluded (`mask` off: a truncated completion whose
  reward is None) gets advantage 0 and is left out of its group's baseline.
- Clipped objective (PPO, Schulman et al. 2017): `ratio = exp(logp_policy −
  logp_rollout)`, per token `−min(ratio·A, clip(ratio, 1−ε, 1+ε)·A)`. The clip
  fraction is the share of completion tokens with `|ratio − 1| > ε` (Stable
  Baselines' definition). At ratio 1 (the first update on fresh rollouts)
  its gradient is the plain policy gradient `−A ∇logp`.
- KL to the frozen reference, estimated per token from samples of the policy
  (Schulman, "Approximating KL divergence", 2020), with `log r = logp_ref −
  logp_policy`: `k1 = −log r` (unbiased, can be negative), `k2 = ½ (log r)²`
  (biased, low variance), `k3 = (r − 1) − log r` (unbiased, ≥ 0). As a loss
  term differentiated through `logp_policy` (the samples are not), their
  expected gradients differ from their values: k2's is exactly ∇ KL(π ‖ ref),
  k1's is zero (log it, do not penalize with it), k3's is ∇ KL(ref ‖ π), the
  forward KL (tests/rl/test_policy_loss.py checks all three on a categorical).
  So `KLConfig` defaults to k2, and `policy_loss` logs k3's value as `rl/kl`
  whichever estimator is penalized.

Token terms reduce to one value per sequence by a masked mean over its
completion tokens (`sequence_mean`), then to the batch by a weighted mean over
sequences (weight 0 drops a sequence). Example: rewards `[[1, 0, 0, 1]]` give
RLOO advantages `[[2/3, −2/3, −2/3, 2/3]]` and GRPO `[[1, −1, −1, 1]]` (eps
aside); at ratio 1 with A = 2/3 the per-token loss is −2/3.
"""

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

KL_KINDS = ("k1", "k2", "k3")
"""Schulman's estimators of KL(policy ‖ reference) from policy samples."""


@dataclass(frozen=True)
class KLConfig:
    """The KL-to-reference penalty: which estimator, and its weight in the loss."""

    kind: str = "k2"
    """One of KL_KINDS: k1 = −log r, k2 = ½(log r)², k3 = (r − 1) − log r, with r = p_ref / p_policy (k2: its
    gradient as a loss term is exactly that of KL(policy ‖ reference); see the module docstring)."""
    coef: float = 0.0
    """Weight of the mean KL estimate in the loss (0 logs the KL without penalizing it)."""

    def __post_init__(self) -> None:
        if self.kind not in KL_KINDS:
            raise ValueError(f"kl.kind={self.kind!r} is not one of {', '.join(KL_KINDS)}; k2 is the default")
        if not self.coef >= 0:
            raise ValueError(f"kl.coef={self.coef} must be >= 0 (0 logs the KL without a penalty)")


def token_logprobs(
    logits: Float[Array, "b t vocab"], tokens: Int[Array, "b t"]
) -> tuple[Float[Array, "b t"], Float[Array, "b t"]]:
    """Per token: log π(tokens[:, t] | tokens[:, :t]) and the entropy of that next-token distribution (float32).

    Position 0 has no prediction and gets 0 in both; the logits at t−1 predict token t.
    """
    logp_all = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logp_all, tokens[:, 1:, None], axis=-1)[..., 0]
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
    zero = jnp.zeros_like(picked[:, :1])
    return jnp.concatenate([zero, picked], axis=1), jnp.concatenate([zero, entropy], axis=1)


def grpo_advantages(
    rewards: Float[Array, "groups g"], mask: Bool[Array, "groups g"], eps: float = 1e-6
) -> Float[Array, "groups g"]:
    """GRPO's group-normalized advantages `(r − group mean) / (group std + eps)` over the included samples."""
    weight = mask.astype(jnp.float32)
    count = jnp.maximum(weight.sum(axis=1, keepdims=True), 1.0)
    mean = (rewards * weight).sum(axis=1, keepdims=True) / count
    std = jnp.sqrt((jnp.square(rewards - mean) * weight).sum(axis=1, keepdims=True) / count)
    return jnp.where(mask, (rewards - mean) / (std + eps), 0.0)


def rloo_advantages(rewards: Float[Array, "groups g"], mask: Bool[Array, "groups g"]) -> Float[Array, "groups g"]:
    """RLOO's advantages `r_i − mean of the other included rewards`; 0 where excluded or alone in its group."""
    weight = mask.astype(jnp.float32)
    count = weight.sum(axis=1, keepdims=True)
    others = (rewards * weight).sum(axis=1, keepdims=True) - rewards * weight
    baseline = others / jnp.maximum(count - 1.0, 1.0)
    return jnp.where(mask & (count > 1.0), rewards - baseline, 0.0)


def sequence_mean(values: Float[Array, "b t"], mask: Bool[Array, "b t"]) -> Float[Array, " b"]:
    """Each row's mean over its masked-on tokens (0 for a row with none)."""
    weight = mask.astype(jnp.float32)
    return (values * weight).sum(axis=1) / jnp.maximum(weight.sum(axis=1), 1.0)


def batch_mean(per_sequence: Float[Array, " b"], weights: Float[Array, " b"]) -> Float[Array, ""]:
    """The weighted mean over sequences (0 when every weight is 0)."""
    return (per_sequence * weights).sum() / jnp.maximum(weights.sum(), 1e-12)


def clipped_objective(
    logp_policy: Float[Array, "b t"],
    logp_rollout: Float[Array, "b t"],
    advantages: Float[Array, " b"],
    mask: Bool[Array, "b t"],
    clip_eps: float,
) -> tuple[Float[Array, "b t"], Float[Array, ""]]:
    """Per-token clipped surrogate loss `−min(ratio·A, clip(ratio, 1±ε)·A)` and the clip fraction over `mask`."""
    ratio = jnp.exp(logp_policy - jax.lax.stop_gradient(logp_rollout))
    advantage = advantages[:, None]
    unclipped = ratio * advantage
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantage
    loss = jnp.where(mask, -jnp.minimum(unclipped, clipped), 0.0)
    outside = ((jnp.abs(ratio - 1.0) > clip_eps) & mask).astype(jnp.float32)
    fraction = outside.sum() / jnp.maximum(mask.astype(jnp.float32).sum(), 1.0)
    return loss, jax.lax.stop_gradient(fraction)


def kl_estimate(
    logp_policy: Float[Array, "b t"], logp_reference: Float[Array, "b t"], kind: str
) -> Float[Array, "b t"]:
    """Per-token estimate of KL(policy ‖ reference) on policy samples by Schulman's `kind` (k1, k2 or k3)."""
    log_r = jax.lax.stop_gradient(logp_reference) - logp_policy
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * jnp.square(log_r)
    if kind == "k3":
        return jnp.expm1(log_r) - log_r
    raise ValueError(f"kl kind {kind!r} is not one of {', '.join(KL_KINDS)}")


def policy_loss(
    logp_policy: Float[Array, "b t"],
    logp_rollout: Float[Array, "b t"],
    logp_reference: Float[Array, "b t"],
    advantages: Float[Array, " b"],
    mask: Bool[Array, "b t"],
    weights: Float[Array, " b"],
    clip_eps: float,
    kl: KLConfig,
) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
    """The loss to minimize, clipped surrogate + kl.coef · KL (per-sequence token means, weighted over sequences),
    and its metrics: `rl/pg_loss`, `rl/kl_penalty` (the configured estimator's mean), `rl/kl` (always k3's mean,
    the unbiased nonnegative estimate a KL bound is stated in), `rl/clip_fraction`, `rl/ratio_mean`."""
    counted = mask & (weights > 0)[:, None]
    surrogate, clip_fraction = clipped_objective(logp_policy, logp_rollout, advantages, counted, clip_eps)
    pg_loss = batch_mean(sequence_mean(surrogate, mask), weights)
    kl_value = batch_mean(sequence_mean(kl_estimate(logp_policy, logp_reference, kl.kind), mask), weights)
    kl_k3 = batch_mean(sequence_mean(kl_estimate(logp_policy, logp_reference, "k3"), mask), weights)
    ratio = jnp.exp(jax.lax.stop_gradient(logp_policy - logp_rollout))
    metrics = {
        "rl/pg_loss": jax.lax.stop_gradient(pg_loss),
        "rl/kl_penalty": jax.lax.stop_gradient(kl_value),
        "rl/kl": jax.lax.stop_gradient(kl_k3),
        "rl/clip_fraction": clip_fraction,
        "rl/ratio_mean": batch_mean(sequence_mean(ratio, mask), weights),
    }
    return pg_loss + kl.coef * kl_value, metrics
