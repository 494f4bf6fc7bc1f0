"""Bits-per-byte equals the hand computation from logits, byte counts and the loss mask."""

import math

import jax
import jax.numpy as jnp
import numpy as np
from tokenizers import Tokenizer, decoders, models

from tootsie.data.sequences import next_token_loss_mask
from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.token_cache import open_token_cache
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.models.llama import LlamaConfig, LlamaModel


def _letters_tokenizer(vocab: int) -> Tokenizer:
    """Ids 0-2 special; id i >= 3 is a run of 1 + (i % 3) copies of one ASCII letter (that many bytes)."""
    words = {"<pad>": 0, "<s>": 1, "</s>": 2} | {chr(ord("a") + i - 3) * (1 + i % 3): i for i in range(3, vocab)}
    tokenizer = Tokenizer(models.BPE(vocab=words, merges=[]))
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<pad>", "<s>", "</s>"])
    return tokenizer


def test_bpb_matches_a_hand_computation(make_cache) -> None:
    vocab = 20
    documents = [[1, 5, 6, 7, 8, 2], [1, 9, 10, 11, 12, 13, 14, 2], [1, 3, 4, 2]]
    cache_dir = make_cache("heldout", documents, vocab)
    byte_lengths = np.array([0, 0, 0] + [1 + (i % 3) for i in range(3, vocab)])
    model = LlamaModel(
        LlamaConfig(vocab_size=vocab, hidden_dim=16, intermediate_dim=16, num_layers=1, num_heads=2, num_kv_heads=2),
        key=jax.random.PRNGKey(0),
    )

    result = domain_bpb(model, cache_dir, TokenBytes(_letters_tokenizer(vocab)), seq_len=6, batch_size=2)

    cache = open_token_cache(cache_dir)
    tokens = np.asarray(cache.tokens).reshape(-1, 6)  # 18 tokens → 3 sequences of 6
    segments = (np.searchsorted(cache.offsets, np.arange(18), side="right") - 1).reshape(-1, 6)
    mask = next_token_loss_mask(segments)
    log_probs = np.asarray(
        jax.nn.log_softmax(model(jnp.asarray(tokens, jnp.int32), jnp.asarray(segments, jnp.int32)), axis=-1)
    )
    nats, total_bytes = 0.0, 0
    for row in range(3):
        for t in range(5):
            if mask[row, t]:
                target = tokens[row, t + 1]
                nats -= log_probs[row, t, target]
                total_bytes += byte_lengths[target]
    assert result.bytes == total_bytes
    assert math.isclose(result.bpb, nats / math.log(2) / total_bytes, rel_tol=1e-5)


def test_macro_and_micro_averages() -> None:
    from tootsie.eval.bpb import DomainBPB

    a, b = (
        DomainBPB(nats=math.log(2) * 100, bytes=100, tokens=50),
        DomainBPB(nats=math.log(2) * 600, bytes=200, tokens=80),
    )
    summary = summarize({"a": a, "b": b})
    assert summary["a"] == 1.0 and summary["b"] == 3.0
    assert summary["macro_avg"] == 2.0 and math.isclose(summary["micro_avg"], 700 / 300)
