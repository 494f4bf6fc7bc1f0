"""The per-step log `.executor.log`: everything logged while a step runs, plus its traceback if it fails.

While a step runs, a FileHandler on the root logger copies every log record
(the step's own, its libraries', the executor's) into the step's output
directory, appending across attempts so an earlier failure stays readable next
to the retry. The traceback of a failure goes only to this file, so the
terminal gets one line naming the step and the log instead of a stack dump.

An object store cannot append, so for an output directory there the lines go
to a local temporary file while the block runs and are appended to the
remote log (by rewriting it) when the block ends; only the holder of the
step's lease writes it, so nothing else rewrites it meanwhile.
"""

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tootsie import storage

LOG_FILE = ".executor.log"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def capture_logs(directory: str | os.PathLike[str]) -> Iterator[logging.Handler]:
    """Copy the root logger's records (INFO or below) for the block into `directory`/.executor.log, local or remote."""
    if not storage.is_remote(directory):
        with _attached(Path(directory) / LOG_FILE) as handler:
            yield handler
        return
    fd, local = tempfile.mkstemp(prefix="tootsie-step-", suffix=".log")
    os.close(fd)
    try:
        with _attached(Path(local)) as handler:
            yield handler
    finally:
        remote = storage.join(os.fspath(directory), LOG_FILE)
        try:
            storage.append_bytes(remote, Path(local).read_bytes())
        except OSError as error:
            logger.warning("could not append to the step log %s (%s); its lines are kept in %s", remote, error, local)
        else:
            os.unlink(local)


@contextlib.contextmanager
def _attached(path: Path) -> Iterator[logging.Handler]:
    """A FileHandler appending to `path`, attached to the root logger (at INFO or below) for the block."""
    handler = logging.FileHandler(path, encoding="utf-8")
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
