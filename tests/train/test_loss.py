"""The fused, chunked training loss equals the plain logits-then-softmax loss, in value and gradient."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tootsie.train.loss as loss_module
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.loss import next_token_loss, token_nll

CONFIG = LlamaConfig(vocab_size=97, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2)


def _batch() -> tuple[jax.Array, jax.Array, jax.Array]:
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(0, CONFIG.vocab_size, (3, 37)), jnp.int32)
    segments = jnp.asarray(np.repeat([[0] * 20 + [1] * 17], 3, axis=0), jnp.int32)
    mask = jnp.asarray(rng.random((3, 37)) > 0.3, jnp.float32)
    return tokens, segments, mask


def _plain_loss(model: LlamaModel, tokens, segments, mask, z_loss_weight: float):
    nll, log_normalizer = token_nll(model, tokens, segments)
    count = jnp.maximum(mask.sum(), 1.0)
    cross_entropy, z_loss = (nll * mask).sum() / count, (jnp.square(log_normalizer) * mask).sum() / count
    log_z = (log_normalizer * mask).sum() / count
    logits = model(tokens, segments).astype(jnp.float32)
    logit_max = jnp.where(mask > 0, logits.max(-1), -jnp.inf).max()
    log_z_max = jnp.where(mask > 0, log_normalizer, -jnp.inf).max()
    return cross_entropy + z_loss_weight * z_loss, (cross_entropy, z_loss, log_z, logit_max, log_z_max)


@pytest.mark.parametrize("z_loss_weight", [0.0, 1e-2])
@pytest.mark.parametrize("chunk", [16, 4096])  # several chunks with padding, and one chunk
@pytest.mark.parametrize("remat", ["full", "none"])
def test_fused_loss_matches_plain_loss_and_gradients(
    monkeypatch: pytest.MonkeyPatch, z_loss_weight: float, chunk: int, remat: str
) -> None:
    monkeypatch.setattr(loss_module, "LOSS_CHUNK_TOKENS", chunk)
    model = LlamaModel(LlamaConfig(**{**CONFIG.__dict__, "remat": remat}), key=jax.random.PRNGKey(0))
    batch = _batch()
    (plain, plain_aux), plain_grads = eqx.filter_value_and_grad(
        lambda m: _plain_loss(m, *batch, z_loss_weight), has_aux=True
    )(model)
    (fused, fused_aux), fused_grads = eqx.filter_value_and_grad(
        lambda m: next_token_loss(m, *batch, z_loss_weight), has_aux=True
    )(model)
    np.testing.assert_allclose(float(fused), float(plain), rtol=1e-6)
    np.testing.assert_allclose(np.array(fused_aux), np.array(plain_aux), rtol=1e-6)
    for got, want in zip(jax.tree_util.tree_leaves(fused_grads), jax.tree_util.tree_leaves(plain_grads), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-7)


def test_z_loss_weight_changes_the_gradient_of_the_head() -> None:
    model = LlamaModel(CONFIG, key=jax.random.PRNGKey(1))
    batch = _batch()
    without = eqx.filter_grad(lambda m: next_token_loss(m, *batch, 0.0)[0])(model)
    with_z = eqx.filter_grad(lambda m: next_token_loss(m, *batch, 1.0)[0])(model)
    assert float(jnp.max(jnp.abs(without.lm_head - with_z.lm_head))) > 1e-4


def test_bfloat16_compute_stays_close_to_float32() -> None:
    model = LlamaModel(CONFIG, key=jax.random.PRNGKey(2))
    batch = _batch()
    full = float(next_token_loss(model, *batch, 0.0)[0])
    half = float(next_token_loss(loss_module.cast_floats(model, jnp.bfloat16), *batch, 0.0)[0])
    assert abs(full - half) < 0.05


def test_without_maxima_the_loss_is_the_same_and_the_maxima_are_not_computed() -> None:
    model = LlamaModel(CONFIG, key=jax.random.PRNGKey(3))
    tokens, segments, mask = _batch()
    hidden = model.hidden_states(tokens, segments)
    total, stats = loss_module.head_loss(model, hidden, tokens, mask, 1e-2)
    bare_total, bare = loss_module.head_loss(model, hidden, tokens, mask, 1e-2, maxima=False)
    assert float(bare_total) == float(total) and float(bare.log_z) == float(stats.log_z)
    assert float(bare.logit_max) == float(bare.log_z_max) == -np.inf
    assert float(stats.logit_max) > float(stats.log_z_max) - np.log(CONFIG.vocab_size)  # a real maximum
