"""Width rules: Marin's depth formula, heads, and parameter/FLOP counts taken from the model config."""

import equinox as eqx
import jax
import pytest

from tootsie.models.llama import LlamaModel
from tootsie.models.moe import MoeConfig
from tootsie.scaling.shapes import WidthRule, count_params, flops_per_token


@pytest.mark.parametrize(("width", "layers", "heads"), [(512, 6, 4), (1024, 11, 8), (2048, 21, 16), (4096, 40, 32)])
def test_marin_rule(width: int, layers: int, heads: int) -> None:
    # layers = round(d / (64 + 4·log2 d − 9)): 512 → 5.6, 1024 → 10.8, 2048 → 20.7, 4096 → 39.8.
    model = WidthRule().model(width, vocab_size=128_256)
    assert (model.num_layers, model.num_heads, model.intermediate_dim) == (layers, heads, 4 * width)


@pytest.mark.parametrize(("width", "layers", "heads"), [(8, 1, 1), (24, 1, 1), (64, 2, 4), (128, 4, 8), (256, 7, 16)])
def test_tiny_rule(width: int, layers: int, heads: int) -> None:
    model = WidthRule.tiny().model(width, vocab_size=4096)
    assert (model.num_layers, model.num_heads, model.resolved_head_dim) == (layers, heads, width // heads)


def test_parameter_count_matches_the_built_model() -> None:
    config = WidthRule.tiny().model(32, vocab_size=256)
    arrays = eqx.filter(LlamaModel(config, key=jax.random.PRNGKey(0)), eqx.is_array)
    assert count_params(config) == sum(leaf.size for leaf in jax.tree_util.tree_leaves(arrays))
    assert count_params(config) - count_params(config, include_embeddings=False) == 2 * 256 * 32
    assert flops_per_token(config, 128) > 6 * count_params(config, include_embeddings=False)


def test_an_moe_counts_active_parameters_for_compute_and_total_for_memory() -> None:
    moe = MoeConfig(
        vocab_size=256, hidden_dim=32, intermediate_dim=16, num_layers=2, num_experts=8, experts_per_token=2
    )
    dense = moe.dense_config(layers=2)  # one MLP as wide as a token's two experts
    router = 2 * 32 * 8
    assert count_params(moe, active=True) == count_params(dense) + router
    assert count_params(moe) - count_params(moe, active=True) == 2 * 3 * 32 * 16 * (8 - 2)
    assert count_params(dense, active=True) == count_params(dense)
    # FLOPs follow the active count: the MoE's exceed the dense twin's by the router's matmul alone.
    assert flops_per_token(moe, 128) - flops_per_token(dense, 128) == 6 * router


def test_bad_widths_and_rules() -> None:
    with pytest.raises(ValueError, match="width 32 gives 2 head"):
        WidthRule(head_dim=16, kv_group=4).model(32, vocab_size=64)
    with pytest.raises(ValueError, match="width 9 gives 1 head"):
        WidthRule.tiny().model(9, vocab_size=64)
    with pytest.raises(ValueError, match="head_dim must be even"):
        WidthRule(head_dim=15)
    with pytest.raises(ValueError, match="raise WidthRule.base"):
        WidthRule(base=1.0, factor=0.0, offset=9.0).num_layers(64)
