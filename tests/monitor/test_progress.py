"""Training progress is a tracker: `open_trackers` adds it when progress is on, and it draws step / total and loss."""

from pathlib import Path

import pytest

from tootsie.executor.progress import PROGRESS_ENV
from tootsie.monitor.progress import ProgressTracker, training_fields, training_note
from tootsie.monitor.trackers import open_trackers


def test_training_fields_show_loss_and_tokens_per_second() -> None:
    assert training_fields({"loss": 3.41234, "tokens_per_s": 12345.6, "lr": 0.1}) == ("loss 3.412", "12,346 tok/s")
    rl = training_fields({"loss": 0.0, "rl/reward_mean": 0.3125, "tokens_per_s": 900.0})
    assert rl == ("loss 0.000", "reward 0.312", "900 tok/s")
    assert training_fields({"loss": float("nan"), "tokens_per_s": None}) == ("loss nan",)


def test_open_trackers_draws_progress_and_a_rewind_goes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "plain")
    trackers = open_trackers(tmp_path / "run", (), {"num_steps": 3}, start_step=0)
    assert any(isinstance(t, ProgressTracker) for t in trackers.trackers)
    trackers.log({"loss": 3.0, "tokens_per_s": 100.0}, 0)
    trackers.log({"loss": 2.0, "tokens_per_s": 100.0}, 1)
    trackers.rewind(1)
    trackers.log({"loss": 2.5, "tokens_per_s": 100.0}, 1)
    trackers.log({"loss": 1.5, "tokens_per_s": 100.0}, 2)
    trackers.close()
    out, err = capsys.readouterr()
    assert out == ""  # progress never touches stdout (a command's --json last line)
    lines = [line.split(" ", 1)[1] for line in err.splitlines()]
    assert lines == [
        "train run: step 1/3 (33%) loss 3.000 100 tok/s",
        "train run: step 3/3 (100%) loss 1.500 100 tok/s",
    ]


def test_no_progress_tracker_when_off_or_without_a_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for mode, run_config in (("off", {"num_steps": 3}), ("plain", {})):
        monkeypatch.setenv(PROGRESS_ENV, mode)
        trackers = open_trackers(tmp_path / mode, (), run_config, start_step=0)
        trackers.close()
        assert [type(t).__name__ for t in trackers.trackers] == ["JsonlTracker"]


def test_training_note_reads_where_a_run_is_from_its_files(tmp_path: Path) -> None:
    assert training_note(tmp_path) is None
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 0, "loss": 4.0}\n{"step": 119, "loss": 3.41234, "tokens_per_s": 12345.0}\n', encoding="utf-8"
    )
    assert training_note(tmp_path) == "step 120 loss 3.412 12,345 tok/s"
    (tmp_path / "config.json").write_text('{"num_steps": 400}', encoding="utf-8")
    assert training_note(tmp_path) == "step 120/400 (30%) loss 3.412 12,345 tok/s"
