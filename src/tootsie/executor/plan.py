"""Decide what a run does with each step, and why, from the files in its output directory.

`decide` is shared by the runner and the dry run, so a plan says exactly what a
run would do:

| on disk                                  | action | reason                                              |
| ---------------------------------------- | ------ | --------------------------------------------------- |
| SUCCESS (not forced)                     | skip   | skip: SUCCESS at 2025-01-01 12:00:00 UTC            |
| a live lease (another process runs it)   | wait   | wait: running in pid 12 on host a                   |
| SUCCESS, a recorded file missing/resized | run    | run: damaged: cache/tokens.npy: 10 bytes, recorded 4096 |
| SUCCESS, an input is remade this run     | run    | run: input remade: demo/tokenize                    |
| SUCCESS, name matches --force            | run    | run: forced by --force                              |
| RUNNING with a stale or missing lease    | run    | run: interrupted (owner pid 12 on host a is gone)   |
| FAILED / DEP_FAILED                      | run    | run: previous attempt FAILED                        |
| nothing                                  | run    | run: no output yet                                  |

A forced step counts as done only if its SUCCESS was written after this run
began (by a concurrent run that was forced too), so two forced runs on one
prefix still run it once.

Damage: a SUCCESS step is checked against its manifest (`manifest.damage`: a
listing, no hashing; `digests=True` re-hashes too) and reported DAMAGED when
a recorded file is missing or has another size. A run reruns it from a clean
directory (`fresh`: the runner moves the old output aside first, since steps
resume from what their directory holds), and every step downstream of it
reruns clean too, because its input is remade: with `demo/tokenize` damaged,
`demo/train` (which reads it) and `demo/eval` (which reads `demo/train`) are
"run: input remade: ..." while an unrelated `demo/raw/prose` is skipped. Such
a downstream step counts as done if its SUCCESS was written after this run
began, as a forced one does, so two runs on one prefix still rerun it once.
"""

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from tootsie.errors import TootsieError
from tootsie.executor.graph import Graph, Node
from tootsie.executor.lease import LeaseSettings
from tootsie.executor.manifest import MANIFEST_FILE, damage, digest_damage, read_manifest
from tootsie.executor.metadata import recorded
from tootsie.executor.report import ManifestSummary, RunReport, StepReport
from tootsie.executor.status import Observed, Status, observe, summarize

NO_MANIFEST = "no manifest (finished before manifests were recorded)"


@dataclasses.dataclass(frozen=True)
class Decision:
    """What to do with one step and the reason shown for it."""

    action: Literal["skip", "run", "wait"]
    """skip: done; run: run it now; wait: another live process is running it."""
    reason: str
    """Human-readable reason, starting with the action."""
    remakes: bool = False
    """Its output is remade from a clean directory (it is damaged, or an input is remade), by this run or by the
    process it waits on: its readers rerun too."""
    damage: tuple[str, ...] = ()
    """The damaged files, one line each, when that is why it runs."""

    @property
    def fresh(self) -> bool:
        """Run from a clean directory: move what it holds aside first."""
        return self.remakes and self.action == "run"


def inspect(directory: str, settings: LeaseSettings, *, now: float | None = None, digests: bool = False) -> Observed:
    """`observe`, plus a SUCCESS step's manifest and the damage to its recorded files (re-hashed when `digests`)."""
    observed = observe(directory, settings, now=now)
    if not observed.succeeded:
        return observed
    try:
        manifest = read_manifest(directory)
    except TootsieError:
        return dataclasses.replace(observed, damage=(f"{MANIFEST_FILE}: unreadable",))
    if manifest is None:
        return observed
    check = digest_damage if digests else damage
    return dataclasses.replace(observed, manifest=manifest, damage=tuple(check(directory, manifest)))


def decide(observed: Observed, *, forced: bool, since: float, remade: Sequence[str] = ()) -> Decision:
    """The action for a step given its files; a forced step, or one with `remade` inputs, ignores older SUCCESS.

    `remade` names the step's direct inputs that this run reruns from a clean directory.
    """
    record = observed.record
    renewed = forced or bool(remade)
    if observed.succeeded and not observed.damage and not (renewed and record is not None and record.timestamp < since):
        return Decision("skip", f"skip: SUCCESS at {record.display_time}")
    damaged = observed.succeeded and bool(observed.damage)
    if observed.lease_live and observed.lease is not None:
        holder = f"pid {observed.lease.pid} on host {observed.lease.host}"
        return Decision("wait", f"wait: running in {holder}", remakes=damaged or bool(remade))
    if damaged:
        return Decision("run", f"run: damaged: {summarize(observed.damage)}", remakes=True, damage=observed.damage)
    if remade and record is not None:
        return Decision("run", f"run: input remade: {', '.join(remade)}", remakes=True)
    if observed.succeeded:
        return Decision("run", "run: forced by --force")
    if observed.interrupted is not None:
        return Decision("run", f"run: interrupted ({observed.interrupted})")
    if record is None:
        return Decision("run", "run: no output yet")
    return Decision("run", f"run: previous attempt {record.status}")


def decisions(
    graph: Graph, *, forced: Callable[[str], bool], settings: LeaseSettings, since: float, digests: bool = False
) -> Iterator[tuple[Node, Observed, Decision]]:
    """Every step, inputs first, with its files and what a run starting at `since` would do with it."""
    remade: set[str] = set()
    for node in graph.nodes:
        observed = inspect(node.output_path, settings, now=since, digests=digests)
        decision = decide(observed, forced=forced(node.step.name), since=since, remade=graph.input_names(node, remade))
        if decision.remakes:
            remade.add(node.id)
        yield node, observed, decision


def found(observed: Observed) -> dict[str, Any]:
    """The report fields a step's directory gives: status, a note, damage and the manifest's digest and size."""
    detail = observed.detail
    if detail is None and observed.succeeded and observed.manifest is None:
        detail = NO_MANIFEST
    return {
        "status": observed.status,
        "detail": detail,
        "damage": observed.damage,
        "manifest": ManifestSummary.of(observed.manifest),
    }


def plan(graph: Graph, *, forced: Callable[[str], bool], settings: LeaseSettings, digests: bool = False) -> RunReport:
    """A dry-run report: each step's current status and what a run would do, reading files only.

    `digests` re-hashes every finished step's files instead of only listing them (`--check-digests`).
    """
    pending: set[str] = set()
    reports = []
    for node, observed, decision in decisions(
        graph, forced=forced, settings=settings, since=time.time(), digests=digests
    ):
        reason = decision.reason
        if decision.action != "skip":
            before = graph.input_names(node, pending)
            if decision.action == "run" and before:
                reason = f"run after: {', '.join(before)} ({reason.removeprefix('run: ')})"
            pending.add(node.id)
        last = recorded(node.output_path)
        fields = found(observed)
        if decision.fresh and not observed.damage:  # SUCCESS, or a partial output, made from an input a run remakes
            fields["detail"] = f"a run reruns it ({decision.reason.removeprefix('run: ')})"
        reports.append(
            StepReport(
                name=node.step.name,
                hash=node.hash,
                output_path=node.output_path,
                reason=reason,
                seconds=last.seconds,
                error=last.error if observed.status is Status.FAILED else None,
                **fields,
            )
        )
    return RunReport(prefix=graph.prefix, steps=tuple(reports), dry_run=True)
