"""User-facing errors: one line that says what failed and how to fix it.

The CLI prints a `TootsieError` as `tootsie: <message>` and exits non-zero
without a traceback; any other exception is a bug and keeps its traceback.
A `Preempted` run (SIGTERM while training, its checkpoint committed) exits
with `PREEMPTED_EXIT_CODE`.
"""


class TootsieError(Exception):
    """An error caused by the user's input (a file, a flag, a config), not by tootsie."""


PREEMPTED_EXIT_CODE = 75
"""Exit code of a run stopped by SIGTERM after its state was saved: EX_TEMPFAIL of sysexits.h, "rerun to resume"."""


class Preempted(BaseException):
    """The run was asked to stop (SIGTERM), committed a checkpoint at `step` and stopped; the same command resumes it.

    A BaseException, like KeyboardInterrupt: it passes every `except Exception`,
    so the executor records the step FAILED and ends the run instead of going
    on to other steps, and the CLI exits with `PREEMPTED_EXIT_CODE`.
    """

    def __init__(self, step: int, checkpoint: str) -> None:
        super().__init__(step, checkpoint)
        self.step, self.checkpoint = step, checkpoint

    def __str__(self) -> str:
        return (
            f"preempted: stopped after step {self.step} with a checkpoint at {self.checkpoint}; "
            "rerun the same command to resume"
        )
