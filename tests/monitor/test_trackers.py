"""Trackers: JSONL always, TensorBoard and W&B (offline) as extras; what each writes is read back."""

import json
import math
import struct
import sys
import time
from pathlib import Path

import pytest

from tootsie.errors import TootsieError
from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.trackers import (
    TRACKERS,
    TensorBoardConfig,
    WandbConfig,
    numeric_fields,
    open_trackers,
    text_fields,
)

LOADS = [[0.5, 0.25, 0.125, 0.125], [0.25, 0.25, 0.25, 0.25]]
"""An MoE run's `moe/expert_load`: 2 layers × 4 experts."""
RECORDS = [
    {"loss": 3.0, "phase": "warmup", "layer_update_norms": [0.1, 0.2], "mfu": None, "skip/skipped": 0.0},
    {"loss": 2.5, "phase": "warmup", "layer_update_norms": [0.3, 0.4], "mfu": None, "skip/skipped": 1.0},
    {"loss": 2.0, "phase": "stable", "layer_update_norms": [0.5, 0.6], "mfu": None, "moe/expert_load": LOADS},
]


def _written_losses(kind: str, directory: Path) -> list[tuple[int, float]]:
    """(step, loss) in the order a tracker wrote them, read back from its own files; a rewind's purge is (step, -1)."""
    if kind == "wandb":
        (run_file,) = (directory / "wandb").glob("offline-run-*/run-*.wandb")
        return [(row["step"], row["loss"]) for row in _flushed_history(run_file, len(WRITTEN_LOSSES["wandb"]))]
    written = []
    for events in map(_tfrecords, sorted((directory / "tensorboard").iterdir())):
        written += [(e.step, -1.0) for e in events if e.HasField("session_log")]
        written += [(e.step, v.simple_value) for e in events for v in e.summary.value if v.tag == "loss"]
    return written


WRITTEN_LOSSES = {
    # W&B keeps every row (charts key on the logged `step`, so the re-run step 1 overlays the abandoned one);
    # NaN stays NaN.
    "wandb": [(0, 3.0), (1, "nan"), (2, 2.0), (1, 2.5)],
    # TensorBoard leaves NaN as a gap; the rewind opens a second file whose START at step 1 purges the old step 1.
    "tensorboard": [(0, 3.0), (2, 2.0), (1, -1.0), (1, 2.5)],
}


@pytest.mark.parametrize("kind", sorted(TRACKERS))
def test_every_tracker_logs_rewinds_and_closes(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip({"wandb": "wandb", "tensorboard": "tensorboardX"}[kind])
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    trackers = open_trackers(tmp_path, (TRACKERS[kind](),), {"seed": 0}, start_step=0)
    for step, record in enumerate(RECORDS):
        trackers.log({**record, "loss": float("nan") if step == 1 else record["loss"]}, step)
    trackers.rewind(1)
    trackers.log(RECORDS[1], 1)
    trackers.close()
    assert [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "metrics.jsonl").records] == [(0, 3.0), (1, 2.5)]
    written = [(step, "nan" if math.isnan(loss) else loss) for step, loss in _written_losses(kind, tmp_path)]
    assert written == WRITTEN_LOSSES[kind]


def test_records_split_into_chartable_numbers_and_text() -> None:
    record = {"loss": 2.0, "ok": True, "phase": "decay", "norms": [1.0, 2.5], "mfu": None, "tokens": 64}
    assert numeric_fields(record) == {"loss": 2.0, "ok": 1.0, "norms/0": 1.0, "norms/1": 2.5, "tokens": 64.0}
    assert text_fields(record) == {"phase": "decay"}


def test_a_layers_by_experts_list_becomes_each_layers_busiest_and_idlest_share() -> None:
    damaged = [[0.7, float("nan"), 0.3], [], "x", [0.5, 0.5, None]]
    assert numeric_fields({"moe/expert_load": LOADS + damaged}) == {
        "moe/expert_load/0/max": 0.5,
        "moe/expert_load/0/min": 0.125,
        "moe/expert_load/1/max": 0.25,
        "moe/expert_load/1/min": 0.25,
        "moe/expert_load/2/max": 0.7,  # the NaN is left out, not the row
        "moe/expert_load/2/min": 0.3,
        "moe/expert_load/5/max": 0.5,
        "moe/expert_load/5/min": 0.5,
    }


def test_jsonl_is_always_on_and_a_rewind_drops_the_superseded_records(tmp_path: Path) -> None:
    trackers = open_trackers(tmp_path, (), {}, start_step=0)
    for step, record in enumerate(RECORDS):
        trackers.log(record, step)
    trackers.rewind(1)
    trackers.log({"loss": 9.0}, 1)
    trackers.close()
    assert [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "metrics.jsonl").records] == [(0, 3.0), (1, 9.0)]


def _tfrecords(path: Path) -> list[object]:
    """Events of one TensorBoard file (TFRecord framing: length, its CRC, payload, payload CRC)."""
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
    data, position, events = path.read_bytes(), 0, []
    while position < len(data):
        (length,) = struct.unpack("<Q", data[position : position + 8])
        event = event_pb2.Event()
        event.ParseFromString(data[position + 12 : position + 12 + length])
        events.append(event)
        position += 16 + length
    return events


def test_tensorboard_writes_scalars_phase_changes_and_a_purge_on_rewind(tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX")
    trackers = open_trackers(tmp_path, (TensorBoardConfig(),), {}, start_step=0)
    for step, record in enumerate(RECORDS):
        trackers.log(record, step)
    trackers.rewind(2)
    trackers.log({"loss": 1.5, "phase": "stable"}, 2)
    trackers.close()
    files = sorted((tmp_path / "tensorboard").iterdir())
    assert len(files) == 2  # one per writer, in name order = opening order
    first, second = (_tfrecords(f) for f in files)
    scalars = {
        (v.tag, e.step): v.simple_value
        for e in first
        for v in e.summary.value
        if not v.metadata.plugin_data.plugin_name
    }
    assert (
        scalars[("loss", 1)] == 2.5
        and scalars[("layer_update_norms/1", 2)] == pytest.approx(0.6)
        and scalars[("skip/skipped", 1)] == 1.0
        and scalars[("moe/expert_load/0/max", 2)] == 0.5
        and scalars[("moe/expert_load/0/min", 2)] == 0.125
    )
    assert not any(tag == "mfu" for tag, _ in scalars)
    texts = [
        (e.step, v.tensor.string_val[0].decode())
        for e in first
        for v in e.summary.value
        if v.metadata.plugin_data.plugin_name == "text"
    ]
    assert texts == [(0, "warmup"), (2, "stable")]  # written when the phase changes
    assert [(e.step, e.session_log.status) for e in second if e.HasField("session_log")] == [
        (2, 1)
    ]  # START at 2: TensorBoard drops events >= 2
    assert [(v.tag, e.step, v.simple_value) for e in second for v in e.summary.value if v.tag == "loss"] == [
        ("loss", 2, 1.5)
    ]


def _flushed_history(run_file: Path, rows: int) -> list[dict[str, object]]:
    """The history rows holding a loss, once `rows` of them are in the file (at most 30 s).

    wandb-core, a separate process, may still be writing the offline file when
    `finish()` returns: on the loaded 2-core machine the history was once empty.
    """
    deadline = time.monotonic() + 30
    while True:
        found = [row for row in _wandb_history(run_file) if "loss" in row]
        if len(found) >= rows or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _wandb_history(run_file: Path) -> list[dict[str, object]]:
    """History rows of an offline `.wandb` file (LevelDB log framing: 7-byte header, 32 KiB blocks)."""
    internal = pytest.importorskip("wandb.proto.wandb_internal_pb2")
    data, position, pending, rows = run_file.read_bytes(), 7, b"", []
    while position + 7 <= len(data):
        left = 32768 - position % 32768
        if left < 7:
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # FULL or LAST fragment
            record = internal.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                rows.append(
                    {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                )
    return rows


def test_wandb_offline_run_holds_the_logged_history_and_resumes_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    config = WandbConfig(project="tootsie-test", mode="offline", tags=("toy",))
    trackers = open_trackers(tmp_path, (config,), {"num_steps": 3}, start_step=0)
    for step, record in enumerate(RECORDS):
        trackers.log(record, step)
    trackers.close()
    run_id = json.loads((tmp_path / "wandb.json").read_text())["id"]
    (run_file,) = (tmp_path / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    rows = _flushed_history(run_file, 3)
    assert [(r["step"], r["loss"], r["phase"]) for r in rows] == [
        (0, 3.0, "warmup"),
        (1, 2.5, "warmup"),
        (2, 2.0, "stable"),
    ]
    assert rows[2]["layer_update_norms/1"] == 0.6 and "mfu" not in rows[0]
    assert rows[2]["moe/expert_load/1/min"] == 0.25 and "moe/expert_load/0/max" not in rows[0]
    reopened = open_trackers(tmp_path, (config,), {"num_steps": 3}, start_step=2)
    reopened.close()
    # The resume continued the same run id (wandb names a second directory in the same second `...-<id>-1`).
    run_files = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(run_files) == 2 and all(file.name == f"run-{run_id}.wandb" for file in run_files)


def test_a_missing_extra_names_the_pip_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # makes `import tensorboardX` raise ImportError
    with pytest.raises(TootsieError, match=r'pip install "tootsie\[tensorboard\]"'):
        open_trackers(tmp_path, (TensorBoardConfig(),), {}, start_step=0)
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(TootsieError, match=r'pip install "tootsie\[wandb\]"'):
        open_trackers(tmp_path, (WandbConfig(),), {}, start_step=0)


def test_wandb_config_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        WandbConfig(mode="cloud")
