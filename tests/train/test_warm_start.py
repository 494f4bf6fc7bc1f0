"""Llama → QK-norm warm start copies every weight and starts the new norms at one."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import save_checkpoint
from tootsie.train.warm_start import warm_start_model

LLAMA = LlamaConfig(vocab_size=50, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)
QK = LlamaConfig(**{**LLAMA.__dict__, "qk_norm": True})


@pytest.fixture
def checkpoint(tmp_path):
    model = LlamaModel(LLAMA, key=jax.random.PRNGKey(0))
    return save_checkpoint(tmp_path, 100, {"model": eqx.filter(model, eqx.is_array)}, {}), model


def test_llama_into_qk_norm(checkpoint) -> None:
    path, llama = checkpoint
    qk = warm_start_model(path, LlamaModel(QK, key=jax.random.PRNGKey(9)), add_qk_norm=True)
    assert np.array_equal(qk.layers.attn.wq, llama.layers.attn.wq) and np.array_equal(qk.embed, llama.embed)
    assert np.all(qk.layers.attn.q_norm.weight == 1.0) and qk.layers.attn.q_norm.weight.shape == (2, 8)
    tokens = jax.random.randint(jax.random.PRNGKey(1), (1, 6), 0, 50)
    assert jnp.isfinite(jax.device_put(qk)(tokens)).all()  # the trainer places the loaded host arrays first


def test_conversions_must_be_asked_for_and_shapes_must_match(checkpoint, tmp_path) -> None:
    path, _ = checkpoint
    with pytest.raises(TootsieError, match="set add_qk_norm"):
        warm_start_model(path, LlamaModel(QK, key=jax.random.PRNGKey(9)))
    wider = LlamaConfig(**{**LLAMA.__dict__, "intermediate_dim": 48})
    with pytest.raises(TootsieError, match="w_gate has shape"):
        warm_start_model(path, LlamaModel(wider, key=jax.random.PRNGKey(9)))
