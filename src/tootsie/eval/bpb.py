"""Bits-per-byte of a model on held-out token caches, per domain and averaged.

BPB = (sum of next-token NLL in nats) / ln 2 / (UTF-8 bytes of the predicted
tokens). Bytes come from each document's decoded text
(`datakit.token_bytes`: the bytes each token releases when its document is
decoded; special tokens count zero), so BPB is comparable across tokenizers,
any HF tokenizer included, unlike loss per token. Positions that would
predict across a document boundary are left out, as in training. The macro average weighs every
domain equally (Paloma's headline); the micro average weighs every byte.
"""

import math
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from tootsie.data.sequences import PackedSequences, next_token_loss_mask
from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.token_cache import open_token_cache
from tootsie.models.llama import LlamaModel
from tootsie.train.loss import token_nll


@dataclass(frozen=True)
class DomainBPB:
    """Totals of one domain's evaluation."""

    nats: float
    bytes: int
    tokens: int

    @property
    def bpb(self) -> float:
        """Bits per UTF-8 byte."""
        return self.nats / math.log(2) / max(self.bytes, 1)


@eqx.filter_jit
def _batch_totals(
    model: LlamaModel, tokens: jax.Array, segment_ids: jax.Array, mask: jax.Array, token_bytes: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    nll, _ = token_nll(model, tokens, segment_ids)
    target_bytes = jnp.roll(token_bytes, -1, axis=1)
    return (nll * mask).sum(), (target_bytes * mask).sum(), mask.sum()


def domain_bpb(
    model: LlamaModel,
    cache_dir: str,
    token_bytes: TokenBytes,
    seq_len: int,
    batch_size: int = 16,
    max_sequences: int | None = None,
) -> DomainBPB:
    """Evaluate the first `max_sequences` packed sequences of a cache (all when None)."""
    cache = open_token_cache(cache_dir)
    sequences = PackedSequences(cache, seq_len)
    count = sequences.num_sequences if max_sequences is None else min(max_sequences, sequences.num_sequences)
    counts = token_bytes.prefix(cache, count * seq_len)
    nats, total_bytes, tokens = 0.0, 0.0, 0.0
    for start in range(0, count, batch_size):
        indices = np.arange(start, start + batch_size)
        valid = indices < count
        token_ids, segments = sequences.read(np.where(valid, indices, 0))
        mask = next_token_loss_mask(segments) * valid[:, None]
        byte_rows = np.zeros((batch_size, seq_len), dtype=np.float32)  # rows past `count` stay zero
        byte_rows[: int(valid.sum())] = counts[start * seq_len : (start + batch_size) * seq_len].reshape(-1, seq_len)
        batch_nats, batch_bytes, batch_tokens = _batch_totals(
            model, jnp.asarray(token_ids), jnp.asarray(segments), jnp.asarray(mask), jnp.asarray(byte_rows)
        )
        nats, total_bytes, tokens = (
            nats + float(batch_nats),
            total_bytes + float(batch_bytes),
            tokens + float(batch_tokens),
        )
    return DomainBPB(nats=nats, bytes=int(total_bytes), tokens=int(tokens))


def summarize(results: dict[str, DomainBPB]) -> dict[str, float]:
    """Per-domain BPB plus `macro_avg` (mean over domains) and `micro_avg` (over all bytes)."""
    summary = {name: result.bpb for name, result in sorted(results.items())}
    summary["macro_avg"] = float(np.mean([r.bpb for r in results.values()]))
    summary["micro_avg"] = (
        sum(r.nats for r in results.values()) / math.log(2) / max(sum(r.bytes for r in results.values()), 1)
    )
    return summary
