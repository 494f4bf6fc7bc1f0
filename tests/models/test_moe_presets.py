"""The MoE presets: the seeds' shapes, and their totals, actives and FLOPs against the weekly update's figures."""

import equinox as eqx
import jax
import pytest

from tootsie.models.moe import MoeConfig
from tootsie.models.presets import LLAMA3_VOCAB, PRESETS


def test_moe_1e23_has_the_seeds_shape_and_comes_to_129b_total_16b_active() -> None:
    config = PRESETS["moe-1e23"]
    assert isinstance(config, MoeConfig)
    shape = (config.num_layers, config.hidden_dim, config.num_heads, config.num_kv_heads, config.vocab_size)
    assert shape == (48, 5120, 40, 10, LLAMA3_VOCAB)
    assert (config.num_experts, config.experts_per_token, config.capacity_factor, config.dense_layers) == (
        64,
        4,
        1.0,
        0,
    )
    # Seeds: "131B total / ~16B active". Expert width 2560 (NOT IN SEEDS) gives 1.5% under 131B.
    assert config.num_parameters() == 129_046_123_520
    assert config.active_parameters() == 15_799_915_520
    assert config.num_parameters() == pytest.approx(131e9, rel=0.02)
    assert config.active_parameters() == pytest.approx(16e9, rel=0.02)
    # 1e23 FLOPs at seq 4096 is ~1.02T tokens in the seeds.
    assert 1e23 / config.flops_per_token(4096) == pytest.approx(1.02e12, rel=0.02)


def test_moe_1e22_comes_to_the_seeds_34_6b_total_4_7b_active() -> None:
    config = PRESETS["moe-1e22"]
    assert (config.hidden_dim, config.num_experts, config.experts_per_token, config.capacity_factor) == (
        3200,
        64,
        4,
        4.0,
    )
    assert config.num_parameters() == pytest.approx(34.6e9, rel=0.002)
    # The seeds' 4.7B active counts the LM head but not the input embedding (a lookup, no matmul).
    lm_head_only = config.active_parameters(include_embeddings=False) + config.vocab_size * config.hidden_dim
    assert lm_head_only == pytest.approx(4.7e9, rel=0.01)
    assert config.active_parameters() == 5_087_440_000
    # 1e22 FLOPs at seq 4096 is the seeds' 326B tokens.
    assert 1e22 / config.flops_per_token(4096) == pytest.approx(326e9, rel=0.01)


@pytest.mark.parametrize("name", ["moe-1e23", "moe-1e22"])
def test_the_built_model_has_the_counted_parameters(name: str) -> None:
    config = PRESETS[name]
    shapes = eqx.filter_eval_shape(config.build, key=jax.random.key(0))
    sizes = [leaf.size for leaf in jax.tree.leaves(shapes) if isinstance(leaf, jax.ShapeDtypeStruct)]
    assert sum(sizes) == config.num_parameters()
