"""Deterministic fault injection: kill this process at a named point, to test that runs survive crashes.

`TOOTSIE_FAULT=checkpoint:<point>:<step>` makes the process SIGKILL itself
(no cleanup, no flushing, as a preempted host or an OOM kill would) when the
checkpoint code reaches `<point>` for the checkpoint of `<step>`. The points:

- `mid-tensor`: some of the checkpoint's arrays are written, others not;
- `before-commit`: every array is written, the commit marker (`state.json`) is not;
- `after-commit`: the marker is written, nothing after it has run (pruning, training);
- `restore`: a restore of that step has read part of its arrays.

`TOOTSIE_FAULT=rl:<point>:<iteration>` does the same in an RL run's rollout
buffer (`tootsie.rl.buffer`):

- `mid-rollout`: the iteration's completions are sampled and scored, its shard is not written;
- `mid-update`: the shard is written and read back, the update on it has not run.

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
RL_POINTS = ("mid-rollout", "mid-update")
POINTS = {"checkpoint": CHECKPOINT_POINTS, "rl": RL_POINTS}
"""Fault points by the code that reaches them."""


def _requested() -> tuple[str, str, int] | None:
    """(code, point, number) of a fault asked for in the environment, or None."""
    value = os.environ.get(FAULT_ENV)
    if not value:
        return None
    parts = value.split(":")
    if len(parts) != 3 or parts[1] not in POINTS.get(parts[0], ()) or not parts[2].isdigit():
        raise TootsieError(
            f"{FAULT_ENV}={value!r} is not checkpoint:<point>:<step> with a point in {CHECKPOINT_POINTS} "
            f"or rl:<point>:<iteration> with a point in {RL_POINTS}; "
            f"for example {FAULT_ENV}=checkpoint:before-commit:4, or unset it"
        )
    return parts[0], parts[1], int(parts[2])


def checkpoint_fault(point: str, step: int) -> None:
    """SIGKILL this process if the environment asks for a fault at `point` of the checkpoint of `step`."""
    if _requested() == ("checkpoint", point, step):
        os.kill(os.getpid(), signal.SIGKILL)


def rl_fault(point: str, iteration: int) -> None:
    """SIGKILL this process if the environment asks for a fault at `point` of RL iteration `iteration`."""
    if _requested() == ("rl", point, iteration):
        os.kill(os.getpid(), signal.SIGKILL)
