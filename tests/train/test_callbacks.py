"""Training callbacks: a callback sees every lifecycle point in order, across a preemption and a resume.

Adding a behaviour to training (router metrics, an RL rollout phase) is a
callback or an objective's auxiliary metric, not a branch in the loop; the
recorder below is such a callback, and the objective's `aux/log_z` reaches
every record from inside the jitted step.
"""

import json
import os
import signal
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.train.test_profiler import tiny_config
from tootsie.errors import Preempted
from tootsie.eval.training import run_training
from tootsie.train.callbacks import Callback, Callbacks, Every, hook_callback
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.state import TrainState

STEPS = 6


@pytest.fixture
def config(make_cache) -> TrainConfig:
    return replace(
        tiny_config(make_cache),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=2, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=4, every_minutes=None),
        profile_steps=None,
    )


class Recorder(Callback):
    """Records every lifecycle point it sees, first among the callbacks."""

    order = 0

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def start(self, run) -> None:
        self.seen.append(("start", run.state.step))

    def after_step(self, run, step, record) -> None:
        assert run.state.step == step + 1 and "loss" in record
        self.seen.append(("after_step", step))

    def checkpoint(self, run, path) -> None:
        self.seen.append(("checkpoint", Path(path).name))

    def rewind(self, run, event) -> None:
        self.seen.append(("rewind", event["to_step"]))

    def end(self, run) -> None:
        self.seen.append(("end", run.state.step))

    def error(self, run, error) -> None:
        self.seen.append(("error", type(error).__name__))

    def close(self, run) -> None:
        self.seen.append(("close", run.state.step))


def _sigterm_after(step: int):
    """A step hook that sends this process SIGTERM after `step` steps (the checkpointer turns it into a stop)."""

    def hook(state: TrainState) -> dict[str, float]:
        if state.step == step:
            os.kill(os.getpid(), signal.SIGTERM)
        return {}

    return hook


def test_a_callback_sees_every_lifecycle_point_in_order_across_a_preemption_and_a_resume(
    config: TrainConfig, tmp_path: Path
) -> None:
    first = Recorder()
    with pytest.raises(Preempted, match="stopped after step 2"):
        run_training(config, str(tmp_path / "run"), hooks=(_sigterm_after(2),), callbacks=(first,))
    assert first.seen == [
        ("start", 0),
        ("after_step", 0),
        ("after_step", 1),
        ("checkpoint", "step-000002"),  # the preemption's temporary checkpoint, committed before the stop
        ("error", "Preempted"),
        ("close", 2),
    ]
    second = Recorder()
    run_training(config, str(tmp_path / "run"), callbacks=(second,))
    assert second.seen == [
        ("start", 2),
        ("after_step", 2),
        ("after_step", 3),  # the permanent step-4 checkpoint starts here, in the background
        ("after_step", 4),
        ("after_step", 5),
        ("end", 6),
        ("checkpoint", "step-000004"),  # reported where the loop waits for it: before the final save
        ("checkpoint", "step-000006"),
        ("close", 6),
    ]


def test_an_auxiliary_metric_of_the_objective_and_a_scheduled_hook_reach_the_record(
    config: TrainConfig, tmp_path: Path
) -> None:
    hook = hook_callback(lambda state: {"hook/step": float(state.step)}, Every(steps=4, last=True))
    run_training(config, str(tmp_path / "run"), callbacks=(hook,))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(record["aux/log_z"]) for record in records)
    for record in records:  # the instability signals: one attention maximum per layer, maxima above the means
        assert len(record["aux/attn_logit_max"]) == config.model.num_layers
        assert record["aux/log_z_max"] >= record["aux/log_z"] and record["aux/logit_max"] > 0
        assert record["embed_norm"] > 0
    assert {record["step"]: record["hook/step"] for record in records if "hook/step" in record} == {3: 4.0, 5: 6.0}


def test_schedules_by_steps_by_seconds_and_at_the_last_step() -> None:
    class Marker(Callback):
        def __init__(self, every: Every) -> None:
            self.every, self.steps = every, []

        def after_step(self, run, step, record) -> None:
            self.steps.append(step)

    by_steps, last, by_seconds = Marker(Every(steps=3)), Marker(Every(steps=4, last=True)), Marker(Every(seconds=1e9))
    callbacks = Callbacks([by_steps, last, by_seconds])
    run = SimpleNamespace(config=SimpleNamespace(num_steps=7), rewound=None)
    for step in range(7):
        callbacks.after_step(run, step, {})
    assert by_steps.steps == [2, 5] and last.steps == [3, 6] and by_seconds.steps == []
    with pytest.raises(ValueError, match="steps or seconds, not both"):
        Every(steps=2, seconds=60)
