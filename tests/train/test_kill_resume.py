"""SIGKILL a training run at random points (checkpoint writes included), resume, and match every loss bit for bit."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import finish
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.stability import StabilityConfig

STEPS = 24
KILLS = 3
SPACING = 4
"""The k-th kill waits for about k * SPACING logged steps, so even a run that overshoots its kill point by
several steps (a loaded machine, a fast tiny step) leaves steps for the next kill."""


def _config(caches: dict[str, str]) -> TrainConfig:
    return TrainConfig(
        model=LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1),
        data=MixtureConfig(
            caches=caches,
            stages=(MixtureStage(0, {"a": 0.6, "b": 0.4}),),
            seq_len=16,
            batch_schedule=BatchSchedule(((0, 4), (7, 6))),
        ),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=3, decay_steps=6, total_steps=STEPS),
        stability=StabilityConfig(clip_update_window=8, skip_bad_steps=True, skip_window=8),
        checkpoints=CheckpointConfig(every_steps=1, every_minutes=None),  # a checkpoint write after every step
    )


def _losses(out: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


@pytest.mark.slow
def test_killed_runs_resume_to_identical_losses(tmp_path, make_cache) -> None:
    caches = {
        "a": make_cache("a", [[(3 * i + k) % 37 + 2 for i in range(40)] for k in range(30)], 40),
        "b": make_cache("b", [[(7 * i) % 31 + 3 for i in range(25)] for _ in range(30)], 40),
    }
    (tmp_path / "train.yaml").write_text(dump_config(_config(caches)))
    command = [sys.executable, "-m", "tootsie.cli.main", "train", "--config", str(tmp_path / "train.yaml")]
    subprocess.run([*command, "--out", str(tmp_path / "straight")], check=True, capture_output=True, timeout=300)

    rng, kills = random.Random(7), 0
    killed = tmp_path / "killed"
    while True:
        process = subprocess.Popen(
            [*command, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        metrics = killed / "metrics.jsonl"
        start_lines = len(metrics.read_text().splitlines()) if metrics.exists() else 0
        if kills == KILLS:
            finish(process, timeout=300)
            break
        target = max(start_lines + 1, (kills + 1) * SPACING + rng.randint(-1, 1))
        while process.poll() is None and (not metrics.exists() or len(metrics.read_text().splitlines()) < target):
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.03))  # land anywhere in the next step or its checkpoint write
        if process.poll() is not None:
            break
        process.send_signal(signal.SIGKILL)
        finish(process, timeout=60)
        kills += 1
    assert process.returncode == 0 and kills == KILLS
    assert _losses(killed) == _losses(tmp_path / "straight")
    assert [step for step, _ in _losses(killed)] == list(range(STEPS))
