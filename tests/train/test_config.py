"""TrainConfig's cross-field checks: the schedule's end against num_steps, and the stability defaults in one place."""

import dataclasses

import pytest

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import TrainConfig
from tootsie.train.schedule import InverseSqrtConfig, RewarmConfig, WSDConfig, WSDSConfig
from tootsie.train.stability import StabilityConfig

DATA = MixtureConfig(
    caches={"a": "/x"}, stages=(MixtureStage(0, {"a": 1.0}),), batch_schedule=BatchSchedule.constant(4)
)


def config(num_steps: int, schedule) -> TrainConfig:
    return TrainConfig(model=LlamaConfig(), data=DATA, num_steps=num_steps, schedule=schedule)


@pytest.mark.parametrize(
    ("schedule", "end"),
    [
        (WSDConfig(total_steps=100, warmup_steps=10, decay_steps=20), 100),
        (WSDSConfig(cycles=(50, 100), warmup_steps=5), 100),
        (RewarmConfig(cycles=(60, 100), warmup_steps=5, rewarmup_steps=5, decay_steps=10), 100),
    ],
)
def test_num_steps_may_stop_at_or_before_the_schedule_end_but_not_after(schedule, end: int) -> None:
    assert config(end, schedule).num_steps == end
    assert config(end // 2, schedule).num_steps == end // 2  # a phase that a warm start continues on the same schedule
    with pytest.raises(
        ValueError,
        match=(
            rf"num_steps={end + 1} runs past the schedule's end at step {end} \(schedule.end_step\)"
            rf".*or lower num_steps to {end}"
        ),
    ):
        config(end + 1, schedule)


def test_a_schedule_without_an_end_takes_any_num_steps() -> None:
    assert config(10**6, InverseSqrtConfig()).num_steps == 10**6


def test_a_cooldown_counts_global_steps_against_the_shared_schedule() -> None:
    # Marin 32B style: the cooldown warm-starts at 160k and ends with the schedule at 192k (global steps).
    cooldown = WSDConfig(peak_lr=7e-4, warmup_steps=0, decay_steps=32_000, total_steps=192_000)
    assert config(192_000, cooldown).num_steps == 192_000
    with pytest.raises(ValueError, match="num_steps=200000 runs past the schedule's end at step 192000"):
        config(200_000, cooldown)


def test_the_stability_default_is_stability_configs_own() -> None:
    default = StabilityConfig()
    assert config(10, WSDConfig()).stability == default
    assert (default.clip_update_window, default.skip_bad_steps) == (None, False)
    field = next(f for f in dataclasses.fields(TrainConfig) if f.name == "stability")
    assert field.default_factory is StabilityConfig
