"""The progress line: plain timestamped lines on a 20 s rhythm (an injected clock), a rich line on a terminal, off."""

import io
import os
import re

import pytest
from rich.console import Console

from tootsie.errors import TootsieError
from tootsie.executor.progress import (
    PLAIN_INTERVAL_SECONDS,
    PROGRESS_ENV,
    ProgressLine,
    format_duration,
    progress_mode,
    progress_setting,
    progress_text,
)


class FakeClock:
    """Monotonic seconds that only move when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_text_has_step_total_percent_fields_and_eta() -> None:
    text = progress_text("step", 120, 400, ("loss 3.412", "12,345 tok/s"), eta=130.0)
    assert text == "step 120/400 (30%) loss 3.412 12,345 tok/s eta 2m10s"
    assert progress_text("shard", 3, 3, (), eta=None) == "shard 3/3 (100%)"


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (44.2, "45s"), (130, "2m10s"), (3900, "1h05m")])
def test_durations_are_short(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_plain_lines_come_first_then_every_interval_and_at_the_end() -> None:
    clock, stream = FakeClock(), io.StringIO()
    line = ProgressLine("train", 100, "step", mode="plain", stream=stream, clock=clock, wallclock=lambda: 0.0)
    printed_at = []
    for step in range(1, 101):
        clock.now += 10.0 if step == 1 else 1.5  # a slow first step (the compile), then 1.5 s a step
        before = stream.getvalue().count("\n")
        line.update(step, (f"loss {10 - step / 20:.3f}",))
        if stream.getvalue().count("\n") > before:
            printed_at.append(clock.now)
    line.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(printed_at)
    gaps = [b - a for a, b in zip(printed_at, printed_at[1:])]
    assert max(gaps[:-1]) <= PLAIN_INTERVAL_SECONDS + 1.5 and min(gaps[:-1]) >= PLAIN_INTERVAL_SECONDS
    assert re.fullmatch(r"\d\d:\d\d:\d\d train: step 1/100 \(1%\) loss 9\.950", lines[0])
    # After 14 steps at 1.5 s, 85 are left: 127.5 s.
    assert lines[1].endswith("train: step 15/100 (15%) loss 9.250 eta 2m08s")
    assert lines[-1].endswith("train: step 100/100 (100%) loss 5.000")


def test_close_prints_the_last_state_when_the_job_stops_early() -> None:
    clock, stream = FakeClock(), io.StringIO()
    line = ProgressLine("shards", 10, "shard", mode="plain", stream=stream, clock=clock)
    for done in (1, 2, 3):
        clock.now += 1.0
        line.update(done)
    line.close()
    assert [text.split(" ", 1)[1] for text in stream.getvalue().splitlines()] == [
        "shards: shard 1/10 (10%)",
        "shards: shard 3/10 (30%) eta 7s",
    ]


def test_rich_mode_draws_the_line_on_a_terminal() -> None:
    console = Console(force_terminal=True, file=io.StringIO(), width=120)
    clock = FakeClock()
    line = ProgressLine("train run", 4, "step", mode="rich", console=console, clock=clock)
    for step in range(1, 5):
        clock.now += 2.0
        line.update(step, ("loss 3.000", "1,000 tok/s"))
    line.close()
    drawn = console.file.getvalue()
    assert "\x1b[" in drawn  # terminal control codes: drawn in place, not printed as log lines
    assert "train run" in drawn and "step 4/4 (100%) loss 3.000 1,000 tok/s" in drawn


def test_off_prints_nothing_and_the_environment_chooses_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    stream = io.StringIO()
    assert progress_mode(stream) == "plain"  # auto: not a terminal
    with progress_setting("off"):
        assert os.environ[PROGRESS_ENV] == "off"
        line = ProgressLine("train", 3, "step", stream=stream)
        for step in (1, 2, 3):
            line.update(step)
        line.close()
    assert PROGRESS_ENV not in os.environ  # restored
    assert stream.getvalue() == ""
    monkeypatch.setenv(PROGRESS_ENV, "loud")
    with pytest.raises(TootsieError, match="TOOTSIE_PROGRESS='loud' is not one of"):
        progress_mode(stream)
