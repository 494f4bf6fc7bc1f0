"""Learning-rate schedules: the registry contract, exact boundary values, Marin's cycles, and errors."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tootsie.train.schedule import (
    SCHEDULES,
    CosineConfig,
    InverseSqrtConfig,
    LinearScheduleConfig,
    RewarmConfig,
    Schedule,
    WSDConfig,
    WSDSConfig,
)
from tootsie.train.schedule_cycles import DECAY_SHAPES, spaced_cycles


@pytest.fixture(autouse=True)
def strict_promotion():
    with jax.numpy_dtype_promotion("strict"):
        yield


@functools.cache
def built(config) -> Schedule:
    return config.build()


def lr(config, step: int) -> float:
    return float(built(config).learning_rate(step))


def approx(value: float):
    return pytest.approx(value, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_registry_contract(name: str) -> None:
    schedule = SCHEDULES[name]().build()
    steps = np.unique(np.r_[np.arange(0, 1250, 50), 1, 99, 599, 999]).astype(np.int32)
    jitted = jax.jit(schedule.learning_rate)
    eager = np.array([schedule.learning_rate(int(step)) for step in steps])
    traced = np.array([jitted(step) for step in steps])
    vector = jax.jit(jax.vmap(schedule.learning_rate))(jnp.asarray(steps))
    assert jitted(np.int32(5)).shape == () and jitted(np.int32(5)).dtype == jnp.float32
    assert schedule.learning_rate(5).dtype == jnp.float32 and vector.shape == steps.shape
    assert np.all(np.isfinite(eager)) and np.all(eager >= 0) and eager.max() > 0
    np.testing.assert_array_equal(traced, eager)
    np.testing.assert_allclose(np.asarray(vector), eager, rtol=1e-6)
    assert all(isinstance(schedule.phase(int(step)), str) for step in steps)
    transform = optax.scale_by_schedule(schedule.learning_rate)
    params = {"w": jnp.ones(3, jnp.float32)}
    updates, state = jax.jit(transform.update)(params, transform.init(params))
    assert updates["w"].shape == (3,) and np.all(np.isfinite(updates["w"]))
    # The peak the schedule reports (AdamC divides by it) is the largest LR it takes, and it settles at end_step.
    assert schedule.learning_rate.peak_lr == pytest.approx(float(eager.max()), rel=1e-6)
    end = SCHEDULES[name]().end_step
    if end is not None:
        assert (
            float(schedule.learning_rate(end)) == float(schedule.learning_rate(end + 10_000))
            and schedule.phase(end) == "end"
        )


@pytest.mark.parametrize(
    ("config", "peak", "end"),
    [
        (WSDConfig(peak_lr=3e-3, total_steps=700), 3e-3, 700),
        (WSDSConfig(cycles=(200, 300)), 1e-3, 300),
        (CosineConfig(total_steps=50, warmup_steps=5), 1e-3, 50),
        (
            RewarmConfig(
                cycles=(100, 200, 400), peak_lrs=(1e-3, 4e-3, 2e-3), warmup_steps=10, rewarmup_steps=10, decay_steps=10
            ),
            4e-3,
            400,
        ),
        (InverseSqrtConfig(peak_lr=2e-3), 2e-3, None),
    ],
)
def test_peak_and_end_come_from_the_config(config, peak: float, end: int | None) -> None:
    assert (config.peak_lr, config.end_step, config.build().learning_rate.peak_lr) == (peak, end, peak)


@pytest.mark.parametrize("shape", sorted(DECAY_SHAPES))
def test_decay_shapes_run_from_start_to_end_monotonically(shape: str) -> None:
    curve = jax.jit(jax.vmap(DECAY_SHAPES[shape], in_axes=(None, None, 0)))
    values = np.asarray(curve(jnp.float32(1.0), jnp.float32(0.1), jnp.linspace(0.0, 1.0, 101, dtype=jnp.float32)))
    assert values[0] == approx(1.0) and values[-1] == approx(0.1)
    assert np.all(np.isfinite(values)) and np.all(np.diff(values) <= 1e-7)


def test_wsd_boundaries_and_phases() -> None:
    config = WSDConfig(peak_lr=1e-3, warmup_steps=10, decay_steps=20, total_steps=100, min_lr_ratio=0.1)
    peak, low = 1e-3, 1e-4
    expected = {
        0: peak / 10,
        4: peak * 5 / 10,
        9: peak,
        10: peak,
        79: peak,
        80: peak - (peak - low) / 20,
        89: (peak + low) / 2,
        99: low,
        100: low,
        10**6: low,
    }
    assert {step: lr(config, step) for step in expected} == {step: approx(value) for step, value in expected.items()}
    phase = built(config).phase
    assert [phase(s) for s in (0, 9, 10, 79, 80, 99, 100)] == [
        "warmup",
        "warmup",
        "stable",
        "stable",
        "decay",
        "decay",
        "end",
    ]


@pytest.mark.parametrize(
    ("shape", "step", "expected"),
    [
        ("cosine", 89, 1e-4 + 0.9e-3 * 0.5 * (1 + math.cos(math.pi * 0.5))),
        ("cosine", 80, 1e-4 + 0.9e-3 * 0.5 * (1 + math.cos(math.pi / 20))),
        ("sqrt", 84, 1e-4 + 0.9e-3 * (1 - math.sqrt(0.25))),
        ("inv_sqrt", 84, 1e-3 / math.sqrt(1 + 99 * 0.25)),
        ("inv_sqrt", 99, 1e-4),
    ],
)
def test_wsd_decay_shapes(shape: str, step: int, expected: float) -> None:
    config = WSDConfig(peak_lr=1e-3, warmup_steps=10, decay_steps=20, total_steps=100, decay_shape=shape)
    assert lr(config, step) == pytest.approx(expected, rel=1e-5)
    assert lr(config, 79) == approx(1e-3) and lr(config, 99) == pytest.approx(1e-4, rel=1e-5)


def test_cosine_and_linear_boundaries() -> None:
    cosine = CosineConfig(peak_lr=1.0, warmup_steps=4, total_steps=20, min_lr_ratio=0.0)
    assert [lr(cosine, s) for s in (0, 3)] == [approx(0.25), approx(1.0)]
    assert lr(cosine, 4) == approx(0.5 * (1 + math.cos(math.pi / 16)))
    assert lr(cosine, 11) == approx(0.5) and lr(cosine, 19) == approx(0.0)
    assert [built(cosine).phase(s) for s in (3, 4, 19, 20)] == ["warmup", "decay", "decay", "end"]
    linear = LinearScheduleConfig(peak_lr=2.0, warmup_steps=4, total_steps=20, min_lr_ratio=0.25)
    assert [lr(linear, s) for s in (1, 3, 4, 11, 19, 50)] == [
        approx(1.0),
        approx(2.0),
        approx(2.0 - 1.5 / 16),
        approx(1.25),
        approx(0.5),
        approx(0.5),
    ]


def test_inverse_sqrt_boundaries() -> None:
    config = InverseSqrtConfig(peak_lr=1.0, warmup_steps=100)
    assert [lr(config, s) for s in (0, 49, 99, 100, 399, 9999)] == [
        approx(0.01),
        approx(0.5),
        approx(1.0),
        approx(math.sqrt(100 / 101)),
        approx(0.5),
        approx(0.1),
    ]
    assert lr(InverseSqrtConfig(peak_lr=1.0, warmup_steps=100, min_lr_ratio=0.2), 9999) == approx(0.2)
    assert [built(config).phase(s) for s in (0, 99, 100)] == ["warmup", "warmup", "decay"]


def test_wsd_s_kestrel_decays_at_every_cycle_end_and_honours_the_spacing_change() -> None:
    cycles = spaced_cycles((10_000, 200_000), (20_000, 280_000))
    assert cycles[:3] == (10_000, 20_000, 30_000) and cycles[19:] == (200_000, 220_000, 240_000, 260_000, 280_000)
    config = WSDSConfig(peak_lr=1e-3, warmup_steps=1000, cycles=cycles, decay_fraction=0.1, min_lr_ratio=0.1)
    schedule = config.build()
    steps = np.arange(0, 300_000, dtype=np.int32)
    values = np.asarray(jax.jit(jax.vmap(schedule.learning_rate))(jnp.asarray(steps)))
    early = (steps < 200_000) & (steps % 10_000 >= 9_000)
    late = (steps >= 200_000) & (steps < 280_000) & ((steps - 200_000) % 20_000 >= 18_000)
    decaying = (steps >= 1000) & (values < np.float32(1e-3))
    np.testing.assert_array_equal(decaying, early | late | (steps >= 280_000))
    assert np.all(values[steps >= 1000] >= np.float32(1e-4) * (1 - 1e-6))
    for number, end in enumerate(cycles, start=1):
        decay = 1000 if end <= 200_000 else 2000
        assert values[end - 1] == approx(1e-4) and values[end - decay - 1] == approx(1e-3)
        assert (
            schedule.phase(end - decay) == f"cycle-{number}/decay"
            and schedule.phase(end - decay - 1) == f"cycle-{number}/stable"
        )
        if end < 280_000:
            assert values[end] == approx(1e-3) and schedule.phase(end) == f"cycle-{number + 1}/stable"
    assert schedule.phase(280_000) == "end" and values[-1] == approx(1e-4)


def test_wsd_s_rewarms_from_the_decayed_lr() -> None:
    schedule = WSDSConfig(
        peak_lr=1.0, warmup_steps=10, cycles=(100, 200), decay_fraction=0.1, rewarmup_steps=10, min_lr_ratio=0.1
    ).build()
    assert [float(schedule.learning_rate(s)) for s in (99, 100, 109, 110)] == [
        approx(0.1),
        approx(0.1 + 0.9 / 10),
        approx(1.0),
        approx(1.0),
    ]
    assert [schedule.phase(s) for s in (99, 100, 109, 110)] == [
        "cycle-1/decay",
        "cycle-2/rewarmup",
        "cycle-2/rewarmup",
        "cycle-2/stable",
    ]


def test_one_cycle_wsd_s_is_wsd() -> None:
    wsd = WSDConfig(peak_lr=1e-3, warmup_steps=10, decay_steps=20, total_steps=200).build()
    wsd_s = WSDSConfig(peak_lr=1e-3, warmup_steps=10, cycles=(200,), decay_fraction=0.1).build()
    steps = jnp.arange(0, 250, dtype=jnp.int32)
    np.testing.assert_array_equal(
        jax.jit(jax.vmap(wsd.learning_rate))(steps), jax.jit(jax.vmap(wsd_s.learning_rate))(steps)
    )
    assert [wsd.phase(s) for s in range(250)] == [wsd_s.phase(s) for s in range(250)]


def test_32b_qk_norm_rewarm() -> None:
    config = RewarmConfig(
        cycles=(80_000, 1_000_000_000),
        peak_lrs=(7e-4,),
        warmup_steps=800,
        rewarmup_steps=1000,
        rewarm_from="zero",
        decay_steps=0,
    )
    schedule = config.build()
    values = {
        s: float(jax.jit(schedule.learning_rate)(np.int32(s)))
        for s in (79_999, 80_000, 80_500, 80_999, 81_000, 500_000)
    }
    assert values[80_000] == approx(7e-4 / 1000) and values[80_000] < 1e-6
    assert values[80_500] == approx(7e-4 * 501 / 1000) and values[80_500] == pytest.approx(7e-4 / 2, rel=3e-3)
    assert values[79_999] == values[80_999] == values[81_000] == values[500_000] == approx(7e-4)
    assert [schedule.phase(s) for s in (79_999, 80_000, 80_999, 81_000)] == [
        "cycle-1/stable",
        "cycle-2/rewarmup",
        "cycle-2/rewarmup",
        "cycle-2/stable",
    ]


def test_phoenix_reheat_from_the_cooldown_lr_with_per_cycle_peaks() -> None:
    phoenix = RewarmConfig(
        cycles=(100_000, 1_000_000_000), peak_lrs=(1.7e-3,), warmup_steps=1000, rewarmup_steps=2000, decay_steps=20_000
    )
    assert [lr(phoenix, s) for s in (80_000, 99_999, 100_000, 101_999)] == [
        approx(1.7e-3 - 1.53e-3 / 20_000),
        approx(1.7e-4),
        approx(1.7e-4 + 1.53e-3 / 2000),
        approx(1.7e-3),
    ]
    two_peaks = RewarmConfig(
        cycles=(100, 200), peak_lrs=(1.0, 0.5), warmup_steps=10, rewarmup_steps=10, decay_steps=10, min_lr_ratio=0.1
    )
    assert [lr(two_peaks, s) for s in (99, 100, 109, 150, 199)] == [
        approx(0.1),
        approx(0.1 + 0.4 / 10),
        approx(0.5),
        approx(0.5),
        approx(0.05),
    ]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: WSDConfig(warmup_steps=600, decay_steps=500, total_steps=1000),
            r"warmup_steps=600.*decay_steps=500.*total_steps=1000",
        ),
        (lambda: WSDConfig(peak_lr=-1e-3), r"peak_lr=-0.001 must be > 0"),
        (lambda: WSDConfig(min_lr_ratio=1.5), r"min_lr_ratio=1.5"),
        (lambda: WSDConfig(decay_shape="exp"), r"decay_shape='exp'"),
        (lambda: WSDConfig(decay_shape="inv_sqrt", min_lr_ratio=0.0), r"min_lr_ratio=0.0.*'sqrt'"),
        (lambda: RewarmConfig(cycles=(80_000, 80_000)), r"cycles=\(80000, 80000\) must be strictly increasing"),
        (lambda: RewarmConfig(cycles=()), r"cycles=\(\) is empty"),
        (lambda: RewarmConfig(peak_lrs=(1e-3, -1e-3)), r"peak_lrs\[1\]=-0.001 must be > 0"),
        (
            lambda: RewarmConfig(cycles=(10, 20, 30), peak_lrs=(1.0, 2.0)),
            r"peak_lrs=\(1.0, 2.0\) needs 1 or len\(cycles\)=3",
        ),
        (lambda: RewarmConfig(decay_steps=10, decay_fraction=0.1), r"decay_steps=10 or decay_fraction=0.1, not both"),
        (
            lambda: RewarmConfig(cycles=(600, 700), rewarmup_steps=50, decay_steps=60),
            r"cycle 2 \(600 to 700\) has 100 steps, fewer than rewarmup_steps=50 plus decay=60",
        ),
        (lambda: RewarmConfig(rewarm_from="peak"), r"rewarm_from='peak'"),
        (lambda: RewarmConfig(cycles=(2**31,)), r"cycles\[-1\]=2147483648"),
        (lambda: WSDSConfig(decay_fraction=0.0), r"decay_fraction=0.0 must be in \(0, 1\]"),
        (lambda: WSDSConfig(cycles=(100, 200), warmup_steps=95), r"cycle 1 .* warmup_steps=95 plus decay=10"),
        (lambda: CosineConfig(warmup_steps=2000, total_steps=1000), r"warmup_steps=2000 must be < total_steps=1000"),
        (lambda: InverseSqrtConfig(warmup_steps=0), r"warmup_steps=0 must be >= 1"),
        (lambda: spaced_cycles((10_000, 200_000), (20_000, 290_000)), r"until=290000.*200000"),
    ],
)
def test_bad_configs_name_the_field_and_value(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_phase_refuses_negative_steps() -> None:
    with pytest.raises(ValueError, match="step=-1"):
        WSDConfig().build().phase(-1)
