"""Preemption: SIGTERM makes a run finish its step, commit a checkpoint and exit with code 75 ("rerun to resume").

Design. Spot VMs and schedulers (Kubernetes, Slurm's `scancel`, a cloud's
preemption notice) send SIGTERM and, after a grace period, SIGKILL. While
`train_loop` runs, `StopSignal` replaces SIGTERM's handler with one that only
records the request; after every finished step the checkpointer callback
(`train.checkpointing.Checkpointer`) asks `requested()`,
writes a temporary checkpoint (unless that step was just checkpointed), waits
until it is committed, and raises `tootsie.errors.Preempted`, which the CLI
turns into exit code `PREEMPTED_EXIT_CODE` (75, EX_TEMPFAIL). Because
`batch(step)` is stateless, rerunning the same command resumes to the bit.
On several processes `requested()` is true everywhere when any process was
signalled (an all-gather every step), so every process stops after the same
step and takes part in the same checkpoint.

SIGINT (Ctrl-C) is left alone: a person at a terminal wants the run to stop
now, and it does (KeyboardInterrupt, exit 130), losing only the steps since
the newest checkpoint. A second SIGTERM changes nothing; SIGKILL stops at once.
The previous handlers come back when training ends. Handlers can only be set
from the main thread; elsewhere (a training thread) SIGTERM keeps its handler.

Example: `tootsie train --config c.yaml --out run` is at step 41 when the VM
gets SIGTERM; step 41 finishes, `run/checkpoints/step-42` is committed, the
command prints `tootsie: preempted: stopped after step 42 ...` and exits 75;
running it again continues from step 42.
"""

import logging
import signal
import threading
from types import FrameType
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

logger = logging.getLogger(__name__)
STOP_SIGNALS = (signal.SIGTERM,)
"""The signals that ask a training run to checkpoint and stop."""


def any_process(flag: bool) -> bool:
    """True on every process when `flag` is true on any one (no-op on one process); all must call it together."""
    if jax.process_count() == 1:
        return flag
    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag))))


class StopSignal:
    """Between `install` and `restore`, `STOP_SIGNALS` set a flag instead of ending the process."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Route `STOP_SIGNALS` to this object, keeping the previous handlers (main thread only, else a no-op)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}
        else:
            logger.info("training outside the main thread: SIGTERM is not turned into a checkpoint and stop")

    def restore(self) -> None:
        """Put back the handlers `install` replaced."""
        for number, previous in self._previous.items():
            signal.signal(number, signal.SIG_DFL if previous is None else previous)
        self._previous = {}

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.received is None:
            logger.warning(
                "received %s: finishing this step, writing a checkpoint, then exiting (rerun to resume)",
                signal.Signals(number).name,
            )
        self.received = number

    def requested(self) -> bool:
        """Whether any process was signalled to stop; every process must ask after the same step."""
        return any_process(self.received is not None)
