"""The training forward's instability signals: each layer's largest attention logit, from the XLA path's own
logits and recomputed from q and k (the fused kernel's way), equal to a direct computation; the loss unchanged."""

import equinox as eqx
import jax
import numpy as np
import pytest

import tootsie.models.attention as attention
from tests.models.test_attention import packed_segment_ids
from tootsie.models.llama import ATTN_LOGIT_MAX, LlamaConfig, LlamaModel, block_inputs
from tootsie.models.moe import MoeConfig
from tootsie.monitor import signals

CONFIG = LlamaConfig(vocab_size=61, hidden_dim=32, intermediate_dim=64, num_layers=3, num_heads=4, num_kv_heads=2)


@pytest.mark.parametrize(("heads", "kv_heads", "block"), [(4, 4, 512), (4, 2, 8), (6, 1, 5)])
def test_logit_max_from_q_and_k_is_the_xla_paths_max(
    monkeypatch: pytest.MonkeyPatch, heads: int, kv_heads: int, block: int
) -> None:
    monkeypatch.setattr(attention, "LOGIT_MAX_QUERY_BLOCK", block)  # several blocks, the last one padded
    keys = jax.random.split(jax.random.PRNGKey(heads + block), 3)
    batch, seq, dim = 4, 23, 8
    q = 3 * jax.random.normal(keys[0], (batch, seq, heads, dim))
    k = jax.random.normal(keys[1], (batch, seq, kv_heads, dim))
    v = jax.random.normal(keys[2], (batch, seq, kv_heads, dim))
    segments = packed_segment_ids(seq, batch, seed=block)
    mask = attention.attention_mask(segments, batch, seq)
    out, logit_max = attention.xla_attention_and_logit_max(q, k, v, mask)
    np.testing.assert_array_equal(out, attention.xla_attention(q, k, v, mask))
    grouped = q.reshape(batch, seq, kv_heads, heads // kv_heads, dim) / np.sqrt(dim)
    logits = np.einsum("btkgd,bskd->bkgts", grouped, k)
    expected = np.where(np.asarray(mask)[:, :, None], logits, -np.inf).max()
    assert float(logit_max) == pytest.approx(float(expected), rel=1e-6)
    assert float(attention.logit_max_from_qk(q, k, segments)) == pytest.approx(float(expected), rel=1e-6)
    assert float(expected) < float(logits.max())  # the mask matters: a masked logit is larger


def _layer_maxima(model: LlamaModel, tokens: jax.Array, segments: jax.Array) -> list[float]:
    """Each layer's largest kept attention logit, by running the blocks one at a time outside the scan."""
    x, (cos, sin, _, mask) = block_inputs(model.config, model.embed, tokens, segments)
    maxima = []
    for layer in range(model.config.num_layers):
        block = jax.tree.map(lambda leaf, i=layer: leaf[i] if eqx.is_array(leaf) else leaf, model.layers)
        q, k, _ = block.attn.project(block.attn_norm(x), cos, sin)
        maxima.append(float(attention.logit_max_from_qk(q, k, segments)))
        x = block(x, cos, sin, segments, mask)
    return maxima


@pytest.mark.parametrize("qk_norm", [False, True])
def test_the_training_forward_reports_every_layers_largest_attention_logit(qk_norm: bool) -> None:
    model = LlamaModel(LlamaConfig(**{**CONFIG.__dict__, "qk_norm": qk_norm}), key=jax.random.PRNGKey(3))
    tokens = jax.random.randint(jax.random.PRNGKey(4), (3, 19), 0, CONFIG.vocab_size)
    segments = packed_segment_ids(19, 3, seed=4)
    hidden, _, metrics = model.hidden_states_and_aux(tokens, segments, signals=True)
    plain, _, none = model.hidden_states_and_aux(tokens, segments)
    np.testing.assert_allclose(hidden, plain, rtol=1e-6, atol=1e-6)
    assert none == {} and set(metrics) == {ATTN_LOGIT_MAX} and ATTN_LOGIT_MAX == signals.ATTN_LOGIT_MAX
    np.testing.assert_allclose(np.asarray(metrics[ATTN_LOGIT_MAX]), _layer_maxima(model, tokens, segments), rtol=1e-5)


def test_an_moe_model_reports_its_dense_layers_first() -> None:
    config = MoeConfig(
        vocab_size=61,
        hidden_dim=32,
        intermediate_dim=64,
        num_layers=3,
        num_heads=4,
        num_kv_heads=2,
        num_experts=4,
        experts_per_token=2,
        dense_layers=1,
    )
    model = config.build(key=jax.random.PRNGKey(5))
    tokens = jax.random.randint(jax.random.PRNGKey(6), (2, 16), 0, 61)
    _, loss, metrics = model.hidden_states_and_aux(tokens, signals=True)
    _, plain_loss, plain = model.hidden_states_and_aux(tokens)
    assert metrics[ATTN_LOGIT_MAX].shape == (3,) and ATTN_LOGIT_MAX not in plain
    assert float(loss) == pytest.approx(float(plain_loss))
    assert {name for name in metrics if name.startswith("moe/")} == set(plain)
    first = jax.tree.map(lambda leaf: leaf[0] if eqx.is_array(leaf) else leaf, model.dense)
    x, (cos, sin, segments, _) = block_inputs(config, model.embed, tokens, None)
    q, k, _ = first.attn.project(first.attn_norm(x), cos, sin)
    assert float(metrics[ATTN_LOGIT_MAX][0]) == pytest.approx(float(attention.logit_max_from_qk(q, k, None)), rel=1e-5)
