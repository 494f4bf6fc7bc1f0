"""Live progress of a long job (training steps, datakit shards): a rich line on a terminal, plain lines in logs.

Every long-running loop reports through one `ProgressLine`: `update(done,
fields)` after each unit of work, `close()` at the end. Where it goes depends
on the process's progress mode, `$TOOTSIE_PROGRESS` (an environment variable,
so executor steps run as Ray tasks or subprocesses inherit it):

- `auto` (unset): `rich` when stderr is a terminal, else `plain`;
- `rich`: one line updated in place (label, bar, done/total, fields, ETA);
- `plain`: a timestamped line at the first update, then whenever
  `PLAIN_INTERVAL_SECONDS` have passed since the last one, and at the end;
- `off`: nothing (`--quiet`).

Progress goes to stderr, never stdout, so a command's `--json` last line is
untouched. It lives in the executor layer because it knows no ML: the datakit
engine (shards) and the monitor's training tracker (steps) both use it.

Example (plain, 400 steps, 1 step/s after a slow first one)::

    12:00:05 train: step 1/400 (0%) loss 10.812 1,234 tok/s
    12:00:25 train: step 21/400 (5%) loss 6.031 12,345 tok/s eta 6m19s
"""

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TextIO

from tootsie.errors import TootsieError

if TYPE_CHECKING:  # rich is imported only when a terminal line is drawn
    from rich.console import Console
    from rich.progress import Progress

PROGRESS_ENV = "TOOTSIE_PROGRESS"
MODES = ("auto", "rich", "plain", "off")
PLAIN_INTERVAL_SECONDS = 20.0
"""A plain line every 20 s keeps lines under 30 s apart (issue 20) while updates come at least every 10 s."""


def progress_mode(stream: TextIO | None = None) -> str:
    """The resolved mode of this process: `rich`, `plain` or `off` ($TOOTSIE_PROGRESS, `auto` by `stream`'s TTY)."""
    mode = os.environ.get(PROGRESS_ENV, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise TootsieError(f"${PROGRESS_ENV}={mode!r} is not one of {MODES}; unset it or pick one of those")
    if mode != "auto":
        return mode
    target = sys.stderr if stream is None else stream
    return "rich" if target.isatty() else "plain"


@contextlib.contextmanager
def progress_setting(mode: str | None) -> Iterator[None]:
    """Set $TOOTSIE_PROGRESS to `mode` for the block (None: leave it), restoring the previous value after."""
    if mode is None:
        yield
        return
    if mode not in MODES:
        raise TootsieError(f"progress mode {mode!r} is not one of {MODES}")
    previous = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = mode
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = previous


def format_duration(seconds: float) -> str:
    """A short duration for an ETA: `45s`, `2m10s`, `1h05m`."""
    whole = max(0, math.ceil(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def progress_text(unit: str, done: int, total: int, fields: Sequence[str], eta: float | None) -> str:
    """`step 120/400 (30%) loss 3.412 12,345 tok/s eta 2m10s`: the line without label or timestamp."""
    percent = f" ({100 * done // total}%)" if total > 0 else ""
    parts = [f"{unit} {done}/{total}{percent}", *fields]
    if eta is not None:
        parts.append(f"eta {format_duration(eta)}")
    return " ".join(parts)


class ProgressLine:
    """Progress of one job of `total` units: rich on a terminal, plain timestamped lines otherwise, or nothing.

    `clock` (monotonic seconds) and `wallclock` (Unix seconds, for the
    timestamp) are injectable so the plain rhythm is testable without sleeping.
    The ETA comes from the rate since the first update, so a slow first unit
    (a JIT compile) does not inflate it.
    """

    def __init__(
        self,
        label: str,
        total: int,
        unit: str,
        *,
        mode: str | None = None,
        stream: TextIO | None = None,
        console: "Console | None" = None,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        interval: float = PLAIN_INTERVAL_SECONDS,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.mode = progress_mode(self.stream) if mode is None else mode
        self.clock, self.wallclock, self.interval = clock, wallclock, interval
        self._first: tuple[float, int] | None = None
        self._printed_at: float | None = None
        self._pending: str | None = None
        self._bar = self._start_rich(console) if self.mode == "rich" else None

    def _start_rich(self, console: "Console | None") -> "Progress | None":
        """A started rich Progress with one task; None (plain lines instead) if another live display is active."""
        from rich.console import Console
        from rich.errors import LiveError
        from rich.progress import BarColumn, Progress, TextColumn

        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[text]}"),
            console=console if console is not None else Console(file=self.stream),
            redirect_stdout=False,  # stdout carries the command's output (and --json's last line)
            redirect_stderr=False,
        )
        self._task = bar.add_task(self.label, total=self.total, text="")
        try:
            bar.start()
        except LiveError:  # a display is already live in this process (a nested job): fall back to plain lines
            self.mode = "plain"
            return None
        return bar

    def restart(self, done: int) -> None:
        """The job goes back to `done` units (a resume or a rewind): the rate and ETA are measured afresh from there."""
        self._first = None
        if self._bar is not None:
            self._bar.update(self._task, completed=done)

    def update(self, done: int, fields: Sequence[str] = ()) -> None:
        """`done` of `total` units are finished; `fields` are extra figures for the line (`loss 3.412`)."""
        if self.mode == "off":
            return
        now = self.clock()
        if self._first is None:
            self._first = (now, done)
        start_time, start_done = self._first
        rate = (done - start_done) / (now - start_time) if done > start_done and now > start_time else None
        eta = (self.total - done) / rate if rate else None
        text = progress_text(self.unit, done, self.total, fields, eta if done < self.total else None)
        if self._bar is not None:
            self._bar.update(self._task, completed=done, text=text)
            return
        self._pending = text
        due = self._printed_at is None or now - self._printed_at >= self.interval or done >= self.total
        if due:
            self._print_pending(now)

    def _print_pending(self, now: float) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.wallclock()))
        print(f"{stamp} {self.label}: {self._pending}", file=self.stream, flush=True)
        self._printed_at, self._pending = now, None

    def close(self) -> None:
        """Finish: the rich line stays on screen; a plain line not yet printed (the last state) is printed."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self._pending is not None:
            self._print_pending(self.clock())
