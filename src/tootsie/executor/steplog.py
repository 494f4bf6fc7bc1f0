"""The per-step log `.executor.log`: everything logged while a step runs, plus its traceback if it fails.

While a step runs, a FileHandler on the root logger copies every log record
(the step's own, its libraries', the executor's) into the step's output
directory, appending across attempts so an earlier failure stays readable next
to the retry. The traceback of a failure goes only to this file, so the
terminal gets one line naming the step and the log instead of a stack dump.
"""

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

LOG_FILE = ".executor.log"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def capture_logs(directory: str | os.PathLike[str]) -> Iterator[logging.Handler]:
    """Attach a FileHandler for `directory`/.executor.log to the root logger (at INFO or below) for the block."""
    handler = logging.FileHandler(Path(directory) / LOG_FILE, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    if root.getEffectiveLevel() > logging.INFO:
        root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()


def log_current_exception(handler: logging.Handler, step_name: str) -> None:
    """Write the exception being handled, with its traceback, to `handler` only."""
    record = logging.LogRecord(
        name="tootsie.executor",
        level=logging.ERROR,
        pathname=__file__,
        lineno=0,
        msg="step %s failed",
        args=(step_name,),
        exc_info=sys.exc_info(),
    )
    handler.handle(record)
