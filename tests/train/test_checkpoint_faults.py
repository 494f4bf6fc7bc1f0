"""Kill a run at each checkpoint fault point (a real SIGKILL), rerun it, and match an uninterrupted run bit for bit.

The points (`tootsie.train.faults`): mid-tensor (some arrays of step 4 written),
before-commit (all written, no state.json), after-commit (state.json written,
nothing after it) and restore (a resume killed while reading step 4). Each
killed run is rerun without the fault; its losses, final parameters and final
optimizer state must equal the uninterrupted run's exactly.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.processes import communicate
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.models.llama import LlamaConfig
from tootsie.train.checkpoint import checkpoint_dir, list_checkpoints, read_tensors
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.faults import FAULT_ENV
from tootsie.train.schedule import WSDConfig

STEPS = 6
FAULT_STEP = 4


def _config(cache: str) -> TrainConfig:
    return TrainConfig(
        model=LlamaConfig(
            vocab_size=48, hidden_dim=64, intermediate_dim=128, num_layers=2, num_heads=4, num_kv_heads=2
        ),
        data=MixtureConfig(
            caches={"a": cache},
            stages=(MixtureStage(0, {"a": 1.0}),),
            seq_len=16,
            batch_schedule=BatchSchedule(((0, 4),)),
        ),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=2, decay_steps=2, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=2, every_minutes=None),
    )


def _train(config_file: Path, out: Path, fault: str | None) -> int:
    env = {key: value for key, value in os.environ.items() if key != FAULT_ENV}
    if fault is not None:
        env[FAULT_ENV] = fault
    command = [sys.executable, "-m", "tootsie.cli.main", "train", "--config", str(config_file), "--out", str(out)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = communicate(process, timeout=240)
    assert fault is not None or process.returncode == 0, err[-2000:]
    return process.returncode


def _losses(out: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


def _final(out: Path) -> dict[str, dict[str, np.ndarray]]:
    checkpoint = checkpoint_dir(out / "checkpoints", STEPS)
    return {tree: read_tensors(checkpoint, tree) for tree in ("model", "opt_state")}


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> tuple[Path, Path]:
    """(config file, output) of the uninterrupted run, shared by every fault."""
    root = tmp_path_factory.mktemp("faults")
    writer = TokenCacheWriter(root / "cache", vocab_size=48, ledger_extra={"tokenizer_sha256": "test"})
    for k in range(40):
        writer.append(np.asarray([(5 * i + k) % 45 + 2 for i in range(30)]))
    writer.close()
    config_file = root / "train.yaml"
    config_file.write_text(dump_config(_config(str(root / "cache"))))
    _train(config_file, root / "straight", None)
    return config_file, root / "straight"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("point", ["mid-tensor", "before-commit", "after-commit", "restore"])
def test_a_run_killed_at_a_checkpoint_fault_resumes_bit_identically(straight, tmp_path, point: str) -> None:
    config_file, reference = straight
    out = tmp_path / "killed"
    faults = [f"checkpoint:after-commit:{FAULT_STEP}", f"checkpoint:restore:{FAULT_STEP}"]
    for fault in faults if point == "restore" else [f"checkpoint:{point}:{FAULT_STEP}"]:
        assert _train(config_file, out, fault) == -signal.SIGKILL
        committed = [step for step, _ in list_checkpoints(out / "checkpoints")]
        assert committed == ([2, 4] if point in ("after-commit", "restore") else [2])
    if point in ("mid-tensor", "before-commit"):
        assert Path(checkpoint_dir(out / "checkpoints", FAULT_STEP), "model").is_dir()  # its arrays were on disk
    _train(config_file, out, None)
    assert _losses(out) == _losses(reference)
    final, expected = _final(out), _final(reference)
    for tree, tensors in expected.items():
        assert sorted(final[tree]) == sorted(tensors)
        for name, value in tensors.items():
            assert np.array_equal(final[tree][name], value), f"{tree} {name} differs"
