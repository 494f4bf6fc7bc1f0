"""Optimizer registry contract, AdamC's lr-scaled decay, Muon's per-layer orthogonalization, decay mask."""

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.optimizer import OPTIMIZERS, AdamCConfig, AdamWConfig, MuonConfig, decay_mask, muon_dimension_numbers
from tootsie.train.schedule import LearningRate, WSDConfig
from tootsie.train.stability import StabilityConfig

TINY = LlamaConfig(vocab_size=64, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)


def constant_lr(value: float):
    return lambda count: jnp.asarray(value, jnp.float32)


def lm_loss(model: LlamaModel, tokens: jax.Array) -> jax.Array:
    logits = model(tokens)
    return optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], tokens[:, 1:]).mean()


def llama_from_shapes(config: LlamaConfig, seed: int = 0) -> LlamaModel:
    """A LlamaModel with N(0, 0.02) matrices and unit norms, built from its traced shapes.

    Tracing the constructor instead of running it skips compiling its PRNG
    kernels, which costs more than every optimizer test here together.
    """
    rng = np.random.default_rng(seed)
    shapes = eqx.filter_eval_shape(LlamaModel, config, key=jax.random.PRNGKey(seed))

    def fill(path: tuple, shape: jax.ShapeDtypeStruct) -> jax.Array:
        if "norm" in jax.tree_util.keystr(path):
            return jnp.ones(shape.shape, shape.dtype)
        return jnp.asarray(0.02 * rng.standard_normal(shape.shape), shape.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)


@pytest.fixture(scope="module")
def tiny_llama() -> LlamaModel:
    return llama_from_shapes(TINY)


@pytest.fixture(scope="module")
def lm_grad():
    """One compiled loss-and-gradient of the tiny Llama, shared by every optimizer's test."""
    return eqx.filter_jit(eqx.filter_value_and_grad(lm_loss))


@pytest.fixture(scope="module")
def tokens() -> jax.Array:
    # Every row counts up by 3 (mod 64) from its own start.
    return (jnp.arange(4)[:, None] * 7 + 3 * jnp.arange(12)[None, :]) % 64


def run_steps(grad_fn, model, optimizer: optax.GradientTransformation, batch, steps: int):
    """`steps` optimizer steps with a jitted update; returns the model, optimizer state and losses."""
    update = jax.jit(optimizer.update)
    opt_state, losses = optimizer.init(eqx.filter(model, eqx.is_array)), []
    for _ in range(steps):
        loss, grads = grad_fn(model, batch)
        updates, opt_state = update(grads, opt_state, eqx.filter(model, eqx.is_array), value=loss)
        model = eqx.apply_updates(model, updates)
        losses.append(float(loss))
    return model, opt_state, losses


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_builds_jits_and_keeps_a_tiny_llama_finite_and_shaped(
    name: str, tiny_llama: LlamaModel, lm_grad, tokens: jax.Array
) -> None:
    optimizer = OPTIMIZERS[name]().build(constant_lr(1e-2))
    assert isinstance(optimizer, optax.GradientTransformationExtraArgs)
    trained, opt_state, losses = run_steps(lm_grad, tiny_llama, optimizer, tokens, steps=3)
    before, after = eqx.filter(tiny_llama, eqx.is_array), eqx.filter(trained, eqx.is_array)
    assert jax.tree.structure(before) == jax.tree.structure(after)
    for old, new in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
        assert new.shape == old.shape and new.dtype == old.dtype and bool(jnp.all(jnp.isfinite(new)))
    assert all(
        bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(opt_state) if jnp.issubdtype(x.dtype, jnp.floating)
    )
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses


def toy_params(seed: int) -> dict:
    """A two-layer model laid out like the Llama one: embed, stacked `layers`, norms, lm_head."""
    rng = np.random.default_rng(seed)
    return {
        "embed": jnp.asarray(0.5 * rng.standard_normal((8, 6)), jnp.float32),
        "layers": {
            "norm": {"weight": jnp.ones((2, 6))},
            "w": jnp.asarray(0.3 * rng.standard_normal((2, 6, 6)), jnp.float32),
        },
        "lm_head": jnp.asarray(0.5 * rng.standard_normal((6, 8)), jnp.float32),
    }


def toy_loss(params: dict, ids: jax.Array) -> jax.Array:
    x = params["embed"][ids]
    for layer in range(2):
        x = x + jnp.tanh((x * params["layers"]["norm"]["weight"][layer][None, :]) @ params["layers"]["w"][layer])
    return optax.softmax_cross_entropy_with_integer_labels(x @ params["lm_head"], (ids * 3 + 1) % 8).mean()


TOY_GRAD = jax.jit(jax.value_and_grad(toy_loss))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_lowers_the_loss_of_a_toy_problem(name: str) -> None:
    _, _, losses = run_steps(
        TOY_GRAD, toy_params(0), OPTIMIZERS[name]().build(constant_lr(3e-2)), jnp.arange(8), steps=40
    )
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_traces_inside_the_stability_wrapper(name: str, tiny_llama: LlamaModel) -> None:
    # As the trainer will run it: skip_bad_steps tree-selects over every optimizer's state (traced, not compiled).
    params = eqx.filter(tiny_llama, eqx.is_array)
    optimizer = StabilityConfig(clip_update_window=8, skip_bad_steps=True).wrap(
        OPTIMIZERS[name]().build(constant_lr(1e-2))
    )
    state = optimizer.init(params)
    updates, new_state = jax.eval_shape(
        functools.partial(optimizer.update, value=jnp.asarray(1.0)), params, state, params
    )
    assert jax.tree.structure(new_state) == jax.tree.structure(state) and jax.tree.structure(
        updates
    ) == jax.tree.structure(params)


def test_muon_partitions_a_tied_embedding_model() -> None:
    params = eqx.filter(llama_from_shapes(dataclasses.replace(TINY, tie_embeddings=True)), eqx.is_array)
    optimizer = MuonConfig().build(constant_lr(1e-2))
    updates, _ = jax.eval_shape(optimizer.update, params, optimizer.init(params), params)
    assert updates.lm_head is None and updates.embed.shape == params.embed.shape


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_rejects_a_bad_field_with_its_name(name: str) -> None:
    with pytest.raises(ValueError, match="max_grad_norm"):
        OPTIMIZERS[name](max_grad_norm=0.0)
    with pytest.raises(ValueError, match="weight_decay"):
        OPTIMIZERS[name](weight_decay=-1.0)


def test_weight_decay_mask_skips_embeddings_norms_and_biases() -> None:
    params = {
        "embed": jnp.zeros((4, 2)),
        "final_norm": {"weight": jnp.ones(2)},
        "proj": {"w": jnp.ones((2, 2)), "bias": jnp.zeros(2)},
        "lm_head": jnp.ones((2, 4)),
    }
    assert decay_mask(params) == {
        "embed": False,
        "final_norm": {"weight": False},
        "proj": {"w": True, "bias": False},
        "lm_head": True,
    }


def _zero_grad_step_updates(optimizer: optax.GradientTransformation, params: dict, steps: int) -> list[dict]:
    state, out = optimizer.init(params), []
    grads = jax.tree.map(jnp.zeros_like, params)
    for _ in range(steps):
        updates, state = jax.jit(optimizer.update)(grads, state, params)
        out.append(updates)
    return out


@pytest.mark.parametrize("schedule_peak", [False, True], ids=["running-peak", "schedule-peak"])
def test_adamc_decay_scales_with_the_learning_rate(schedule_peak: bool) -> None:
    lrs = jnp.asarray([1e-2, 1e-2, 5e-3, 2.5e-3])
    params = {"w": jnp.full((3, 3), 2.0), "embed": jnp.ones((5, 3))}
    learning_rate = (
        LearningRate(lambda count: lrs[count], peak_lr=1e-2) if schedule_peak else (lambda count: lrs[count])
    )
    adamc = AdamCConfig(weight_decay=0.1, max_grad_norm=None).build(learning_rate)
    adamw = AdamWConfig(weight_decay=0.1, max_grad_norm=None).build(lambda count: lrs[count])
    # With zero gradients Adam's direction is 0, so the update is the decay term alone.
    for t, (c, w) in enumerate(
        zip(_zero_grad_step_updates(adamc, params, 4), _zero_grad_step_updates(adamw, params, 4))
    ):
        lr = float(lrs[t])
        np.testing.assert_allclose(w["w"], -lr * 0.1 * 2.0, rtol=1e-6)
        np.testing.assert_allclose(c["w"], -lr * 0.1 * (lr / 1e-2) * 2.0, rtol=1e-6)
        assert float(jnp.abs(c["embed"]).max()) == 0.0


def test_adamc_reads_the_peak_off_the_schedule_and_shrinks_the_decay_in_warmup() -> None:
    schedule = WSDConfig(peak_lr=1e-2, warmup_steps=4, decay_steps=4, total_steps=12, min_lr_ratio=0.5).build()
    assert schedule.learning_rate.peak_lr == 1e-2
    adamc = AdamCConfig(weight_decay=0.1, max_grad_norm=None).build(schedule.learning_rate)
    updates = _zero_grad_step_updates(adamc, {"w": jnp.ones((2, 2))}, 12)
    lrs = [float(schedule.learning_rate(step)) for step in range(12)]
    factors = [float(u["w"][0, 0]) / (-lr * 0.1) for u, lr in zip(updates, lrs)]
    # lr(t) / peak: 1/4 .. 1 through warmup, 1 while stable, down to min_lr_ratio on the last decay step.
    np.testing.assert_allclose(factors, [0.25, 0.5, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5], rtol=1e-5)


def test_adamc_with_a_running_peak_keeps_full_decay_through_warmup() -> None:
    lrs = jnp.asarray([1e-3, 5e-3, 1e-2, 5e-3])
    adamc = AdamCConfig(weight_decay=0.1, max_grad_norm=None).build(lambda count: lrs[count])
    updates = _zero_grad_step_updates(adamc, {"w": jnp.ones((2, 2))}, 4)
    factors = [float(u["w"][0, 0]) / (-float(lr) * 0.1) for u, lr in zip(updates, lrs)]
    np.testing.assert_allclose(factors, [1.0, 1.0, 1.0, 0.5], rtol=1e-6)


def test_muon_orthogonalizes_each_stacked_layer_matrix_separately() -> None:
    rng = np.random.default_rng(0)
    params = {"layers": {"w": jnp.zeros((2, 16, 32)), "norm": jnp.ones((2, 16))}, "embed": jnp.zeros((8, 16))}
    # Layer 0's gradient is 100x layer 1's: a [32, 32] flattening would leave layer 1's update ~0.
    g = jnp.asarray(np.stack([100.0 * rng.standard_normal((16, 32)), rng.standard_normal((16, 32))]), jnp.float32)
    grads = {"layers": {"w": g, "norm": jnp.ones((2, 16))}, "embed": jnp.ones((8, 16))}
    lr = 1e-2
    optimizer = MuonConfig(weight_decay=0.0, consistent_rms=None, max_grad_norm=None).build(constant_lr(lr))
    updates, _ = jax.jit(optimizer.update)(grads, optimizer.init(params), params)
    width_scale = np.sqrt(32 / 16)  # optax's sqrt(max(1, fan_out / fan_in))
    for layer in range(2):
        singular = np.linalg.svd(np.asarray(-updates["layers"]["w"][layer]) / (lr * width_scale), compute_uv=False)
        raw = np.linalg.svd(np.asarray(g[layer]), compute_uv=False)
        assert 0.5 < singular.min() and singular.max() < 1.5, singular  # Newton-Schulz: U S' V^T with S' ~ 1
        assert raw.min() / raw.max() < 0.4 < singular.min() / singular.max()
    # Embeddings and norms take AdamW's first step: -lr * sign(g).
    np.testing.assert_allclose(updates["embed"], -lr, rtol=1e-4)
    np.testing.assert_allclose(updates["layers"]["norm"], -lr, rtol=1e-4)


def test_muon_takes_the_llama_block_matrices_and_leaves_the_rest_to_adamw(tiny_llama: LlamaModel) -> None:
    spec = muon_dimension_numbers(eqx.filter(tiny_llama, eqx.is_array))
    per_layer = optax.contrib.MuonDimensionNumbers(reduction_axis=1, output_axis=2)
    assert spec.layers.attn.wq == per_layer and spec.layers.mlp.w_down == per_layer
    assert (
        spec.embed is None
        and spec.lm_head is None
        and spec.layers.attn_norm.weight is None
        and spec.final_norm.weight is None
    )
