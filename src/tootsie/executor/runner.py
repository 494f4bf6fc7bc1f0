"""Run an experiment's steps in dependency order, each at most once across processes.

For each step, inputs first: skip it if its status is SUCCESS; otherwise take
its lease (waiting while a live process holds it, then skipping if that process
finished it), write RUNNING and the metadata file, call `fn(resolved_config,
output_path)` with the step's log captured, and write the metadata and then
SUCCESS last. If `fn` raises, the step is FAILED with the traceback in its log,
every step that still had to run and reads it (directly or not) is DEP_FAILED,
and the steps that do not depend on it still run. Outputs are never deleted:
a rerun calls `fn` on the same directory, and steps resume themselves.

Except from damage: a SUCCESS step whose recorded files are missing or resized
(`plan.inspect`, against its manifest) is not skipped. Holding its lease, the
runner logs the damaged files, moves the old output aside (`aside`: to
`<dir>.damaged-<UTC time>`, nothing lost) and runs the step in the emptied
directory; every step downstream of it is moved aside (`<dir>.stale-<time>`)
and rerun the same way, since its input is remade. `RunContext.remade` holds
those steps for the run.

Two backends share that bookkeeping through `RunContext`: "local" (here) runs
the steps one at a time in this process; "ray" (`ray_backend`) keeps the
bookkeeping in this process and runs each step's `fn` as a Ray task, starting
a step as soon as its inputs are done.

The prefix may be a URL in object storage (`s3://bucket/runs`): the status,
lease, metadata, log and run-record files then live there (`storage`,
`remote_lease`), and each step function still writes a local directory that
is uploaded before SUCCESS is written (`staging`).
"""

import dataclasses
import logging
import os
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.executor.aside import move_aside
from tootsie.executor.graph import Graph, Node, build_graph
from tootsie.executor.hashing import hash_json
from tootsie.executor.lease import Heartbeat, Lease, LeaseSettings
from tootsie.executor.manifest import read_manifest
from tootsie.executor.metadata import Environment, recorded, write_info
from tootsie.executor.plan import Decision, decide, decisions, found, inspect, plan
from tootsie.executor.remote_lease import open_lease
from tootsie.executor.report import ManifestSummary, RunReport, StepReport, describe_error
from tootsie.executor.staging import call_step, prepare_call
from tootsie.executor.status import Observed, Status, summarize, write_status
from tootsie.executor.step import Step
from tootsie.executor.steplog import capture_logs
from tootsie.extras import require

BACKENDS = ("local", "ray")
POLL_SECONDS = 0.25
RECORD_DIR = "experiments"

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Attempt:
    """A step this run is running: why, since when, and what it found before."""

    reason: str
    """Why it runs (the plan's reason)."""
    started: float
    """When its RUNNING status was written."""
    damage: tuple[str, ...] = ()
    """The damaged files that made it rerun, one line each."""
    moved_to: str | None = None
    """Where its earlier output was moved before it ran."""


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What every step of one run shares; both backends decide, start and finish steps through it."""

    graph: Graph
    """Every step of the experiment, inputs first."""
    forced: Callable[[str], bool]
    """Whether a step name matches --force."""
    since: float
    """When the run began (a forced step counts as done only if it succeeded after this)."""
    settings: LeaseSettings
    """Lease lifetime and heartbeat interval."""
    environment: Environment
    """Code and machine facts stamped into every metadata file."""
    check_digests: bool = False
    """Re-hash every finished step's files when deciding (`--check-digests`), not only list them."""
    remade: set[str] = dataclasses.field(default_factory=set)
    """Ids of the steps found damaged or downstream of one: each reruns clean, and so do its readers."""

    def report(
        self, node: Node, status: Status, reason: str, seconds: float | None = None, **fields: Any
    ) -> StepReport:
        """The report of `node`; `fields` are further StepReport fields (error, detail, damage, ...)."""
        return StepReport(node.step.name, node.hash, status, node.output_path, reason, seconds=seconds, **fields)

    def decide(self, node: Node, *, holding: bool = False) -> tuple[Observed, Decision]:
        """What `node`'s files say and what to do with it; `holding`: this run holds its lease, so ignore it."""
        observed = inspect(node.output_path, self.settings, digests=self.check_digests)
        if holding:
            observed = dataclasses.replace(observed, lease=None, lease_live=False)
        remade = self.graph.input_names(node, self.remade)
        decision = decide(observed, forced=self.forced(node.step.name), since=self.since, remade=remade)
        if decision.remakes:
            self.remade.add(node.id)
        return observed, decision

    def skipped(self, node: Node, observed: Observed, reason: str) -> StepReport:
        """The report of a step found done."""
        logger.info("step %s: %s", node.step.name, reason)
        return self.report(node, reason=reason, seconds=recorded(node.output_path).seconds, **found(observed))

    def settle(self, node: Node, failed: Collection[str]) -> StepReport | Decision:
        """The report of a step that will not run (SUCCESS: skipped; DEP_FAILED: an input failed), else why it runs."""
        name, directory = node.step.name, node.output_path
        observed, decision = self.decide(node)
        if decision.action == "skip":
            return self.skipped(node, observed, decision.reason)
        failed_inputs = self.graph.input_names(node, failed)
        storage.makedirs(directory)
        if not failed_inputs:
            return decision
        reason = f"not run: input failed: {', '.join(failed_inputs)}"
        logger.error("step %s: %s", name, reason)
        if decision.fresh:  # its output must not be resumed from later, when the input has been remade
            return self.dep_failed_clean(node, reason)
        write_status(directory, Status.DEP_FAILED)
        return self.report(node, Status.DEP_FAILED, reason)

    def dep_failed_clean(self, node: Node, reason: str) -> StepReport:
        """DEP_FAILED for a step that had to rerun clean: move its output aside under its lease, then write it.

        If another live process holds the lease, that process owns the step and nothing is written.
        """
        lease = open_lease(node.output_path, self.settings)
        if not lease.acquire():
            return self.report(node, Status.DEP_FAILED, reason, detail=f"left to {holder_of(lease)}")
        try:
            with Heartbeat(lease, self.settings.heartbeat_seconds, node.step.name):
                _, decision = self.decide(node, holding=True)
                moved = self.set_aside(node, decision) if decision.fresh else None
                write_status(node.output_path, Status.DEP_FAILED)
        finally:
            lease.release()
        return self.report(node, Status.DEP_FAILED, reason, damage=decision.damage, moved_to=moved)

    def claim(self, node: Node, lease: Lease, waited_on: str | None = None) -> StepReport | Decision:
        """With `lease` just taken: what to run if the step must run, else release it and report who finished it.

        `waited_on` names the process this run waited for before taking the lease; the report says so.
        """
        observed, decision = self.decide(node, holding=True)
        if decision.action != "skip":
            return decision
        lease.release()
        reason = decision.reason if waited_on is None else f"{decision.reason} (waited while {waited_on} ran it)"
        return self.skipped(node, observed, reason)

    def set_aside(self, node: Node, decision: Decision) -> str | None:
        """Move the step's output aside (this run holds its lease) and say where; None if there was nothing."""
        name, directory = node.step.name, node.output_path
        moved = move_aside(directory, "damaged" if decision.damage else "stale")
        if decision.damage:
            log_to_step(directory, logging.WARNING, "step %s: damaged: %s", name, "; ".join(decision.damage))
        if moved is not None:
            why = "damaged" if decision.damage else decision.reason.removeprefix("run: ")
            log_to_step(directory, logging.WARNING, "step %s: %s; moved its output to %s", name, why, moved)
        return moved

    def begin(self, node: Node, reason: str, decision: Decision) -> Attempt:
        """Move a damaged or stale output aside, then write RUNNING and the metadata file of a step about to run."""
        moved = self.set_aside(node, decision) if decision.fresh else None
        started = time.time()
        write_status(node.output_path, Status.RUNNING)
        write_info(node, self.environment, status=Status.RUNNING, started=started)
        log_to_step(node.output_path, logging.INFO, "step %s: %s -> %s", node.step.name, reason, node.output_path)
        return Attempt(reason, started, decision.damage, moved)

    def finish(self, node: Node, attempt: Attempt, error: str | None) -> StepReport:
        """Write the metadata and then the final status (SUCCESS last) of a step that ran; return its report."""
        ended = time.time()
        name, directory, started = node.step.name, node.output_path, attempt.started
        status = Status.SUCCESS if error is None else Status.FAILED
        if error is None:
            log_to_step(directory, logging.INFO, "step %s: SUCCESS in %.1f s", name, ended - started)
        else:
            log_to_step(directory, logging.ERROR, "step %s: FAILED after %.1f s: %s", name, ended - started, error)
        write_info(node, self.environment, status=status, started=started, ended=ended, error=error)
        write_status(directory, status)
        manifest = read_manifest(directory) if error is None else None
        detail = None if attempt.moved_to is None else f"earlier output moved to {attempt.moved_to}"
        if detail is not None and attempt.damage:
            detail = f"damaged: {summarize(attempt.damage)}; {detail}"
        return self.report(
            node,
            status,
            attempt.reason,
            ended - started,
            error=error,
            detail=detail,
            damage=attempt.damage,
            manifest=ManifestSummary.of(manifest),
            moved_to=attempt.moved_to,
        )


def run_experiment(
    steps: Sequence[Step[Any]],
    prefix: str | os.PathLike[str],
    *,
    force: str | None = None,
    dry_run: bool = False,
    experiment_path: str | os.PathLike[str] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    check_digests: bool = False,
) -> RunReport:
    """Run `steps` and every step they reference, with outputs under `prefix` (a directory or a URL like s3://b/runs).

    `force` is a regex; steps whose name matches (`re.search`) rerun even if
    SUCCESS. A dry run reads the output directories and reports what a run
    would do, writing nothing. `experiment_path` is recorded in the metadata
    and names the run record `<prefix>/experiments/<stem>-<hash>.json`.
    `backend` "local" runs steps one at a time in this process; "ray" runs them
    as Ray tasks (independent steps at once) on the cluster at `ray_address`
    (None: $RAY_ADDRESS, else a new local Ray); see `ray_backend`.
    `check_digests` re-hashes every finished step's files when deciding, so a
    changed file of the same size counts as damage too.
    """
    if backend not in BACKENDS:
        raise TootsieError(
            f"backend {backend!r} is not one of {', '.join(BACKENDS)}; use --backend local or --backend ray"
        )
    if ray_address is not None and backend != "ray":
        raise TootsieError(
            f"a Ray address ({ray_address!r}) needs backend 'ray'; add --backend ray or drop --ray-address"
        )
    pattern = _compile_force(force)
    settings = LeaseSettings.from_env()
    graph = build_graph(steps, prefix)

    def forced(name: str) -> bool:
        return pattern is not None and pattern.search(name) is not None

    if dry_run:
        return plan(graph, forced=forced, settings=settings, digests=check_digests)
    require_step_extras(graph, forced=forced, settings=settings)
    ensure_writable(graph.prefix)
    environment = Environment.collect(experiment_path)
    context = RunContext(graph, forced, time.time(), settings, environment, check_digests)
    if backend == "ray":
        from tootsie.executor.ray_backend import run_on_ray  # Ray is an optional extra

        reports = run_on_ray(context, address=ray_address)
    else:
        reports = _run_local(context)
    record = write_run_record(graph, reports, experiment_path)
    return RunReport(prefix=graph.prefix, steps=tuple(reports), record_path=record)


def experiment_status(
    steps: Sequence[Step[Any]], prefix: str | os.PathLike[str], *, check_digests: bool = False
) -> RunReport:
    """The reported status of every step (SUCCESS/DAMAGED/RUNNING/FAILED/DEP_FAILED/NOT_STARTED), reading files only.

    A finished step's recorded files are listed (`check_digests`: re-hashed too) to tell SUCCESS from DAMAGED.
    """
    graph = build_graph(steps, prefix)
    return plan(graph, forced=lambda name: False, settings=LeaseSettings.from_env(), digests=check_digests)


def require_step_extras(graph: Graph, *, forced: Callable[[str], bool], settings: LeaseSettings) -> None:
    """Before anything runs or any directory is made: fail in one line if a step that would run lacks an extra."""
    if not any(node.step.required_extras for node in graph.nodes):
        return
    for node, _, decision in decisions(graph, forced=forced, settings=settings, since=time.time()):
        if node.step.required_extras and decision.action != "skip":
            require(node.step.required_extras, purpose=f"step {node.step.name}")


def _compile_force(force: str | None) -> re.Pattern[str] | None:
    if force is None:
        return None
    try:
        return re.compile(force)
    except re.error as error:
        raise TootsieError(
            f"--force {force!r} is not a valid regular expression ({error}); e.g. --force 'demo/train'"
        ) from None


def ensure_writable(prefix: str) -> None:
    """Create `prefix` and write and remove a probe file in it; a one-line TootsieError if that fails."""
    if storage.is_remote(prefix):
        _ensure_remote_writable(prefix)
        return
    if os.path.exists(prefix) and not os.path.isdir(prefix):
        raise TootsieError(
            f"prefix {prefix!r} is a file, not a directory; pass --prefix DIR (or set TOOTSIE_PREFIX) to a directory"
        )
    try:
        os.makedirs(prefix, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".tootsie-write-probe-", dir=prefix)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise TootsieError(
            f"prefix {prefix!r} is not writable ({error.strerror or error}); "
            "pass --prefix DIR (or set TOOTSIE_PREFIX) to a writable directory"
        ) from None


def _ensure_remote_writable(prefix: str) -> None:
    """Write and delete a probe object under the URL `prefix`.

    If that fails, raise a one-line TootsieError naming the likely fix.
    """
    probe = storage.join(prefix, f".tootsie-write-probe-{uuid.uuid4().hex}")
    try:
        storage.write_bytes(probe, b"")
        storage.remove(probe)
    except (OSError, ValueError) as error:
        raise TootsieError(
            f"prefix {prefix!r} is not writable ({describe_error(error)}); check that the bucket exists, "
            "the credentials (e.g. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) and the endpoint (e.g. AWS_ENDPOINT_URL)"
        ) from None


def _run_local(context: RunContext) -> list[StepReport]:
    """Settle or run every step in order, in this process."""
    failed: set[str] = set()
    reports = []
    for node in context.graph.nodes:
        report = _run_node(context, node, failed)
        if report.status in (Status.FAILED, Status.DEP_FAILED):
            failed.add(node.id)
        reports.append(report)
    return reports


def _run_node(context: RunContext, node: Node, failed: Collection[str]) -> StepReport:
    """Skip, mark DEP_FAILED, or run one step in this process, and report what happened."""
    settled = context.settle(node, failed)
    if isinstance(settled, StepReport):
        return settled
    lease = open_lease(node.output_path, context.settings)
    waited_on = _wait_for(lease, node.step.name)
    claimed = context.claim(node, lease, waited_on)
    if isinstance(claimed, StepReport):
        return claimed
    try:
        with Heartbeat(lease, context.settings.heartbeat_seconds, node.step.name):
            attempt = context.begin(node, settled.reason, claimed)
            try:
                error = call_step(prepare_call(context.graph, node))
            except BaseException as interrupt:  # Ctrl-C or SystemExit: recorded as FAILED, then passed on
                context.finish(node, attempt, describe_error(interrupt))
                raise
            return context.finish(node, attempt, error)
    finally:
        lease.release()


def _wait_for(lease: Lease, name: str) -> str | None:
    """Take the step's lease, waiting (and saying so once) while a live process holds it; who held it, if anyone."""
    waited_on = None
    while not lease.acquire():
        if waited_on is None:
            waited_on = holder_of(lease)
            logger.info("step %s: waiting while %s runs it", name, waited_on)
        time.sleep(POLL_SECONDS)
    return waited_on


def holder_of(lease: Lease) -> str:
    """ "pid P on host H" of whoever holds `lease`, for log lines."""
    holder = lease.read()
    return "another process" if holder is None else f"pid {holder.pid} on host {holder.host}"


def log_to_step(directory: str, level: int, message: str, *args: object) -> None:
    """Log one executor line to the console handlers and to the step's `.executor.log`."""
    with capture_logs(directory):
        logger.log(level, message, *args)


def write_run_record(
    graph: Graph, reports: Sequence[StepReport], experiment_path: str | os.PathLike[str] | None
) -> str:
    """Write `<prefix>/experiments/<stem>-<hash of sorted output paths>.json` listing every step; return its path."""
    stem = "experiment" if experiment_path is None else Path(experiment_path).stem
    digest = hash_json(sorted(node.output_path for node in graph.nodes))
    path = storage.join(graph.prefix, RECORD_DIR, f"{stem}-{digest}.json")
    payload = {
        "experiment": None if experiment_path is None else os.path.abspath(os.fspath(experiment_path)),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "steps": [
            {"name": r.name, "hash": r.hash, "status": str(r.status), "output_path": r.output_path} for r in reports
        ],
    }
    storage.write_json(path, payload)
    return path
