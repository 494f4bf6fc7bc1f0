"""Training objectives: what the train step minimizes, chosen in configs as `objective: {kind: next_token}`.

The train step knows no loss by name. It calls the configured objective's
`loss(model, tokens, segment_ids, loss_mask, z_loss_weight, **fields)`, which returns the
scalar to differentiate and a dict of metrics for the step's record, and its
`batch_weight`, which weights microbatches under gradient accumulation so the
accumulated loss equals the full batch's. `fields` names the batch arrays the
objective needs beyond tokens, segments and mask (an RL objective's rollout
log-probs and advantages, `train.rl_objectives`); the data source provides
them and the step passes them by name. Pretraining's next-token loss serves
SFT too (the batch's loss mask is on assistant tokens only); `dpo` trains on
preference pairs against a reference's log-probs (`train.dpo`); `rloo` and
`grpo` are policy-gradient objectives over RL rollouts and `distill` on-policy
distillation from a teacher (`train.rl_objectives`).

Auxiliary metrics: every entry of the metrics dict reaches the step's record
under its own name, computed inside the jitted step (no host callback): a
scalar or a vector (logged as a list), averaged over microbatches with the
objective's `batch_weight` (a name ending in `_max` is a maximum: it takes
the largest microbatch's). Diagnostics that are not losses go under `aux/`
(`AUX_PREFIX`): `aux/log_z`, the mean log softmax normalizer, and the
instability signals below; MoE router loads come from the model through its
objective the same way (`moe/load_balancing_loss`, `moe/expert_load`, … from
`tootsie.models.moe`).

The instability signals (`signals=True`, the default) are the small-scale
proxies of Wortsman et al. (2023) for the failures the retrospectives report:
`aux/attn_logit_max` (each layer's largest pre-softmax attention logit, what
QK-norm bounds), `aux/logit_max` and `aux/log_z_max` (the largest output logit
and log normalizer, what z-loss bounds). They leave the loss unchanged, cost
about 1 % of a step (docs/stability.md), and only add to metrics.jsonl, which
is why the switch is not hashed.

Example: `NextTokenObjective().loss(model, tokens, segments, mask, 1e-4)` gives
`(cross_entropy + 1e-4 * z_loss, {"loss": cross_entropy, "z_loss": z_loss, "aux/log_z": log_z, ...})`,
each a mean over the positions where `mask` is on (the maxima: over them).
"""

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from tootsie.configfile import registry_union, unhashed
from tootsie.models.llama import LlamaModel
from tootsie.train.dpo import dpo_loss, pair_logprobs, read_reference
from tootsie.train.loss import head_loss
from tootsie.train.rl_objectives import DistillObjective, GRPOObjective, RLOOObjective

AUX_PREFIX = "aux/"
"""Record-name prefix of an objective's auxiliary metrics: values it reports that are not losses."""


@dataclass(frozen=True)
class NextTokenObjective:
    """Mean next-token cross-entropy over the positions the loss mask keeps, plus the z-loss term (pretraining)."""

    fields: ClassVar[tuple[str, ...]] = ()
    signals: bool = unhashed(True)
    """Log the instability signals `aux/attn_logit_max`, `aux/logit_max`, `aux/log_z_max` (metrics only)."""

    def loss(
        self,
        model: LlamaModel,
        tokens: Int[Array, "b t"],
        segment_ids: Int[Array, "b t"],
        loss_mask: Float[Array, "b t"],
        z_loss_weight: float,
    ) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
        """The scalar to minimize and the step metrics `loss` (cross-entropy), `z_loss`, `aux/log_z`, and the signals.

        A model with auxiliary losses of its own (an MoE's router terms) adds them to the scalar and its metrics
        (`moe/…`) to the dict, both from its training forward `hidden_states_and_aux`.
        """
        hidden, model_loss, model_metrics = model.hidden_states_and_aux(tokens, segment_ids, signals=self.signals)
        total, head = head_loss(model, hidden, tokens, loss_mask, z_loss_weight, maxima=self.signals)
        signals = (
            {f"{AUX_PREFIX}logit_max": head.logit_max, f"{AUX_PREFIX}log_z_max": head.log_z_max} if self.signals else {}
        )
        return total + model_loss, {
            "loss": head.cross_entropy,
            "z_loss": head.z_loss,
            f"{AUX_PREFIX}log_z": head.log_z,
            **signals,
            **model_metrics,
        }

    def batch_weight(
        self, tokens: Int[Array, "b t"], segment_ids: Int[Array, "b t"], loss_mask: Float[Array, "b t"]
    ) -> Float[Array, ""]:
        """A microbatch's share of the batch loss: its count of loss positions (the loss is a mean over them)."""
        return loss_mask.sum()


@dataclass(frozen=True)
class DPOObjective:
    """DPO on preference pairs, one per row (`packing: {kind: document}` over a `datakit.preference_data` cache).

    The row's segment id is its pair's index into the reference table, so the
    data must be the one pair cache the reference step scored. The z-loss
    weight is not used.
    """

    fields: ClassVar[tuple[str, ...]] = ()
    reference: str
    """The reference log-prob step's output directory (`eval.reference_logprobs`)."""
    beta: float = 0.1
    """β: how far the policy may move from the reference (0.1, the DPO paper's and Tulu 3's common value)."""

    def __post_init__(self) -> None:
        if not self.beta > 0:
            raise ValueError(f"beta must be positive, got {self.beta}; e.g. 0.1")

    @cached_property
    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        """(reference log-probs, chosen lengths) as host arrays: they enter each traced step as constants."""
        return read_reference(self.reference)

    def loss(
        self,
        model: LlamaModel,
        tokens: Int[Array, "b t"],
        segment_ids: Int[Array, "b t"],
        loss_mask: Float[Array, "b t"],
        z_loss_weight: float,
    ) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
        """Mean DPO loss over the rows' pairs, with `reward_margin`, `preference_accuracy` and the rewards."""
        reference, lengths = (jnp.asarray(table) for table in self._table)
        valid = segment_ids[:, 0] >= 0
        pair = jnp.where(valid, segment_ids[:, 0], 0)
        chosen, rejected = pair_logprobs(model, tokens, segment_ids, loss_mask, lengths[pair])
        return dpo_loss(chosen, rejected, reference[pair, 0], reference[pair, 1], self.beta, valid.astype(jnp.float32))

    def batch_weight(
        self, tokens: Int[Array, "b t"], segment_ids: Int[Array, "b t"], loss_mask: Float[Array, "b t"]
    ) -> Float[Array, ""]:
        """A microbatch's share of the batch loss: its count of pairs (the loss is a mean over pairs)."""
        return (segment_ids[:, 0] >= 0).sum().astype(jnp.float32)


OBJECTIVES: dict[str, type] = {
    "next_token": NextTokenObjective,
    "dpo": DPOObjective,
    "rloo": RLOOObjective,
    "grpo": GRPOObjective,
    "distill": DistillObjective,
}
ObjectiveChoice = registry_union(OBJECTIVES)
"""Any registered objective, written `{kind: NAME}` in a config; a new objective is one registry entry."""
