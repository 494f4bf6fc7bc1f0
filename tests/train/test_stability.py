"""Update clipping, bad-step skipping, stability metrics, EMA and gradient accumulation on tiny pytrees."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tootsie.errors import TootsieError
from tootsie.train.checkpoint import load_checkpoint, save_checkpoint
from tootsie.train.ema import EMAConfig, ema_update, warmup_beta
from tootsie.train.optimizer import AdamWConfig, MuonConfig
from tootsie.train.stability import (
    ClipUpdateNormState,
    SkipBadStepsState,
    StabilityConfig,
    accumulate_gradients,
    adam_moment_norms,
    check_nonfinite_steps,
    clip_update_norm,
    nonfinite_steps,
    per_layer_update_norms,
    skip_bad_steps,
    stability_metrics,
)


def norm_tree(norm: float) -> dict:
    """Updates of global norm `norm` (3-4-5 triangle)."""
    return {"a": jnp.asarray([0.6 * norm, 0.0]), "b": {"c": jnp.asarray([[0.8 * norm]])}}


def tree_equal(x: object, y: object) -> bool:
    return jax.tree.structure(x) == jax.tree.structure(y) and all(
        np.array_equal(a, b, equal_nan=True) for a, b in zip(jax.tree.leaves(x), jax.tree.leaves(y))
    )


# ---- clip_update_norm


WORKED_CLIP = clip_update_norm(window=4, k_sigma=2.0, min_history=4)
WORKED_UPDATE = jax.jit(WORKED_CLIP.update)


def test_update_clipping_follows_the_worked_example() -> None:
    update, state = WORKED_UPDATE, WORKED_CLIP.init(None)
    for norm in (1.0, 1.2, 0.8, 1.0):
        out, state = update(norm_tree(norm), state)
        assert not bool(state.clipped) and float(optax.tree.norm(out)) == pytest.approx(norm, rel=1e-6)
    history = np.asarray([1.0, 1.2, 0.8, 1.0])
    expected = history.mean() + 2.0 * history.std()
    out, state = update(norm_tree(3.0), state)
    assert bool(state.clipped) and float(state.threshold) == pytest.approx(expected, rel=1e-5)
    assert float(state.last_norm) == pytest.approx(3.0) and float(optax.tree.norm(out)) == pytest.approx(
        expected, rel=1e-5
    )
    # Levanter's rule: the pre-clip norm enters the history (overwriting the oldest entry).
    np.testing.assert_allclose(np.sort(np.asarray(state.history)), [0.8, 1.0, 1.2, 3.0], rtol=1e-6)


def test_update_clipping_leaves_normal_updates_alone_and_waits_for_history() -> None:
    clip = clip_update_norm(window=16, k_sigma=2.0)
    update, state = jax.jit(clip.update), clip.init(None)
    out, state = update(norm_tree(50.0), state)  # an outlier before any history: not clipped
    assert not bool(state.clipped) and float(optax.tree.norm(out)) == pytest.approx(50.0)
    state = clip.init(None)
    for step in range(40):  # a smooth band never leaves mean + 2σ (a sine peaks at 1.41σ)
        norm = 1.0 + 0.05 * np.sin(step)
        out, state = update(norm_tree(norm), state)
        assert not bool(state.clipped), step
    out, state = update(norm_tree(10.0), state)
    assert bool(state.clipped) and float(optax.tree.norm(out)) < 1.2


def test_update_clipping_keeps_non_finite_norms_out_of_the_history() -> None:
    state = WORKED_CLIP.init(None)
    for norm in (1.0, 1.0, float("nan")):
        _, state = WORKED_UPDATE(norm_tree(norm), state)
    assert int(state.count) == 2 and np.isfinite(np.asarray(state.history)).all()


def test_stability_windows_are_validated_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="min_history"):
        clip_update_norm(window=8, min_history=9)
    with pytest.raises(ValueError, match="k_sigma"):
        clip_update_norm(k_sigma=0.0)
    with pytest.raises(ValueError, match="max_nonfinite_steps"):
        StabilityConfig(max_nonfinite_steps=0)


# ---- skip_bad_steps

PARAMS = {"w": jnp.asarray([[1.0, -2.0], [0.5, 0.25]]), "embed": jnp.asarray([0.3, -0.7, 1.1])}


def grads_for(step: int) -> dict:
    scale = 1.0 + 0.1 * np.sin(step)
    return {"w": jnp.asarray([[0.1, -0.2], [0.3, 0.1]]) * scale, "embed": jnp.asarray([0.05, 0.1, -0.1]) * scale}


def warmed_up(optimizer: optax.GradientTransformationExtraArgs, steps: int = 6):
    """Params, state and the jitted update after `steps` normal steps (losses near 2.0)."""
    params, state, update = PARAMS, optimizer.init(PARAMS), jitted_update(optimizer)
    for step in range(steps):
        updates, state = update(grads_for(step), state, params, value=jnp.asarray(2.0 + 0.01 * np.cos(step)))
        assert not bool(state.skipped)
        params = optax.apply_updates(params, updates)
    return params, state, update


_JITTED: dict[int, object] = {}


def jitted_update(optimizer: optax.GradientTransformationExtraArgs):
    """One compiled update per optimizer object, shared across tests."""
    return _JITTED.setdefault(id(optimizer), jax.jit(optimizer.update))


@pytest.fixture(scope="module")
def skipper() -> optax.GradientTransformationExtraArgs:
    return skip_bad_steps(
        AdamWConfig(max_grad_norm=0.2).build(lambda count: jnp.asarray(1e-2, jnp.float32)),
        window=8,
        k_sigma=6.0,
        max_consecutive_skips=3,
    )


@pytest.mark.parametrize(
    ("bad", "nonfinite"),
    [
        ({"value": 1e4}, False),  # an injected bad batch: huge loss, ordinary gradients
        ({"grads": lambda g: {**g, "w": g["w"].at[0, 0].set(jnp.nan)}}, True),  # a NaN gradient
        ({"grads": lambda g: jax.tree.map(lambda x: 1e3 * x, g)}, False),  # a gradient-norm outlier
        ({"value": jnp.inf}, True),
    ],
    ids=["huge-loss", "nan-gradient", "huge-gradient", "inf-loss"],
)
def test_a_bad_step_changes_neither_params_nor_optimizer_state_and_is_counted(
    skipper, bad: dict, nonfinite: bool
) -> None:
    params, state, update = warmed_up(skipper)
    grads = bad.get("grads", lambda g: g)(grads_for(6))
    updates, new_state = update(grads, state, params, value=jnp.asarray(bad.get("value", 2.0), jnp.float32))
    assert tree_equal(optax.apply_updates(params, updates), params)
    assert tree_equal(new_state.inner_state, state.inner_state)
    assert tree_equal(
        (new_state.losses, new_state.grad_norms, new_state.count), (state.losses, state.grad_norms, state.count)
    )
    assert (
        bool(new_state.skipped)
        and int(new_state.skipped_steps) == 1
        and int(new_state.nonfinite_steps) == int(nonfinite)
    )
    # The next ordinary step is taken again.
    updates, after = update(grads_for(7), new_state, params, value=jnp.asarray(2.0))
    assert not bool(after.skipped) and not tree_equal(after.inner_state, new_state.inner_state)
    assert float(optax.tree.norm(updates)) > 0


def test_a_run_of_outliers_is_read_as_a_level_shift_and_restarts_the_history(skipper) -> None:
    params, state, update = warmed_up(skipper)
    skipped = []
    for step in range(5):
        _, state = update(grads_for(6 + step), state, params, value=jnp.asarray(5.0))
        skipped.append(bool(state.skipped))
    # max_consecutive_skips=3: two skips, the third outlier is taken and starts a fresh history.
    assert skipped == [True, True, False, False, False]
    assert int(state.skipped_steps) == 2 and int(state.count) == 3


def test_skip_bad_steps_asks_for_the_loss(skipper) -> None:
    with pytest.raises(ValueError, match="value=loss"):
        skipper.update(grads_for(0), skipper.init(PARAMS), PARAMS)


def test_non_finite_steps_are_counted_and_abort_with_a_clear_message(skipper) -> None:
    params, state, update = warmed_up(skipper)
    for _ in range(2):
        _, state = update(grads_for(0), state, params, value=jnp.asarray(jnp.nan))
    assert nonfinite_steps(state) == 2
    check_nonfinite_steps(state, max_nonfinite_steps=3, step=8)
    with pytest.raises(TootsieError, match="2 steps up to step 8 had a NaN/inf"):
        check_nonfinite_steps(state, max_nonfinite_steps=2, step=8)


# ---- metrics from any optimizer state


@pytest.fixture(scope="module")
def stabilized() -> optax.GradientTransformationExtraArgs:
    return StabilityConfig(clip_update_window=4, skip_bad_steps=True, skip_window=4).wrap(
        AdamWConfig().build(lambda count: jnp.asarray(1e-2, jnp.float32))
    )


def test_stability_metrics_are_read_from_any_state_tree_inside_jit(stabilized) -> None:
    _, state, _ = warmed_up(stabilized)
    metrics = jax.jit(stability_metrics)(state)
    assert set(metrics) == {
        "clip_update/clipped", "clip_update/pre_clip_norm", "clip_update/threshold",
        "skip/skipped", "skip/skipped_steps", "skip/nonfinite_steps", "skip/loss_threshold", "skip/grad_norm_threshold",
    }  # fmt: skip
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert isinstance(state, SkipBadStepsState) and any(isinstance(s, ClipUpdateNormState) for s in state.inner_state)
    assert stability_metrics(AdamWConfig().build(lambda count: 1e-2).init(PARAMS)) == {}


def test_stability_state_round_trips_through_a_checkpoint(stabilized, tmp_path) -> None:
    _, state, _ = warmed_up(stabilized)
    path = save_checkpoint(tmp_path, 6, {"opt_state": state}, {})
    loaded, _ = load_checkpoint(path, {"opt_state": stabilized.init(PARAMS)})
    assert tree_equal(loaded["opt_state"], state)


def test_adam_moment_norms_match_the_first_step_closed_form() -> None:
    optimizer = AdamWConfig(beta1=0.9, beta2=0.95, max_grad_norm=None).build(lambda count: 1e-2)
    grads = grads_for(0)
    _, state = optimizer.update(grads, optimizer.init(PARAMS), PARAMS)
    norms = adam_moment_norms(state)
    assert float(norms["adam/mu_norm"]) == pytest.approx(0.1 * float(optax.tree.norm(grads)), rel=1e-5)
    assert float(norms["adam/nu_norm"]) == pytest.approx(
        0.05 * float(optax.tree.norm(jax.tree.map(jnp.square, grads))), rel=1e-5
    )


def test_adam_moment_norms_find_both_halves_of_muon() -> None:
    params = {"layers": {"w": jnp.ones((2, 3, 4))}, "embed": jnp.ones((5, 3))}
    optimizer = StabilityConfig().wrap(MuonConfig(max_grad_norm=None).build(lambda count: 1e-2))
    _, state = jax.jit(optimizer.update)(
        jax.tree.map(jnp.ones_like, params), optimizer.init(params), params, value=jnp.asarray(1.0)
    )
    norms = adam_moment_norms(state)
    assert set(norms) == {"adam/mu_norm", "adam/nu_norm", "muon/momentum_norm"}
    assert float(norms["adam/mu_norm"]) == pytest.approx(0.1 * np.sqrt(15), rel=1e-5)  # only the embedding is Adam's
    assert float(norms["muon/momentum_norm"]) == pytest.approx(0.05 * np.sqrt(24), rel=1e-5)


def test_per_layer_update_norms_reduce_everything_but_the_layer_axis() -> None:
    updates = {
        "embed": jnp.ones((7, 3)),
        "layers": {"w": jnp.stack([jnp.ones((3, 4)), 2 * jnp.ones((3, 4))]), "norm": {"weight": jnp.ones((2, 3))}},
    }
    np.testing.assert_allclose(per_layer_update_norms(updates), [np.sqrt(12 + 3), np.sqrt(48 + 3)], rtol=1e-6)
    with pytest.raises(ValueError, match="stacked_name"):
        per_layer_update_norms({"embed": jnp.ones(3)})


# ---- EMA


def test_ema_of_a_constant_velocity_lags_by_the_closed_form() -> None:
    beta, c, steps = 0.995, 0.01, 300
    config = EMAConfig(beta=beta, warmup=False)
    params = {"w": jnp.zeros((2,)), "step_count": jnp.asarray(0)}
    ema = params
    update = jax.jit(config.update)
    for t in range(1, steps + 1):
        params = {"w": jnp.full((2,), c * t), "step_count": jnp.asarray(t)}
        ema = update(ema, params, t)
    lag = c * beta * (1 - beta**steps) / (1 - beta)
    np.testing.assert_allclose(ema["w"], params["w"] - lag, rtol=1e-4)
    assert int(ema["step_count"]) == steps  # non-float leaves follow the params


def test_ema_warmup_beta_and_dtype() -> None:
    np.testing.assert_allclose(
        [float(warmup_beta(t, 0.995)) for t in (0, 8, 80, 5000)], [0.1, 0.5, 0.9, 0.995], rtol=1e-6
    )
    ema = ema_update({"w": jnp.zeros(3, jnp.bfloat16)}, {"w": jnp.ones(3, jnp.bfloat16)}, EMAConfig().beta_at(0))
    assert ema["w"].dtype == jnp.bfloat16 and float(ema["w"][0]) == pytest.approx(0.9, rel=1e-2)
    with pytest.raises(ValueError, match="beta"):
        EMAConfig(beta=1.0)


# ---- gradient accumulation


def masked_loss(params: dict, x: jax.Array, y: jax.Array, mask: jax.Array):
    """A masked mean like `next_token_loss`, with (mse, mean |pred|) as aux."""
    pred = jnp.tanh(x @ params["w"]) @ params["v"]
    count = jnp.maximum(mask.sum(), 1.0)
    mse = (jnp.square(pred - y) * mask).sum() / count
    return mse, (mse, (jnp.abs(pred) * mask).sum() / count)


@pytest.mark.parametrize("weighted", [False, True], ids=["plain-mean", "masked-mean"])
def test_accumulated_gradients_equal_the_full_batch(weighted: bool) -> None:
    rng = np.random.default_rng(0)

    def normal(*shape: int) -> jax.Array:
        return jnp.asarray(rng.standard_normal(shape), jnp.float32)

    params, x, y = {"w": normal(5, 8), "v": normal(8)}, normal(12, 5), normal(12)
    # Uneven masks make the weighting matter; all-ones make plain means exact without it.
    mask = jnp.asarray(rng.uniform(size=12) < 0.6, jnp.float32) if weighted else jnp.ones((12,))
    loss_and_grad = jax.value_and_grad(masked_loss, has_aux=True)
    (full_loss, full_aux), full_grads = jax.jit(loss_and_grad)(params, x, y, mask)
    weight_fn = (lambda x, y, m: m.sum()) if weighted else None
    loss, aux, grads = jax.jit(lambda p, *b: accumulate_gradients(loss_and_grad, p, b, 3, weight_fn=weight_fn))(
        params, x, y, mask
    )
    assert float(loss) == pytest.approx(float(full_loss), rel=1e-5)
    assert jax.tree.structure(aux) == jax.tree.structure(full_aux)
    for a, b in zip(jax.tree.leaves((aux, grads)), jax.tree.leaves((full_aux, full_grads))):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_accumulation_refuses_a_batch_that_does_not_split() -> None:
    with pytest.raises(ValueError, match="microbatches"):
        accumulate_gradients(jax.value_and_grad(masked_loss, has_aux=True), {}, (jnp.ones((10, 2)),), 3)


def test_accumulated_maxima_take_the_largest_microbatch_not_a_mean() -> None:
    """Aux entries named `*_max` combine by max (the step's largest logit), the rest by the weighted mean."""

    def loss(params: dict, x: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        pred = x @ params["w"]
        return jnp.mean(pred**2), {"pred_mean": jnp.mean(pred), "aux/pred_max": jnp.max(pred)}

    x = jnp.asarray(np.random.default_rng(1).standard_normal((12, 3)), jnp.float32)
    params = {"w": jnp.ones((3,))}
    loss_and_grad = jax.value_and_grad(loss, has_aux=True)
    (_, full), _ = loss_and_grad(params, x)
    _, aux, _ = accumulate_gradients(loss_and_grad, params, (x,), 4)
    assert set(aux) == {"pred_mean", "aux/pred_max"}
    assert float(aux["aux/pred_max"]) == pytest.approx(float(full["aux/pred_max"]))
    assert float(aux["pred_mean"]) == pytest.approx(float(full["pred_mean"]), abs=1e-6)
    assert float(aux["aux/pred_max"]) > float(jnp.mean(jnp.max((x @ params["w"]).reshape(4, 3), axis=1)))
