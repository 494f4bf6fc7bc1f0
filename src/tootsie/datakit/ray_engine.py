"""The Ray backend of `map_shards`: every attempt at a shard is one Ray task, under the local backend's rules.

`map_shards` keeps the rules: it decides which shards are pending, counts the
attempts, retries or gives up (a `TootsieError` is bad input and never
retried), writes each shard's done marker last and enforces the failure budget.
This module only runs attempts: it submits every pending shard at once (Ray
runs as many as the cluster has CPUs, one CPU each) and hands each outcome to
`record`, resubmitting when `record` asks for a retry; when `record` raises
(a shard found a missing dependency), the attempts still in flight are
cancelled. `map_shards` checks the `ray` extra before it imports this module.

Ray's own retries are off (`max_retries=0`), so every attempt is counted once,
by `record`, as the process pool counts it: a shard that raises hands back its
own exception (unwrapped from Ray's `RayTaskError`, so the error text is the
local one), and a worker that dies mid-shard (SIGKILL, out of memory, a lost
node) counts as one failed attempt, `RuntimeError("Ray worker died ...")`.
Shard functions write their outputs atomically, so a retry after a crash
writes the same bytes; like the executor's backend this assumes that the
driver and the workers share a filesystem.
"""

from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from tootsie.datakit.engine import ShardTask
from tootsie.executor.ray_backend import connect
from tootsie.executor.report import describe_error

SHARD_CPUS = 1


@ray.remote
def _remote_shard(fn: Callable[[ShardTask, Any], dict[str, Any]], task: ShardTask, config: Any) -> dict[str, Any]:
    return fn(task, config)


def run_on_ray(
    fn: Callable[[ShardTask, Any], dict[str, Any]],
    config: Any,
    pending: Sequence[ShardTask],
    record: Callable[[ShardTask, Any], bool],
    *,
    address: str | None,
) -> None:
    """Run every pending shard as Ray tasks, passing each outcome to `record` and resubmitting when it says retry."""
    started_here = connect(address)
    try:
        fn_ref, config_ref = ray.put(fn), ray.put(config)
        options = {"num_cpus": SHARD_CPUS, "max_retries": 0}

        def submit(task: ShardTask) -> ray.ObjectRef:
            return _remote_shard.options(**options).remote(fn_ref, task, config_ref)

        in_flight = {submit(task): task for task in pending}
        try:
            while in_flight:
                done, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in done:
                    task = in_flight.pop(ref)
                    if record(task, _outcome(ref)):
                        in_flight[submit(task)] = task
        finally:
            for ref in in_flight:  # only on an error or Ctrl-C in this process
                ray.cancel(ref, force=True)
    finally:
        if started_here:
            ray.shutdown()


def _outcome(ref: ray.ObjectRef) -> dict[str, Any] | BaseException:
    """A finished attempt's stats, the exception its shard raised, or a RuntimeError when its worker died."""
    try:
        return ray.get(ref)
    except RayTaskError as error:
        return error.cause if isinstance(error.cause, Exception) else RuntimeError(describe_error(error))
    except RayError as error:
        return RuntimeError(f"Ray worker died ({describe_error(error)})")
