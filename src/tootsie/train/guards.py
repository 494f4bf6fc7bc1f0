"""Callbacks that watch the loss and act on it: stop a diverging run, rewind past a loss plateau.

`NonFiniteGuard` stops the run once `stability.max_nonfinite_steps` steps had a
NaN/inf loss or gradient (counted here and by the skip-bad-steps transform,
whichever is larger). With `config.divergence` set, `DivergenceGuard` replaces
it: a run that diverges (`tootsie.train.divergence` defines it) writes
`diverged.json` and stops with `Diverged`, which `run_training` turns into a
normal end, so a sweep records the run as infeasible instead of failing. Both
stop before the checkpointer runs after the step, so no diverged state is
saved. `PlateauRewinder` carries out `config.rewind`
(`tootsie.train.rewind` explains the policy): after each step it feeds the
loss to the plateau watch, and when a spike becomes a final plateau it reloads
the newest checkpoint before the spike, records the skipped data window and
hands the loop the older state through `Run.rewind`.
"""

import logging

import numpy as np

from tootsie.errors import TootsieError
from tootsie.jsonfile import write_json_atomic
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.train.callbacks import Callback, Record, Run
from tootsie.train.divergence import DIVERGED_FILE, Diverged, DivergenceConfig, DivergenceWatch
from tootsie.train.loading import checkpoint_root
from tootsie.train.rewind import PlateauWatch, record_rewind, rewind_event, rewind_target
from tootsie.train.sharding import barrier, is_main_process
from tootsie.train.state import initial_state

logger = logging.getLogger(__name__)


class NonFiniteGuard(Callback):
    """Raise once `config.stability.max_nonfinite_steps` steps had a non-finite loss or gradient."""

    order = 60

    def __init__(self) -> None:
        self.nonfinite = 0

    def after_step(self, run: Run, step: int, record: Record) -> None:
        limit = run.config.stability.max_nonfinite_steps
        self.nonfinite += not np.isfinite(record["loss"])
        if max(self.nonfinite, int(record.get("skip/nonfinite_steps", 0))) >= limit:
            raise TootsieError(
                f"{limit} steps up to step {step} had a NaN/inf "
                "loss or gradient: the run is diverging; resume from an earlier checkpoint with a "
                "lower learning rate or tighter max_grad_norm, and inspect those steps' batches"
            )


def _logged_records(run: Run) -> list[dict[str, object]]:
    """The logged records of this run (for the plateau and divergence watches), read back as a resume would."""
    return read_metrics(run.output / METRICS_FILE).records


class DivergenceGuard(Callback):
    """Carry out `config.divergence`: on divergence write `diverged.json` and stop the run with `Diverged`."""

    order = 60

    def __init__(self, config: DivergenceConfig) -> None:
        self.config = config

    def start(self, run: Run) -> None:
        self._watch(run)

    def rewind(self, run: Run, event: dict[str, object]) -> None:
        self._watch(run)

    def _watch(self, run: Run) -> None:
        """Watch from the records logged before the current step, so a resume or rewind decides as a straight run."""
        logged = _logged_records(run) if (run.output / METRICS_FILE).exists() else []
        before = [record for record in logged if int(record.get("step", -1)) < run.state.step]
        self.watch = DivergenceWatch(self.config, before)

    def after_step(self, run: Run, step: int, record: Record) -> None:
        diverged = self.watch.observe(step, record)
        if diverged is None:
            return
        if is_main_process():
            write_json_atomic(run.output / DIVERGED_FILE, diverged)
        barrier(f"diverged-{step}")
        logger.warning(
            "the run diverged after step %d: %s; wrote %s and stopped (no checkpoint of this state)",
            step,
            diverged["reason"],
            run.output / DIVERGED_FILE,
        )
        raise Diverged(diverged)


class PlateauRewinder(Callback):
    """Carry out `config.rewind`: go back to the newest checkpoint before a plateau, skipping its data."""

    order = 70

    def start(self, run: Run) -> None:
        self.watch = PlateauWatch(run.config.rewind, _logged_records(run))

    def after_step(self, run: Run, step: int, record: Record) -> None:
        spike = self.watch.observe(step, record["loss"])
        if spike is not None:
            self._rewind(run, spike, step)

    def rewind(self, run: Run, event: dict[str, object]) -> None:
        self.watch = PlateauWatch(run.config.rewind, _logged_records(run))

    def _rewind(self, run: Run, spike: dict[str, object], step: int) -> None:
        """Go back to the newest checkpoint before the plateau spike found at `step`, or log why it cannot."""
        if len(run.events) >= run.config.rewind.max_rewinds:
            logger.warning(
                "loss plateau from step %d (found at step %d), but the "
                "run already rewound max_rewinds=%d times; training on",
                spike["step"],
                step,
                run.config.rewind.max_rewinds,
            )
            return
        run.wait_for_checkpoint()
        checkpoints = checkpoint_root(run.output, run.final_output)
        target = rewind_target(checkpoints, int(spike["step"]))
        if target is None:
            logger.warning(
                "loss plateau from step %d (found at step %d), but no checkpoint precedes it; training on "
                "(checkpoints.every_steps should be well below the spike horizon)",
                spike["step"],
                step,
            )
            return
        event = rewind_event(spike, step, target, run.skips)
        if is_main_process():
            record_rewind(run.output, checkpoints, run.events, event)
        barrier(f"rewind-{step}")
        start, end = event["skipped_data_steps"]
        logger.warning(
            "loss plateau from step %d (%.4g above %.4g), final at step %d: "
            "rewound to the checkpoint at step %d, skipping data steps [%d, %d)",
            spike["step"],
            spike["height"],
            spike["baseline"],
            step,
            target,
            start,
            end,
        )
        run.rewind(initial_state(run.config, run.optimizer, run.output, run.layout, run.final_output), event)
