"""A run with `divergence` set that diverges writes diverged.json and ends normally; without it, NaN still raises."""

import math
from dataclasses import replace

import pytest

from tests.train.test_trainer import config  # noqa: F401 - the tiny run's fixture
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.train.checkpoint import list_checkpoints
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.divergence import DIVERGED_FILE, DivergenceConfig, DivergenceWatch, read_divergence
from tootsie.train.stability import StabilityConfig

LN_VOCAB = math.log(40)
"""The tiny run's initial loss is about ln(vocab_size = 40) = 3.69."""


def _steps(directory) -> list[int]:
    return [record["step"] for record in read_metrics(directory / METRICS_FILE).records]


def _huge_lr(base: TrainConfig) -> TrainConfig:
    """The tiny run at 1e8 times its learning rate: the gradient norm is NaN on step 1, the loss from step 2."""
    return replace(base, num_steps=4, schedule=replace(base.schedule, peak_lr=base.schedule.peak_lr * 1e8))


def test_a_nan_run_writes_its_reason_and_keeps_only_the_checkpoints_before_it(config, tmp_path) -> None:  # noqa: F811
    planted = replace(
        _huge_lr(config),
        divergence=DivergenceConfig(max_loss=1.5 * LN_VOCAB, patience=3),
        checkpoints=CheckpointConfig(every_steps=1),
    )
    assert run_training(planted, str(tmp_path / "run")) is None
    diverged = read_divergence(tmp_path / "run")
    assert diverged is not None and diverged["step"] == 1 and diverged["reason"] == "grad_norm nan at step 1"
    assert {key: diverged[key] for key in ("max_loss", "patience", "max_nonfinite_steps")} == {
        "max_loss": 1.5 * LN_VOCAB,
        "patience": 3,
        "max_nonfinite_steps": 1,
    }
    assert _steps(tmp_path / "run") == [0, 1]
    # the checkpoint after step 0 stays, committed; none of the state after step 1, and no final one
    assert [step for step, _ in list_checkpoints(tmp_path / "run" / "checkpoints")] == [1]
    assert len(list((tmp_path / "run" / "checkpoints").iterdir())) == 1  # and nothing half-written beside it


def test_without_divergence_the_same_run_raises_as_before(config, tmp_path) -> None:  # noqa: F811
    planted = replace(_huge_lr(config), stability=StabilityConfig(max_nonfinite_steps=1))
    with pytest.raises(TootsieError, match="NaN/inf loss or gradient: the run is diverging"):
        run_training(planted, str(tmp_path / "run"))
    assert read_divergence(tmp_path / "run") is None


def test_a_loss_above_max_loss_for_patience_steps_diverges_at_the_last_of_them_and_a_rerun_does_not_train(
    config,  # noqa: F811
    tmp_path,
) -> None:
    low = replace(config, divergence=DivergenceConfig(max_loss=1.0, patience=3))  # every step's loss is above 1
    assert run_training(low, str(tmp_path / "run")) is None
    diverged = read_divergence(tmp_path / "run")
    assert diverged is not None and diverged["step"] == 2
    assert diverged["reason"] == "loss above 1 for 3 steps (steps 0-2)" and diverged["loss"] > 1.0
    logged = (tmp_path / "run" / METRICS_FILE).read_bytes()
    assert _steps(tmp_path / "run") == [0, 1, 2]
    assert list_checkpoints(tmp_path / "run" / "checkpoints") == []  # every_steps=3 would have saved after step 2
    assert run_training(low, str(tmp_path / "run")) is None
    assert (tmp_path / "run" / METRICS_FILE).read_bytes() == logged
    assert read_divergence(tmp_path / "run") == diverged and (tmp_path / "run" / DIVERGED_FILE).is_file()


def _record(step: int, loss: float) -> dict[str, object]:
    return {"step": step, "loss": loss, "grad_norm": 1.0}


def test_a_watch_rebuilt_from_the_log_decides_as_the_uninterrupted_one() -> None:
    divergence = DivergenceConfig(max_loss=5.0, patience=3, max_nonfinite_steps=2)
    losses = [4.0, 6.0, 7.0, 4.0, 6.0, 6.0, 6.0]
    straight = DivergenceWatch(divergence, [])
    decisions = [straight.observe(step, _record(step, loss)) for step, loss in enumerate(losses)]
    assert decisions[:6] == [None] * 6 and decisions[6]["reason"] == "loss above 5 for 3 steps (steps 4-6)"
    resumed = DivergenceWatch(divergence, [_record(step, loss) for step, loss in enumerate(losses[:5])])
    assert resumed.observe(5, _record(5, 6.0)) is None
    assert resumed.observe(6, _record(6, 6.0)) == decisions[6]


def test_non_finite_steps_count_whether_or_not_in_a_row_and_are_logged_as_the_metrics_log_writes_them() -> None:
    watch = DivergenceWatch(DivergenceConfig(max_loss=5.0, patience=10, max_nonfinite_steps=2), [])
    assert watch.observe(0, _record(0, math.nan)) is None
    assert watch.observe(1, _record(1, 1.0)) is None
    diverged = watch.observe(2, _record(2, math.inf))
    assert diverged["loss"] == "inf"
    assert diverged["reason"] == "loss inf at step 2 (2 non-finite steps, max_nonfinite_steps=2)"
    replayed = DivergenceWatch(DivergenceConfig(max_loss=5.0, patience=10), [{"step": 0, "loss": None}])
    assert replayed.nonfinite == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_loss": 0.0, "patience": 3}, "max_loss must be a positive finite loss"),
        ({"max_loss": math.nan, "patience": 3}, "max_loss must be a positive finite loss"),
        ({"max_loss": 5.0, "patience": 0}, "patience must be >= 1"),
        ({"max_loss": 5.0, "patience": 3, "max_nonfinite_steps": 0}, "max_nonfinite_steps must be >= 1"),
    ],
)
def test_divergence_config_refuses_bad_values(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DivergenceConfig(**fields)
