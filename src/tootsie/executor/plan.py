"""Decide what a run does with each step, and why, from the files in its output directory.

`decide` is shared by the runner and the dry run, so a plan says exactly what a
run would do:

| on disk                                  | action | reason                                              |
| ---------------------------------------- | ------ | --------------------------------------------------- |
| SUCCESS (not forced)                     | skip   | skip: SUCCESS at 2025-01-01 12:00:00 UTC            |
| a live lease (another process runs it)   | wait   | wait: running in pid 12 on host a                   |
| SUCCESS, name matches --force            | run    | run: forced by --force                              |
| RUNNING with a stale or missing lease    | run    | run: interrupted (owner pid 12 on host a is gone)   |
| FAILED / DEP_FAILED                      | run    | run: previous attempt FAILED                        |
| nothing                                  | run    | run: no output yet                                  |

A forced step counts as done only if its SUCCESS was written after this run
began (by a concurrent run that was forced too), so two forced runs on one
prefix still run it once.
"""

import dataclasses
import time
from collections.abc import Callable
from typing import Literal

from tootsie.executor.graph import Graph
from tootsie.executor.lease import LeaseSettings
from tootsie.executor.metadata import recorded
from tootsie.executor.report import RunReport, StepReport
from tootsie.executor.status import Observed, Status, observe


@dataclasses.dataclass(frozen=True)
class Decision:
    """What to do with one step and the reason shown for it."""

    action: Literal["skip", "run", "wait"]
    """skip: done; run: run it now; wait: another live process is running it."""
    reason: str
    """Human-readable reason, starting with the action."""


def decide(observed: Observed, *, forced: bool, since: float) -> Decision:
    """The action for a step given its files; a forced step ignores SUCCESS written before `since`."""
    record = observed.record
    succeeded = record is not None and record.status is Status.SUCCESS
    if succeeded and not (forced and record.timestamp < since):
        return Decision("skip", f"skip: SUCCESS at {record.display_time}")
    if observed.lease_live and observed.lease is not None:
        return Decision("wait", f"wait: running in pid {observed.lease.pid} on host {observed.lease.host}")
    if succeeded:
        return Decision("run", "run: forced by --force")
    if observed.interrupted is not None:
        return Decision("run", f"run: interrupted ({observed.interrupted})")
    if record is None:
        return Decision("run", "run: no output yet")
    return Decision("run", f"run: previous attempt {record.status}")


def plan(graph: Graph, *, forced: Callable[[str], bool], settings: LeaseSettings) -> RunReport:
    """A dry-run report: each step's current status and what a run would do, reading files only."""
    now = time.time()
    pending: set[str] = set()
    reports = []
    for node in graph.nodes:
        observed = observe(node.output_path, settings, now=now)
        decision = decide(observed, forced=forced(node.step.name), since=now)
        reason = decision.reason
        if decision.action != "skip":
            before = [graph.by_id[dep].step.name for dep in node.dependencies if dep in pending]
            if decision.action == "run" and before:
                reason = f"run after: {', '.join(before)} ({reason.removeprefix('run: ')})"
            pending.add(node.id)
        last = recorded(node.output_path)
        reports.append(
            StepReport(
                name=node.step.name,
                hash=node.hash,
                status=observed.status,
                output_path=node.output_path,
                reason=reason,
                seconds=last.seconds,
                detail=observed.detail,
                error=last.error if observed.status is Status.FAILED else None,
            )
        )
    return RunReport(prefix=graph.prefix, steps=tuple(reports), dry_run=True)
