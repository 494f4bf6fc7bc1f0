"""RL objectives: policy gradients over rollouts (`rloo`, `grpo`) and on-policy distillation (`distill`).

They are training objectives like next-token prediction (`train.objectives`):
the train step calls their `loss` on a batch, here one iteration's rollouts as
rows (`tootsie.rl.buffer`): prompt + completion `tokens`, `loss_mask` on the
completion tokens of every completion whose reward counts, and the `fields`
the objective names, each `[rows, seq]`:

- `rollout_logprobs`: log π(token) under the policy that sampled the rollout,
  recomputed at temperature 1 with no top-k/top-p (the sampler's own
  probabilities are not the policy's, `rl.rollout`);
- `reference_logprobs`: the same under the frozen reference;
- `advantages`: the row's advantage, repeated along the row.

The policy-gradient loss is `train.policy_loss.policy_loss`: the PPO-clipped
surrogate on `exp(logp_now − rollout_logprobs)` (ratio 1 on the first update
of fresh rollouts, so clipping acts only when an iteration takes more than one
update) plus `kl.coef` times the configured KL estimator. RLOO and GRPO differ
only in the advantages, which the rollout buffer computes per group when it
scores an iteration (`advantages`): RLOO's leave-one-out baseline or GRPO's
group-normalized rewards.

`distill` trains the student on a teacher's per-token distribution over the
student's own samples: at every completion position, the exact reverse KL
`Σ_v p_s(v) (log p_s(v) − log p_t(v))` over the vocabulary, with the teacher's
log-probs computed in the step from its checkpoint (no reward is needed; the
environment's rewards are only logged).

Example: `RLOOObjective(clip_eps=0.2, kl=KLConfig("k2", 0.05))` in a config is
`objective: {kind: rloo, clip_eps: 0.2, kl: {kind: k2, coef: 0.05}}`.
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from tootsie.models.kv_cache import DecoderModel
from tootsie.train.loading import load_model, model_config_of, resolve_checkpoint
from tootsie.train.policy_loss import (
    KLConfig,
    batch_mean,
    grpo_advantages,
    policy_loss,
    rloo_advantages,
    sequence_mean,
    token_logprobs,
)

RL_FIELDS = ("rollout_logprobs", "reference_logprobs", "advantages")
"""The batch arrays a policy-gradient objective trains on, besides tokens and the completion mask."""


def _row_weights(loss_mask: Float[Array, "b t"]) -> Float[Array, " b"]:
    """1 for a row with any counted completion token, else 0 (an excluded completion carries no gradient)."""
    return (loss_mask.max(axis=1) > 0).astype(jnp.float32)


def _training_logits(model: DecoderModel, tokens: Int[Array, "b t"]) -> tuple[Float[Array, "b t v"], Array]:
    """The model's logits and its own auxiliary loss (an MoE's router terms; zero for a Llama)."""
    hidden, model_loss, _ = model.hidden_states_and_aux(tokens)
    return hidden @ model.output_head().astype(hidden.dtype), model_loss


@dataclass(frozen=True)
class _PolicyGradient:
    """The clipped policy-gradient loss with a KL penalty; subclasses choose the advantages."""

    fields: ClassVar[tuple[str, ...]] = RL_FIELDS
    clip_eps: float = 0.2
    """PPO's ε: the ratio is clipped to [1 − ε, 1 + ε] (acts from the second update on one rollout batch)."""
    kl: KLConfig = field(default_factory=KLConfig)
    """KL to the frozen reference: the estimator (k1, k2, k3) and its weight."""

    def __post_init__(self) -> None:
        if not 0 < self.clip_eps < 1:
            raise ValueError(f"clip_eps={self.clip_eps} must be in (0, 1); 0.2 is PPO's default")

    def advantages(self, rewards: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """`[groups, G]` advantages of `[groups, G]` rewards whose `mask` is on (0 where off)."""
        raise NotImplementedError

    def loss(
        self,
        model: DecoderModel,
        tokens: Int[Array, "b t"],
        segment_ids: Int[Array, "b t"],
        loss_mask: Float[Array, "b t"],
        z_loss_weight: float,
        rollout_logprobs: Float[Array, "b t"],
        reference_logprobs: Float[Array, "b t"],
        advantages: Float[Array, "b t"],
    ) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
        """The policy loss and its metrics (`rl/pg_loss`, `rl/kl`, `rl/clip_fraction`, ...); `loss` is the total."""
        logits, model_loss = _training_logits(model, tokens)
        logp, _ = token_logprobs(logits, tokens)
        mask = loss_mask > 0
        total, metrics = policy_loss(
            logp,
            rollout_logprobs,
            reference_logprobs,
            advantages[:, 0],
            mask,
            _row_weights(loss_mask),
            self.clip_eps,
            self.kl,
        )
        return total + model_loss, {"loss": total, **metrics}

    def batch_weight(
        self,
        tokens: Int[Array, "b t"],
        segment_ids: Int[Array, "b t"],
        loss_mask: Float[Array, "b t"],
        **fields: Array,
    ) -> Float[Array, ""]:
        """A microbatch's share of the batch loss: its counted completions (the loss is a mean over them)."""
        return _row_weights(loss_mask).sum()


@dataclass(frozen=True)
class RLOOObjective(_PolicyGradient):
    """REINFORCE leave-one-out: each completion's advantage is its reward minus the mean of its group's others."""

    def advantages(self, rewards: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """RLOO advantages per group (`train.policy_loss.rloo_advantages`)."""
        return np.asarray(rloo_advantages(jnp.asarray(rewards), jnp.asarray(mask)), np.float32)


@dataclass(frozen=True)
class GRPOObjective(_PolicyGradient):
    """GRPO: each completion's advantage is its reward standardized within its group."""

    def advantages(self, rewards: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """GRPO advantages per group (`train.policy_loss.grpo_advantages`)."""
        return np.asarray(grpo_advantages(jnp.asarray(rewards), jnp.asarray(mask)), np.float32)


@dataclass(frozen=True)
class DistillObjective:
    """On-policy distillation: reverse KL to a teacher's next-token distribution on the student's own samples."""

    fields: ClassVar[tuple[str, ...]] = ()
    teacher: str
    """The teacher's checkpoint, or a training output directory (its newest checkpoint); its model config is read
    from the checkpoint, so the teacher may be larger than the student (same tokenizer)."""

    @cached_property
    def teacher_model(self) -> eqx.Module:
        """The teacher, loaded once; its weights enter the step as constants (no gradient reaches them)."""
        checkpoint = resolve_checkpoint(self.teacher)
        with jax.ensure_compile_time_eval():  # first read inside the traced step: keep the weights concrete
            return load_model(model_config_of(checkpoint), checkpoint)

    def advantages(self, rewards: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """No advantages: distillation's signal is the teacher, not the reward (zeros; rewards are only logged)."""
        return np.zeros(rewards.shape, np.float32)

    def loss(
        self,
        model: DecoderModel,
        tokens: Int[Array, "b t"],
        segment_ids: Int[Array, "b t"],
        loss_mask: Float[Array, "b t"],
        z_loss_weight: float,
    ) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
        """Mean per-token reverse KL(student ‖ teacher) over the completion tokens, as `loss` and `rl/reverse_kl`."""
        logits, model_loss = _training_logits(model, tokens)
        student = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), axis=-1)
        teacher = jax.nn.log_softmax(jax.lax.stop_gradient(self.teacher_model(tokens))[:, :-1], axis=-1)
        per_token = jnp.sum(jnp.exp(student) * (student - teacher.astype(jnp.float32)), axis=-1)
        per_token = jnp.concatenate([jnp.zeros_like(per_token[:, :1]), per_token], axis=1)
        mask = loss_mask > 0
        kl = batch_mean(sequence_mean(per_token, mask), _row_weights(loss_mask))
        return kl + model_loss, {"loss": kl, "rl/reverse_kl": jax.lax.stop_gradient(kl)}

    def batch_weight(
        self, tokens: Int[Array, "b t"], segment_ids: Int[Array, "b t"], loss_mask: Float[Array, "b t"]
    ) -> Float[Array, ""]:
        """A microbatch's share of the batch loss: its rows with completion tokens."""
        return _row_weights(loss_mask).sum()
