"""Callbacks that describe the run: the record's derived fields, the trackers, the profiler window.

`RecordFields` completes each step's record with what the host knows (LR and
schedule phase, tokens so far, throughput, MFU, and after a rewind the
`rewind/*` fields of its first step); `TrackerLog` writes the record to the
JSONL log, the configured trackers and the progress line (process 0 only) and
rewinds them with the run; `ProfileWindow` traces the steps
`config.profile_steps` for Perfetto under `<run>/profile/`.
"""

import logging

import jax

from tootsie.configfile import to_plain
from tootsie.monitor.throughput import mfu
from tootsie.monitor.trackers import Trackers, open_trackers
from tootsie.train.callbacks import Callback, Record, Run
from tootsie.train.rewind import rewind_fields
from tootsie.train.sharding import is_main_process

logger = logging.getLogger(__name__)
PROFILE_DIR = "profile"


class RecordFields(Callback):
    """LR, phase, tokens, throughput and MFU of every step; the `rewind/*` fields of a rewind's first step."""

    order = 10

    def start(self, run: Run) -> None:
        self.schedule = run.config.schedule.build()
        self.flops_per_token = run.config.model.flops_per_token(run.config.data.seq_len)
        self.device_kind = jax.devices()[0].device_kind
        events = run.events
        self.pending = (
            rewind_fields(events[-1], len(events)) if events and events[-1]["to_step"] == run.state.step else {}
        )

    def after_step(self, run: Run, step: int, record: Record) -> None:
        tokens_per_s = record["batch_size"] * run.config.data.seq_len / record["step_seconds"]
        record.update(
            self.pending,
            lr=float(self.schedule.learning_rate(step)),
            phase=self.schedule.phase(step),
            tokens=run.config.tokens_before(step + 1, run.skips),
            tokens_per_s=tokens_per_s,
            mfu=mfu(self.flops_per_token, tokens_per_s, self.device_kind, jax.device_count()),
        )
        self.pending = {}

    def rewind(self, run: Run, event: dict[str, object]) -> None:
        self.pending = rewind_fields(event, len(run.events))


class TrackerLog(Callback):
    """Write every record to the JSONL log, the configured trackers and the progress line (process 0)."""

    order = 40

    def start(self, run: Run) -> None:
        config = run.config
        main = is_main_process()
        self.trackers = open_trackers(run.output, config.trackers, to_plain(config), run.state.step) if main else None
        self.trackers = self.trackers or Trackers(())

    def after_step(self, run: Run, step: int, record: Record) -> None:
        self.trackers.log(record, step)

    def rewind(self, run: Run, event: dict[str, object]) -> None:
        self.trackers.rewind(run.state.step)

    def close(self, run: Run) -> None:
        self.trackers.close()


class ProfileWindow(Callback):
    """A JAX profiler trace of the steps [a, b) of `config.profile_steps`, written in a form Perfetto opens.

    The trace starts before the first step of the window this process trains
    and stops after the window's last step (or when training fails inside it).
    """

    order = 90

    def __init__(self, steps: tuple[int, int]) -> None:
        self.steps = steps
        self.active = self.done = False

    def start(self, run: Run) -> None:
        self.directory = run.output / PROFILE_DIR
        self._begin(run.state.step)

    def after_step(self, run: Run, step: int, record: Record) -> None:
        self._finish(step)
        self._begin(run.state.step)

    def rewind(self, run: Run, event: dict[str, object]) -> None:
        self._finish(int(event["detected_at"]))
        self._begin(run.state.step)

    def close(self, run: Run) -> None:
        self._stop()

    def _begin(self, step: int) -> None:
        """Start tracing if `step`, the next to train, is inside the window (once per process)."""
        if not (self.active or self.done) and self.steps[0] <= step < self.steps[1]:
            jax.profiler.start_trace(str(self.directory), create_perfetto_trace=True)
            self.active = True

    def _finish(self, step: int) -> None:
        """Stop once `step`, just trained, is the window's last."""
        if self.active and step + 1 >= self.steps[1]:
            self._stop()

    def _stop(self) -> None:
        if self.active:
            jax.profiler.stop_trace()
            self.active, self.done = False, True
            logger.info("profiler trace of steps %s written under %s", self.steps, self.directory)
