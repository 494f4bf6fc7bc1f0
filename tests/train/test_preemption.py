"""SIGTERM while training: the run finishes its step, commits a checkpoint, exits 75, and a rerun resumes to the bit;
during the last step it lets the run finish (exit 0), and a second SIGTERM changes nothing (docs/training.md)."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import jax
import numpy as np
import pytest

from tests.processes import communicate
from tests.train.test_distributed_checkpoint import free_port
from tests.train.test_kill_resume import _config as kill_resume_config
from tests.train.test_kill_resume import _losses
from tests.train.test_sharding import _config as sharding_config
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import PREEMPTED_EXIT_CODE, Preempted
from tootsie.models.llama import LlamaConfig
from tootsie.train.checkpoint import STATE_FILE, checkpoint_dir, latest_checkpoint, load_checkpoint
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.preemption import StopSignal
from tootsie.train.schedule import WSDConfig
from tootsie.train.sharding import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID, DistributedConfig, MeshConfig
from tootsie.train.state import abstract_state, build_optimizer

STEPS = 40


def test_sigterm_sets_the_flag_instead_of_ending_the_process_and_the_old_handler_comes_back() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: seen.append(number))
    try:
        stop = StopSignal()
        stop.install()
        assert not stop.requested()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested() and seen == []
        stop.restore()
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_preempted_passes_except_exception_like_keyboard_interrupt() -> None:
    with pytest.raises(Preempted, match="stopped after step 7 .* rerun the same command to resume"):
        try:
            raise Preempted(7, "run/checkpoints/step-7")
        except Exception:  # noqa: BLE001 - the point: a handler for errors must not swallow a stop request
            pytest.fail("Preempted was caught as an Exception")


def _config(caches: dict[str, str]) -> TrainConfig:
    """test_kill_resume's tiny run (2 layers, a batch size change, skip-bad-steps), longer and checkpointed every 7."""
    return replace(
        kill_resume_config(caches),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=3, decay_steps=10, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=7, every_minutes=None),
    )


def _final_state(out: Path, config: TrainConfig) -> list[np.ndarray]:
    params, _, opt_state = abstract_state(config, build_optimizer(config))
    trees, _ = load_checkpoint(latest_checkpoint(out / "checkpoints"), {"model": params, "opt_state": opt_state})
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(trees)]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigterm_checkpoints_exits_75_and_the_rerun_matches_an_uninterrupted_run_bit_for_bit(
    tmp_path, make_cache
) -> None:
    caches = {
        "a": make_cache("a", [[(3 * i + k) % 37 + 2 for i in range(40)] for k in range(30)], 40),
        "b": make_cache("b", [[(7 * i) % 31 + 3 for i in range(25)] for _ in range(30)], 40),
    }
    config = _config(caches)
    (tmp_path / "train.yaml").write_text(dump_config(config))
    command = [sys.executable, "-m", "tootsie.cli.main", "train", "--config", str(tmp_path / "train.yaml"), "--out"]
    straight = subprocess.Popen([*command, str(tmp_path / "straight")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    preempted = tmp_path / "preempted"
    process = subprocess.Popen([*command, str(preempted)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics, deadline = preempted / "metrics.jsonl", time.monotonic() + 120
    while process.poll() is None and not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert time.monotonic() < deadline, "the run logged no step within 120 s"
        time.sleep(0.005)
    process.send_signal(signal.SIGTERM)
    _, stderr = communicate(process, timeout=120)
    assert process.returncode == PREEMPTED_EXIT_CODE, stderr[-2000:]
    reached = len(_losses(preempted))
    assert 2 <= reached < STEPS and f"stopped after step {reached} " in stderr
    checkpoint = latest_checkpoint(preempted / "checkpoints")
    assert checkpoint == checkpoint_dir(preempted / "checkpoints", reached)
    state = json.loads(Path(checkpoint, STATE_FILE).read_text())
    assert state["step"] == reached and state["kind"] == ("permanent" if reached % 7 == 0 else "temporary")

    resumed = subprocess.run([*command, str(preempted)], capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    communicate(straight, timeout=120)
    assert straight.returncode == 0
    assert _losses(preempted) == _losses(tmp_path / "straight")
    assert [step for step, _ in _losses(preempted)] == list(range(STEPS))
    final, reference = _final_state(preempted, config), _final_state(tmp_path / "straight", config)
    assert len(final) == len(reference) > 0
    for index, (value, expected) in enumerate(zip(final, reference, strict=True)):
        np.testing.assert_array_equal(value, expected, err_msg=f"leaf {index} of (model, opt_state)")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigterm_to_one_of_two_processes_stops_both_after_the_same_step(tmp_path, make_cache) -> None:
    config = replace(
        sharding_config(make_cache),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=3, decay_steps=10, total_steps=STEPS),
        mesh=MeshConfig(data=-1),
        distributed=DistributedConfig(),
    )
    (tmp_path / "train.yaml").write_text(dump_config(config))
    out = tmp_path / "run"
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip(),
        ENV_COORDINATOR: f"127.0.0.1:{free_port()}",
        ENV_NUM_PROCESSES: "2",
    }
    command = [sys.executable, "-m", "tootsie.cli.main", "train", "--config", str(tmp_path / "train.yaml")]
    processes = [
        subprocess.Popen(
            [*command, "--out", str(out)],
            env={**env, ENV_PROCESS_ID: str(index)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(2)
    ]
    metrics, deadline = out / "metrics.jsonl", time.monotonic() + 150
    while all(p.poll() is None for p in processes) and not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert time.monotonic() < deadline, "the run logged no step within 150 s"
        time.sleep(0.005)
    processes[1].send_signal(signal.SIGTERM)  # process 1 only: process 0 learns of it through the all-gather
    errors = [communicate(process, timeout=120)[1] for process in processes]
    assert [p.returncode for p in processes] == [PREEMPTED_EXIT_CODE] * 2, errors[0][-2000:] + errors[1][-2000:]
    reached = len(_losses(out))
    assert 2 <= reached < STEPS and all(f"stopped after step {reached} " in error for error in errors)
    assert latest_checkpoint(out / "checkpoints") == checkpoint_dir(out / "checkpoints", reached)


SIGNALLED_TRAIN = """
import sys, time
from pathlib import Path

import tootsie.train.checkpointing as checkpointing
import tootsie.train.trainer as trainer
from tootsie.cli.main import main

config, out, at_step, signals = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
handled = []


class CountingStopSignal(checkpointing.StopSignal):
    def _handle(self, number, frame):
        handled.append(number)
        (out / f"sigterm-{len(handled)}").touch()
        super()._handle(number, frame)


def global_batch(data, step, sharding, fields):
    if step == at_step:  # step `at_step` has begun: hold it until the test's signals were handled
        (out / "in-step").touch()
        deadline = time.monotonic() + 60
        while len(handled) < signals:
            if time.monotonic() > deadline:
                raise SystemExit(f"{len(handled)} of {signals} SIGTERMs arrived within 60 s")
            time.sleep(0.005)
    return real_global_batch(data, step, sharding, fields)


real_global_batch, trainer.global_batch = trainer.global_batch, global_batch
checkpointing.StopSignal = CountingStopSignal
raise SystemExit(main(["train", "--config", config, "--out", str(out)]))
"""
"""`tootsie train` that holds step `at_step` (argv[3]) until it has handled `signals` (argv[4]) SIGTERMs: it touches
`in-step` when the step begins and `sigterm-N` as it handles the N-th, so the test signals inside a known step."""
SHORT_STEPS = 5
MARKERS = ("in-step", "sigterm-1", "sigterm-2")


def _start_signalled(tmp_path: Path, cache: str, name: str, at_step: int, signals: int) -> subprocess.Popen:
    """A short one-layer run (no EMA, no periodic checkpoints) holding step `at_step` for `signals` SIGTERMs."""
    config = TrainConfig(
        model=LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1),
        data=MixtureConfig(
            caches={"a": cache},
            stages=(MixtureStage(0, {"a": 1.0}),),
            seq_len=16,
            batch_schedule=BatchSchedule.constant(4),
        ),
        num_steps=SHORT_STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=2, total_steps=SHORT_STEPS),
        ema=None,
        checkpoints=CheckpointConfig(every_steps=100, every_minutes=None),
    )
    (tmp_path / f"{name}.yaml").write_text(dump_config(config))
    (tmp_path / name).mkdir()
    argv = [str(tmp_path / f"{name}.yaml"), str(tmp_path / name), str(at_step), str(signals)]
    return subprocess.Popen(
        [sys.executable, "-c", SIGNALLED_TRAIN, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _cache(make_cache) -> str:
    return make_cache("a", [[(3 * i + k) % 37 + 2 for i in range(40)] for k in range(30)], 40)


def _signal(process: subprocess.Popen, out: Path, signals: int) -> None:
    """Once `process` is inside its held step, send it `signals` SIGTERMs, each after the one before was handled."""
    for marker in ["in-step"] + [f"sigterm-{n}" for n in range(1, signals)]:
        deadline = time.monotonic() + 200
        while not (out / marker).exists():
            assert process.poll() is None, f"the run exited before {marker}: {process.communicate()[1][-2000:]}"
            assert time.monotonic() < deadline, f"no {marker} within 200 s"
            time.sleep(0.005)
        process.send_signal(signal.SIGTERM)


def _outcome(process: subprocess.Popen, out: Path) -> tuple[int | None, list[str], list[str], list[tuple[int, float]]]:
    """What a run left: its exit code, its `tootsie:` lines on stderr (its directory written OUT), every file it wrote
    (the test's markers aside) and its logged losses."""
    _, stderr = communicate(process, timeout=120)
    said = [line.replace(str(out), "OUT") for line in stderr.splitlines() if line.startswith("tootsie:")]
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name not in MARKERS)
    return process.returncode, said, files, _losses(out)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_during_the_last_step_lets_the_run_finish_with_exit_0(tmp_path, make_cache) -> None:
    process = _start_signalled(tmp_path, _cache(make_cache), "run", at_step=SHORT_STEPS - 1, signals=1)
    _signal(process, tmp_path / "run", signals=1)
    code, said, _, losses = _outcome(process, tmp_path / "run")
    assert (tmp_path / "run" / "sigterm-1").exists()  # the handler took it: the process did not die of it
    assert code == 0 and not any("preempted" in line for line in said), said
    assert [step for step, _ in losses] == list(range(SHORT_STEPS))
    checkpoint = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert checkpoint == checkpoint_dir(tmp_path / "run" / "checkpoints", SHORT_STEPS)
    state = json.loads(Path(checkpoint, STATE_FILE).read_text())
    assert state["step"] == SHORT_STEPS and state["kind"] == "permanent"  # the final save, not a preemption's


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_second_sigterm_changes_nothing(tmp_path, make_cache) -> None:
    """Two SIGTERMs in step 2 end the run exactly as one does: exit 75 after step 3, the same files, the same losses."""
    cache = _cache(make_cache)
    runs = {n: _start_signalled(tmp_path, cache, f"x{n}", at_step=2, signals=n) for n in (1, 2)}
    for signals, process in runs.items():
        _signal(process, tmp_path / f"x{signals}", signals)
    once, twice = (_outcome(runs[signals], tmp_path / f"x{signals}") for signals in (1, 2))
    assert (tmp_path / "x2" / "sigterm-2").exists()
    assert once == twice
    code, said, files, losses = twice
    assert code == PREEMPTED_EXIT_CODE
    assert said == [f"tootsie: {Preempted(3, str(checkpoint_dir(Path('OUT/checkpoints'), 3)))}"]
    assert [step for step, _ in losses] == [0, 1, 2]
    assert latest_checkpoint(tmp_path / "x2" / "checkpoints") == checkpoint_dir(tmp_path / "x2" / "checkpoints", 3)
    state = json.loads(Path(checkpoint_dir(tmp_path / "x2" / "checkpoints", 3), STATE_FILE).read_text())
    assert state["step"] == 3 and state["kind"] == "temporary"
    assert any(name.startswith("checkpoints/") for name in files), files
