"""Automatic rewind: the step → data-step map, the plateau watch, and a toy run with a junk data window."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.processes import finish
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.monitor.spikes import SpikeConfig
from tootsie.train.checkpoint import list_checkpoints
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.rewind import DataSkips, PlateauWatch, RewindConfig
from tootsie.train.schedule import WSDConfig

JUNK_START, JUNK_STEPS, STEPS = 32, 10, 72
WATCH = RewindConfig(spikes=SpikeConfig(window=16, horizon=6, settle=3), max_rewinds=2)


@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 15)), max_size=5),
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_data_steps_avoid_every_window_and_keep_order(windows: list[tuple[int, int]], sizes: list[int]) -> None:
    skips = DataSkips()
    for start, length in windows:
        skips = skips.add(start, start + length)
    mapped = [skips.data_step(step) for step in range(120)]
    assert all(b > a for a, b in zip(mapped, mapped[1:]))
    assert not any(start <= d < end for d in mapped for start, end in skips.windows)
    assert all(b[0] > a[1] for a, b in zip(skips.windows, skips.windows[1:]))  # merged: disjoint and not touching
    first = skips.windows[0][0] if skips.windows else 120
    assert mapped[:first] == list(range(first))
    schedule = BatchSchedule(tuple((4 * i, size) for i, size in enumerate(sizes)))
    for step in (0, 7, 50, 119):
        assert skips.sequences_before(step, schedule) == sum(schedule.batch_size(d) for d in mapped[:step])


def test_the_watch_fires_once_for_a_plateau_and_never_for_a_recovered_spike() -> None:
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, 200)
    plateau = np.where(np.arange(200) >= 100, 3.5, 3.0) + noise
    bump = np.where((np.arange(200) >= 100) & (np.arange(200) < 103), 5.0, 3.0) + noise
    for curve, expected in ((plateau, [100 + WATCH.delay]), (bump, [])):
        watch = PlateauWatch(WATCH, [])
        fired = [step for step, loss in enumerate(curve) if watch.observe(step, float(loss)) is not None]
        assert fired == expected


def _cache(root: Path, name: str, documents: list[list[int]]) -> str:
    writer = TokenCacheWriter(root / name, vocab_size=40, ledger_extra={"tokenizer_sha256": "test"})
    for document in documents:
        writer.append(np.asarray(document))
    writer.close()
    return str(root / name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[TrainConfig, Path]:
    """A learnable pattern, with junk tokens at data steps [32, 42); trained without and with rewind."""
    root = tmp_path_factory.mktemp("rewind")
    rng = np.random.default_rng(0)
    good = _cache(root, "good", [[int(v) for v in (np.arange(30) * 3 + k) % 37 + 2] for k in range(40)])
    junk = _cache(root, "junk", [rng.integers(2, 40, size=30).tolist() for _ in range(40)])
    stages = (
        MixtureStage(0, {"good": 1.0}),
        MixtureStage(JUNK_START, {"junk": 1.0}),
        MixtureStage(JUNK_START + JUNK_STEPS, {"good": 1.0}),
    )
    config = TrainConfig(
        model=LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1),
        data=MixtureConfig(
            caches={"good": good, "junk": junk}, stages=stages, seq_len=16, batch_schedule=BatchSchedule.constant(4)
        ),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=4, decay_steps=24, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=4, every_minutes=None),
        ema=None,
    )
    run_training(config, str(root / "plain"))
    run_training(_with_rewind(config, STEPS), str(root / "rewound"))
    return config, root


def _with_rewind(config: TrainConfig, num_steps: int) -> TrainConfig:
    return TrainConfig(**{**config.__dict__, "rewind": WATCH, "num_steps": num_steps})


def _records(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_rewinding_past_a_junk_window_ends_with_lower_loss(runs) -> None:
    _, root = runs
    plain, rewound = _records(root / "plain"), _records(root / "rewound")
    events = json.loads((root / "rewound" / "rewinds.json").read_text())["rewinds"]
    assert len(events) == 1
    event = events[0]
    assert (
        event["spike_step"] == JUNK_START
        and event["detected_at"] == JUNK_START + WATCH.delay
        and event["to_step"] < JUNK_START
    )
    skip_start, skip_end = event["skipped_data_steps"]
    assert skip_start == event["to_step"] and skip_end >= JUNK_START + JUNK_STEPS  # the whole junk window is skipped
    assert [r["step"] for r in rewound] == list(range(STEPS))
    assert not any(JUNK_START <= r["data_step"] < JUNK_START + JUNK_STEPS for r in rewound)
    assert (
        rewound[event["to_step"]]["rewind/skip_end"] == skip_end and rewound[event["to_step"]]["data_step"] == skip_end
    )
    assert (
        max(r["loss"] for r in rewound) < max(r["loss"] for r in plain) - 1.0
    )  # the junk spike is gone from the kept history
    final_plain, final_rewound = np.mean([r["loss"] for r in plain[-5:]]), np.mean([r["loss"] for r in rewound[-5:]])
    assert final_rewound < 0.6 * final_plain, (final_rewound, final_plain)
    assert [step for step, _ in list_checkpoints(root / "rewound" / "checkpoints")][-1] == STEPS


def _kill_when(command: list[str], ready: object) -> None:
    """Start `command`, SIGKILL it as soon as `ready()` holds, and check it was still running then."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while process.poll() is None and not ready() and time.monotonic() < deadline:
        time.sleep(0.002)
    assert process.poll() is None, "the run ended before the kill point; move the point earlier"
    process.send_signal(signal.SIGKILL)
    finish(process, timeout=60)


@pytest.mark.slow
def test_a_run_killed_inside_the_detour_and_after_the_rewind_resumes_bit_exactly(runs) -> None:
    config, root = runs
    (root / "rewind.yaml").write_text(dump_config(_with_rewind(config, STEPS)))
    killed = root / "killed"
    command = [
        sys.executable,
        "-m",
        "tootsie.cli.main",
        "train",
        "--config",
        str(root / "rewind.yaml"),
        "--out",
        str(killed),
    ]
    metrics = killed / "metrics.jsonl"
    _kill_when(
        command, lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= JUNK_START + 4
    )  # inside the junk window, before the plateau is final
    _kill_when(command, lambda: (killed / "rewinds.json").exists())  # the moment the rewind is on record
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert [(r["step"], r["loss"]) for r in _records(killed)] == [
        (r["step"], r["loss"]) for r in _records(root / "rewound")
    ]
    assert json.loads((killed / "rewinds.json").read_text()) == json.loads(
        (root / "rewound" / "rewinds.json").read_text()
    )
