"""Deterministic fault injection: kill this process at a named point, to test that checkpoints survive crashes.

`TOOTSIE_FAULT=checkpoint:<point>:<step>` makes the process SIGKILL itself
(no cleanup, no flushing, as a preempted host or an OOM kill would) when the
checkpoint code reaches `<point>` for the checkpoint of `<step>`. The points:

- `mid-tensor`: some of the checkpoint's arrays are written, others not;
- `before-commit`: every array is written, the commit marker (`state.json`) is not;
- `after-commit`: the marker is written, nothing after it has run (pruning, training);
- `restore`: a restore of that step has read part of its arrays.

Example: `TOOTSIE_FAULT=checkpoint:before-commit:4 tootsie train ...` dies
with every array of step 4 on disk and no `state.json`; the rerun must resume
from the checkpoint before it and end bit-identical to a run never killed.
Unset (the default), every point is a no-op costing one dictionary lookup.
"""

import os
import signal

from tootsie.errors import TootsieError

FAULT_ENV = "TOOTSIE_FAULT"
CHECKPOINT_POINTS = ("mid-tensor", "before-commit", "after-commit", "restore")


def _requested() -> tuple[str, int] | None:
    """(point, step) of a checkpoint fault asked for in the environment, or None."""
    value = os.environ.get(FAULT_ENV)
    if not value:
        return None
    parts = value.split(":")
    if len(parts) != 3 or parts[0] != "checkpoint" or parts[1] not in CHECKPOINT_POINTS or not parts[2].isdigit():
        raise TootsieError(
            f"{FAULT_ENV}={value!r} is not checkpoint:<point>:<step> with a point in {CHECKPOINT_POINTS}; "
            f"for example {FAULT_ENV}=checkpoint:before-commit:4, or unset it"
        )
    return parts[1], int(parts[2])


def checkpoint_fault(point: str, step: int) -> None:
    """SIGKILL this process if the environment asks for a fault at `point` of the checkpoint of `step`."""
    if _requested() == (point, step):
        os.kill(os.getpid(), signal.SIGKILL)
