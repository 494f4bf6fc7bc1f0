"""Training objectives: what the train step minimizes, chosen in configs as `objective: {kind: next_token}`.

The train step knows no loss by name. It calls the configured objective's
`loss(model, tokens, segment_ids, loss_mask, z_loss_weight)`, which returns the
scalar to differentiate and a dict of metrics for the step's record, and its
`batch_weight`, which weights microbatches under gradient accumulation so the
accumulated loss equals the full batch's. Pretraining's next-token loss is the
one member today; SFT's assistant-only loss and DPO register here as they come.

Example: `NextTokenObjective().loss(model, tokens, segments, mask, 1e-4)` gives
`(cross_entropy + 1e-4 * z_loss, {"loss": cross_entropy, "z_loss": z_loss})`,
both means over the positions where `mask` is on.
"""

from dataclasses import dataclass

from jaxtyping import Array, Float, Int

from tootsie.configfile import registry_union
from tootsie.models.llama import LlamaModel
from tootsie.train.loss import next_token_loss


@dataclass(frozen=True)
class NextTokenObjective:
    """Mean next-token cross-entropy over the positions the loss mask keeps, plus the z-loss term (pretraining)."""

    def loss(
        self,
        model: LlamaModel,
        tokens: Int[Array, "b t"],
        segment_ids: Int[Array, "b t"],
        loss_mask: Float[Array, "b t"],
        z_loss_weight: float,
    ) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
        """The scalar to minimize and the step metrics `loss` (cross-entropy) and `z_loss`."""
        total, (cross_entropy, z_loss) = next_token_loss(model, tokens, segment_ids, loss_mask, z_loss_weight)
        return total, {"loss": cross_entropy, "z_loss": z_loss}

    def batch_weight(
        self, tokens: Int[Array, "b t"], segment_ids: Int[Array, "b t"], loss_mask: Float[Array, "b t"]
    ) -> Float[Array, ""]:
        """A microbatch's share of the batch loss: its count of loss positions (the loss is a mean over them)."""
        return loss_mask.sum()


OBJECTIVES: dict[str, type] = {"next_token": NextTokenObjective}
ObjectiveChoice = registry_union(OBJECTIVES)
"""Any registered objective, written `{kind: NAME}` in a config; a new objective is one registry entry."""
