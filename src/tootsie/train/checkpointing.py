"""The checkpointer callback: permanent checkpoints every N steps, temporary ones every M minutes, and preemption.

Policy (`config.checkpoints`): after step s, a permanent checkpoint when
`s + 1` is a multiple of `every_steps` (kept forever), else a temporary one
when `every_minutes` passed since the last save (process 0's clock, agreed by
every process: `callbacks.Timer`) or `s + 1` is a multiple of
`temporary_every_steps` (only the newest temporary one is kept), and a
permanent one at the end. While training runs, SIGTERM is turned into a
request (`train.preemption.StopSignal`): after the step in flight, the
checkpointer writes a temporary checkpoint unless that step was just
checkpointed, waits for it to commit and raises `errors.Preempted`, so
rerunning the same command resumes to the bit.

Example: `every_steps=100`, `every_minutes=30`, SIGTERM during step 141 of 300:
step-100 is permanent, step-142 is written as temporary and the run exits with
code 75; its rerun resumes at 142 and writes step-200 (pruning step-142 once
that commits) and step-300 at the end.
"""

from tootsie.errors import Preempted
from tootsie.train.callbacks import Callback, Record, Run, Timer
from tootsie.train.checkpoint import wait_for_checkpoints
from tootsie.train.preemption import StopSignal


class Checkpointer(Callback):
    """Write the run's checkpoints as `config.checkpoints` says, and stop cleanly on SIGTERM."""

    order = 80

    def start(self, run: Run) -> None:
        minutes = run.config.checkpoints.every_minutes
        self.timer = Timer(60 * minutes) if minutes is not None else None
        self.stop = StopSignal()
        self.stop.install()

    def after_step(self, run: Run, step: int, record: Record) -> None:
        done, last = run.state.step, run.config.num_steps
        if done >= last:
            return  # `end` writes the final checkpoint
        saved = None
        if done % run.config.checkpoints.every_steps == 0:
            saved = run.save("permanent")
        elif self._temporary_due(run, done):
            saved = run.save("temporary")
        if saved is not None and self.timer is not None:
            self.timer.reset()
        if self.stop.requested():
            saved = saved or run.save("temporary")
            run.wait_for_checkpoint()
            raise Preempted(done, str(saved))

    def _temporary_due(self, run: Run, done: int) -> bool:
        """Whether `temporary_every_steps` or the `every_minutes` timer asks for a temporary checkpoint now."""
        every = run.config.checkpoints.temporary_every_steps
        return (every is not None and done % every == 0) or (self.timer is not None and self.timer.due())

    def end(self, run: Run) -> None:
        run.save("permanent")
        run.wait_for_checkpoint()

    def close(self, run: Run) -> None:
        wait_for_checkpoints()
        self.stop.restore()
