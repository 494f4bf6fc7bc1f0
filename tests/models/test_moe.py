"""The MoE decoder: dense equivalence, dropless against capacity, the two expert backends, routing and counts."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.models import experts
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.models.registry import model_config_from_plain
from tootsie.models.routing import capacity_slots, route

SHAPE = dict(vocab_size=64, hidden_dim=32, intermediate_dim=16, num_layers=2, num_heads=4, num_kv_heads=2)


def moe(**fields: object) -> MoeConfig:
    return MoeConfig(**{**SHAPE, **fields})


def tokens(batch: int = 2, seq: int = 16, seed: int = 1) -> jax.Array:
    return jax.random.randint(jax.random.key(seed), (batch, seq), 0, SHAPE["vocab_size"])


def training_loss(model: eqx.Module, batch: jax.Array) -> jax.Array:
    """The next-token objective's total on `batch` through the training forward (router losses included)."""
    hidden, router_loss, _ = model.hidden_states_and_aux(batch)
    log_probs = jax.nn.log_softmax(hidden @ model.output_head(), axis=-1)
    targets = jnp.roll(batch, -1, axis=1)
    return -jnp.take_along_axis(log_probs, targets[..., None], axis=-1).mean() + router_loss


loss_and_grads = eqx.filter_jit(eqx.filter_value_and_grad(training_loss))


def test_one_expert_with_k_one_equals_the_dense_mlp_in_loss_and_gradients() -> None:
    config = moe(num_experts=1, experts_per_token=1, load_balancing_weight=0.0, router_z_loss_weight=0.0)
    model = config.build(key=jax.random.key(0))
    dense = LlamaConfig(**SHAPE).build(key=jax.random.key(5))
    mlp = model.layers.mlp
    dense = eqx.tree_at(
        lambda m: (m.embed, m.lm_head, m.layers.attn, m.layers.attn_norm, m.layers.mlp_norm, m.final_norm),
        dense,
        (
            model.embed,
            model.lm_head,
            model.layers.attn,
            model.layers.attn_norm,
            model.layers.mlp_norm,
            model.final_norm,
        ),
    )
    dense = eqx.tree_at(
        lambda m: (m.layers.mlp.w_gate, m.layers.mlp.w_up, m.layers.mlp.w_down),
        dense,
        (mlp.experts_gate[:, 0], mlp.experts_up[:, 0], mlp.experts_down[:, 0]),
    )
    batch = tokens()
    moe_loss, moe_grads = loss_and_grads(model, batch)
    dense_loss, dense_grads = loss_and_grads(dense, batch)
    assert abs(float(moe_loss) - float(dense_loss)) < 1e-6
    np.testing.assert_allclose(moe_grads.layers.mlp.experts_gate[:, 0], dense_grads.layers.mlp.w_gate, atol=1e-6)
    np.testing.assert_allclose(moe_grads.layers.mlp.experts_down[:, 0], dense_grads.layers.mlp.w_down, atol=1e-6)
    np.testing.assert_allclose(moe_grads.layers.attn.wq, dense_grads.layers.attn.wq, atol=1e-6)
    np.testing.assert_allclose(moe_grads.embed, dense_grads.embed, atol=1e-6)
    assert float(jnp.abs(moe_grads.layers.mlp.router).max()) == 0.0  # one expert: the router cannot matter


@pytest.mark.parametrize("backend", ["padded", "ragged"])
def test_dropless_equals_the_capacity_path_once_the_factor_reaches_experts_over_k(backend: str) -> None:
    batch = tokens()
    dropless = moe(capacity_factor=None, expert_backend=backend).build(key=jax.random.key(0))
    full = moe(capacity_factor=8 / 2, expert_backend=backend).build(key=jax.random.key(0))
    loss_a, grads_a = loss_and_grads(dropless, batch)
    loss_b, grads_b = loss_and_grads(full, batch)
    assert float(loss_a) == pytest.approx(float(loss_b), abs=1e-6)
    for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert float(eqx.filter_jit(full.hidden_states_and_aux)(batch)[2]["moe/dropped_fraction"]) == 0.0


@pytest.mark.parametrize("capacity_factor", [None, 0.5])
def test_the_padded_and_ragged_backends_agree_in_output_and_gradients(capacity_factor: float | None) -> None:
    batch = tokens(seq=32)
    shared = dict(capacity_factor=capacity_factor, num_shared_experts=1, dense_layers=1, num_layers=3)
    padded = moe(expert_backend="padded", **shared).build(key=jax.random.key(3))
    ragged = moe(expert_backend="ragged", **shared).build(key=jax.random.key(3))
    loss_p, grads_p = loss_and_grads(padded, batch)
    loss_r, grads_r = loss_and_grads(ragged, batch)
    assert float(loss_p) == pytest.approx(float(loss_r), abs=1e-5)
    for a, b in zip(jax.tree.leaves(grads_p), jax.tree.leaves(grads_r), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(eqx.filter_jit(padded)(batch), eqx.filter_jit(ragged)(batch), atol=1e-5)


def test_capacity_drops_overflow_in_priority_order_and_counts_it() -> None:
    # Four tokens all preferring expert 0 of 2, k = 1, cf 1.0: two slots per expert; tokens 0 and 1 keep it.
    logits = jnp.array([[2.0, 0.0]] * 4)
    routing, stats = route(logits, 1, "renormalized", capacity_slots(4, 2, 1, 1.0))
    assert routing.kept.tolist() == [[True, True, False, False]]
    assert routing.weights.tolist() == [[1.0, 1.0, 0.0, 0.0]]
    assert float(stats.dropped_fraction) == 0.5
    assert float(stats.max_load) == 1.0
    probs = jax.nn.softmax(logits[0])
    assert float(stats.load_balancing_loss) == pytest.approx(2 * float(probs[0]))


def test_first_choices_take_priority_over_second_choices() -> None:
    # Token 1's first choice (expert 1) must beat token 0's second choice (also expert 1) for expert 1's one slot.
    logits = jnp.array([[3.0, 2.0, 0.0], [0.0, 3.0, 2.0]])
    routing, _ = route(logits, 2, "renormalized", capacity=1)
    assert routing.experts.tolist() == [[0, 1], [1, 2]]
    assert routing.kept.tolist() == [[True, True], [False, True]]


def test_load_balancing_loss_is_one_at_uniform_load_and_weights_renormalise_or_not() -> None:
    logits = jnp.log(jnp.array([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]] * 2))
    renorm, stats = route(logits, 2, "renormalized", capacity=8)
    plain, _ = route(logits, 2, "softmax", capacity=8)
    np.testing.assert_allclose(renorm.weights[:, 0], [0.4 / 0.7, 0.3 / 0.7], rtol=1e-6)
    np.testing.assert_allclose(plain.weights[:, 0], [0.4, 0.3], rtol=1e-6)
    assert float(stats.load_balancing_loss) == pytest.approx(1.0)
    assert stats.expert_load.tolist() == [0.25] * 4
    assert float(stats.router_entropy) == pytest.approx(-sum(p * np.log(p) for p in (0.4, 0.3, 0.2, 0.1)), rel=1e-5)


def test_capacity_slots() -> None:
    assert capacity_slots(4096, 8, 2, 1.0) == 1024
    assert capacity_slots(4096, 8, 2, 1.25) == 1280
    assert capacity_slots(4096, 8, 2, 4.0) == 4096
    assert capacity_slots(4096, 8, 2, None) == 4096
    assert capacity_slots(3, 64, 4, 1.0) == 1


def test_parameter_counts_match_the_built_model_total_and_active() -> None:
    config = moe(num_layers=3, dense_layers=1, num_shared_experts=2, qk_norm=True, tie_embeddings=True)
    model = config.build(key=jax.random.key(0))
    assert sum(leaf.size for leaf in jax.tree.leaves(eqx.filter(model, eqx.is_array))) == config.num_parameters()
    h, f = SHAPE["hidden_dim"], SHAPE["intermediate_dim"]
    assert config.num_parameters() - config.active_parameters() == 2 * (8 - 2) * 3 * h * f
    dense = config.dense_config(config.num_layers)
    assert config.flops_per_token(16) > 0
    one_expert = moe(num_experts=1, experts_per_token=1)
    # The router is the only difference from a dense model of the same width: h × E weights per MoE block.
    assert one_expert.active_parameters() == one_expert.dense_config(2, f).num_parameters() + 2 * h
    assert dense.num_layers == 3


def test_the_registry_builds_an_moe_config_from_a_config_file_mapping() -> None:
    config = model_config_from_plain({"kind": "moe", "num_experts": 4, "capacity_factor": None}, "test")
    assert isinstance(config, MoeConfig) and config.num_experts == 4 and config.capacity_factor is None


@pytest.mark.parametrize(
    "fields",
    [
        {"experts_per_token": 9},
        {"dense_layers": 2},
        {"capacity_factor": 0.0},
        {"dense_intermediate_dim": 64},
        {"router_weights": "sigmoid"},
        {"num_shared_experts": -1},
    ],
)
def test_bad_moe_configs_are_refused(fields: dict) -> None:
    with pytest.raises(ValueError):
        moe(**fields)


def test_inference_is_dropless_whatever_the_training_capacity() -> None:
    batch = tokens()
    tight = moe(capacity_factor=0.25).build(key=jax.random.key(0))
    dropless = dataclasses.replace(tight.config, capacity_factor=None).build(key=jax.random.key(0))
    np.testing.assert_allclose(eqx.filter_jit(tight)(batch), eqx.filter_jit(dropless)(batch), atol=1e-6)
    assert float(eqx.filter_jit(tight.hidden_states_and_aux)(batch)[2]["moe/dropped_fraction"]) > 0


@pytest.mark.parametrize(
    ("platform", "num_experts", "expected"),
    [("cpu", 8, "padded"), ("tpu", 64, "ragged"), ("gpu", 8, "ragged"), ("gpu", 9, "padded"), ("gpu", 64, "padded")],
)
def test_auto_backend_follows_the_platform_and_on_gpu_the_expert_count(
    monkeypatch: pytest.MonkeyPatch, platform: str, num_experts: int, expected: str
) -> None:
    """`auto` is `ragged` on a GPU only up to RAGGED_MAX_EXPERTS_GPU (8, measured on an H200); a named backend is
    kept whatever the platform."""
    monkeypatch.setattr(experts.jax, "default_backend", lambda: platform)
    assert experts.resolve_backend("auto", num_experts) == expected
    assert experts.resolve_backend("ragged", num_experts) == "ragged"
