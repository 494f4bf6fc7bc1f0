"""Move a step's output aside before it reruns from a clean directory: nothing already written is lost.

Steps resume from what their directory holds, so a damaged output (a recorded
file missing or resized, `plan.inspect`) cannot be rerun in place: the trainer
would resume from the broken checkpoint. The runner, holding the step's lease,
moves every file but the lease files to a sibling directory named for why and
when, and then runs the step in the emptied directory. A step downstream of a
damaged one is moved aside the same way ("stale"), since its input is remade.

Example: `move_aside("/out/demo/tokenize-3f2a9c01b2d4", "damaged")` at 18:20:05 UTC
moves `cache/tokens.npy`, ..., then `.executor_info.json`, `.executor.log`,
`.executor_status.json` and last `.executor_manifest.json` into
`/out/demo/tokenize-3f2a9c01b2d4.damaged-20261127T182005Z/` and returns that path.
The name ends in the stamp, not a hash, so nothing mistakes it for a step's output.
"""

import os
import re
import time
from collections.abc import Callable

from tootsie import storage
from tootsie.executor.lease import LEASE_FILE, MUTEX_FILE
from tootsie.executor.manifest import MANIFEST_FILE
from tootsie.executor.metadata import INFO_FILE
from tootsie.executor.status import STATUS_FILE
from tootsie.executor.steplog import LOG_FILE

ASIDE_NAME = re.compile(r"\.(damaged|stale)-\d{8}T\d{6}Z(-\d+)?$")
"""The end of a moved-aside directory's name: not a step's output, and not a run to show or read."""
KEPT = frozenset({LEASE_FILE, MUTEX_FILE})
"""Stay in place: the lease the mover holds."""
MOVED_LAST = (INFO_FILE, LOG_FILE, STATUS_FILE, MANIFEST_FILE)
"""Moved after the output files, in this order: until the status file goes, a half-moved directory is still
SUCCESS with a manifest, so it reads as DAMAGED (and the next run moves the rest); after, it holds no output."""


def move_aside(directory: str, kind: str) -> str | None:
    """Move everything in `directory` but its lease files to `<directory>.<kind>-<UTC time>`; None if it held nothing.

    The caller holds the step's lease, which stays where it is. Files move one
    at a time (a rename locally; a copy, then a delete, in an object store), so
    an interruption leaves every file in one of the two places.
    """
    target = f"{directory}.{kind}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    if storage.is_remote(directory):
        names = _in_order(storage.list_tree(directory))
        if not names:
            return None
        target = _unused(target, lambda path: bool(storage.list_tree(path)))
        fs, root = storage.filesystem(directory)
        _, destination = storage.filesystem(target)
        for name in names:
            fs.copy(f"{root.rstrip('/')}/{name}", f"{destination.rstrip('/')}/{name}")
            fs.rm_file(f"{root.rstrip('/')}/{name}")
        return target
    names = _in_order(os.listdir(directory)) if os.path.isdir(directory) else []
    if not names:
        return None
    target = _unused(target, os.path.exists)
    os.makedirs(target)
    for name in names:
        os.rename(os.path.join(directory, name), os.path.join(target, name))
    return target


def _in_order(names: list[str]) -> list[str]:
    """The "/"-separated `names` to move, output files first and `MOVED_LAST` in its order; the lease files left out."""

    def rank(name: str) -> tuple[int, str]:
        top = name.split("/", 1)[0]
        return (MOVED_LAST.index(top) + 1 if top in MOVED_LAST else 0, name)

    return sorted((name for name in names if name.split("/", 1)[0] not in KEPT), key=rank)


def _unused(path: str, exists: Callable[[str], bool]) -> str:
    """`path`, or `path-2`, `path-3`, ...: the first that does not exist yet."""
    candidate, count = path, 1
    while exists(candidate):
        count += 1
        candidate = f"{path}-{count}"
    return candidate
