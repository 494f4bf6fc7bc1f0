"""Held-out loss on assistant tokens only: the SFT figure.

A chat cache (tokens plus `loss_mask.bin`) is packed as in training (whole
conversations, `data.sequences.WholeDocumentSequences`) and the mean
next-token NLL, in nats, is taken over the positions whose target is an
assistant token: the replies and their end of turn, never the system or user
text nor the template's headers. A base model and its SFT child evaluated on
the same held-out cache are directly comparable.
"""

from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from tootsie.data.sequences import WholeDocumentSequences, next_token_loss_mask
from tootsie.datakit.token_cache import open_token_cache
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaModel
from tootsie.train.loss import token_nll


@dataclass(frozen=True)
class AssistantLoss:
    """Summed NLL over assistant target tokens and their count."""

    nats: float
    tokens: int

    @property
    def loss(self) -> float:
        """Mean NLL per assistant token, in nats."""
        return self.nats / max(self.tokens, 1)


@eqx.filter_jit
def _batch_totals(
    model: LlamaModel, tokens: jax.Array, segment_ids: jax.Array, mask: jax.Array
) -> tuple[jax.Array, jax.Array]:
    nll, _ = token_nll(model, tokens, segment_ids)
    return (nll * mask).sum(), mask.sum()


def assistant_loss(model: LlamaModel, cache_dir: str, seq_len: int, batch_size: int = 16) -> AssistantLoss:
    """Mean next-token NLL over every assistant token of a chat cache."""
    cache = open_token_cache(cache_dir)
    if cache.loss_mask is None:
        raise TootsieError(
            f"{cache_dir} has no loss mask; tokenize chat data with `tootsie datakit tokenize --format chat`"
        )
    sequences = WholeDocumentSequences(cache, seq_len)
    nats, tokens = 0.0, 0.0
    for start in range(0, sequences.num_sequences, batch_size):
        indices = np.arange(start, start + batch_size)
        valid = indices < sequences.num_sequences
        rows = np.where(valid, indices, 0)
        token_ids, segments = sequences.read(rows)
        mask = next_token_loss_mask(segments, sequences.token_mask(rows)) * valid[:, None]
        batch_nats, batch_tokens = _batch_totals(
            model, jnp.asarray(token_ids), jnp.asarray(segments), jnp.asarray(mask)
        )
        nats, tokens = nats + float(batch_nats), tokens + float(batch_tokens)
    return AssistantLoss(nats=nats, tokens=int(tokens))
