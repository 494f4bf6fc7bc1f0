"""Direct preference optimization (Rafailov et al. 2023): the loss, pair log-probs, and the reference table.

A training row holds one preference pair (`datakit.preference_data`): the
chosen conversation, then the rejected one, one document. `pair_logprobs`
splits the row into two attention segments at the chosen part's length
(RoPE attention depends only on relative positions, so the rejected half
scores as it would alone) and sums the next-token log-probs of each half's
reply tokens (the loss mask). With π and ref the policy's and the frozen
reference's summed log-probs, rewards are `β (π − ref)` and

    loss = −log σ(β [(π_c − ref_c) − (π_r − ref_r)])

averaged over pairs. The reference's log-probs are computed once by the
`eval.reference_logprobs` executor step and read here as a table indexed by
the pair's document index, which the batch already carries as the row's
segment id: the trainer's batches need nothing new.

Example: β = 0.1, π_c − ref_c = 2, π_r − ref_r = −1 gives a margin 0.1·3 =
0.3, loss −log σ(0.3) = 0.5544, chosen reward 0.2, rejected reward −0.1.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json
from tootsie.models.llama import LlamaModel
from tootsie.train.loss import token_nll

REFERENCE_LOGPROBS_FILE = "logprobs.npy"
"""`[pairs, 2]` float32: the reference's summed reply log-probs of (chosen, rejected), by pair."""
CHOSEN_LENGTHS_FILE = "chosen_lengths.npy"
"""`[pairs]` int32: where each pair's chosen conversation ends in its document."""
REFERENCE_RECORD_FILE = "reference.json"
"""The reference step's record (checkpoint, its sha256, cache, seq_len, counts), written last."""


def split_segments(segment_ids: Int[Array, "b t"], chosen_lengths: Int[Array, " b"]) -> Int[Array, "b t"]:
    """Segment ids with each row's chosen part (positions < its length) and rejected part apart; padding stays −1."""
    positions = jnp.arange(segment_ids.shape[1])[None, :]
    rejected_half = (positions >= chosen_lengths[:, None]).astype(segment_ids.dtype)
    return jnp.where(segment_ids >= 0, 2 * (segment_ids % 2**30) + rejected_half, -1)


def pair_logprobs(
    model: LlamaModel,
    tokens: Int[Array, "b t"],
    segment_ids: Int[Array, "b t"],
    loss_mask: Float[Array, "b t"],
    chosen_lengths: Int[Array, " b"],
) -> tuple[Float[Array, " b"], Float[Array, " b"]]:
    """Summed next-token log-probs of each row's chosen and rejected reply tokens (where `loss_mask` is on)."""
    segments = split_segments(segment_ids, chosen_lengths)
    nll, _ = token_nll(model, tokens, segments)
    same = jnp.concatenate([segments[:, 1:] == segments[:, :-1], jnp.zeros_like(segments[:, :1], bool)], axis=1)
    logp = -nll * loss_mask.astype(jnp.float32) * same
    chosen = jnp.arange(tokens.shape[1])[None, :] < chosen_lengths[:, None]
    return jnp.where(chosen, logp, 0.0).sum(axis=1), jnp.where(chosen, 0.0, logp).sum(axis=1)


def dpo_loss(
    policy_chosen: Float[Array, " b"],
    policy_rejected: Float[Array, " b"],
    reference_chosen: Float[Array, " b"],
    reference_rejected: Float[Array, " b"],
    beta: float,
    weights: Float[Array, " b"],
) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
    """The `weights`-weighted mean DPO loss over pairs and its metrics (means over the same pairs).

    Metrics: `loss`, `reward_margin` (β·margin), `preference_accuracy` (chosen
    reward above rejected), `chosen_reward` and `rejected_reward`.
    """
    chosen_reward = beta * (policy_chosen - reference_chosen)
    rejected_reward = beta * (policy_rejected - reference_rejected)
    margin = chosen_reward - rejected_reward
    share = weights / jnp.maximum(weights.sum(), 1.0)
    loss = (-jax.nn.log_sigmoid(margin) * share).sum()
    metrics = {
        "loss": loss,
        "reward_margin": (margin * share).sum(),
        "preference_accuracy": ((margin > 0).astype(jnp.float32) * share).sum(),
        "chosen_reward": (chosen_reward * share).sum(),
        "rejected_reward": (rejected_reward * share).sum(),
    }
    return loss, {name: jax.lax.stop_gradient(value) for name, value in metrics.items()}


def read_reference(directory: str) -> tuple[np.ndarray, np.ndarray]:
    """The reference step's (log-prob table `[pairs, 2]`, chosen lengths `[pairs]`) from its output directory."""
    root = Path(directory)
    if read_json(root / REFERENCE_RECORD_FILE) is None:
        raise TootsieError(
            f"{root} has no {REFERENCE_RECORD_FILE}: it is not a finished reference log-prob step; "
            "build it with eval.reference_logprobs.reference_logprobs_step (tootsie dpo --example-config does)"
        )
    logprobs = np.load(root / REFERENCE_LOGPROBS_FILE, allow_pickle=False)
    lengths = np.load(root / CHOSEN_LENGTHS_FILE, allow_pickle=False)
    if logprobs.shape != (len(lengths), 2):
        raise TootsieError(
            f"{root}: {REFERENCE_LOGPROBS_FILE} has shape {logprobs.shape}, expected ({len(lengths)}, 2) "
            f"to match {CHOSEN_LENGTHS_FILE}; rebuild the reference step"
        )
    return logprobs.astype(np.float32), lengths.astype(np.int32)
