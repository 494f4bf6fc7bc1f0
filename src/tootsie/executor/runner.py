"""Run an experiment's steps in dependency order, in this process, each at most once across processes.

For each step, inputs first: skip it if its status is SUCCESS; otherwise take
its lease (waiting while a live process holds it, then skipping if that process
finished it), write RUNNING and the metadata file, call `fn(resolved_config,
output_path)` with the step's log captured, and write the metadata and then
SUCCESS last. If `fn` raises, the step is FAILED with the traceback in its log,
every step that still had to run and reads it (directly or not) is DEP_FAILED,
and the steps that do not depend on it still run. Outputs are never deleted:
a rerun calls `fn` on the same directory, and steps resume themselves.
"""

import dataclasses
import logging
import os
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tootsie.errors import TootsieError
from tootsie.executor.graph import Graph, Node, build_graph
from tootsie.executor.hashing import hash_json
from tootsie.jsonfile import write_json_atomic
from tootsie.executor.lease import FileLease, Heartbeat, LeaseSettings
from tootsie.executor.metadata import Environment, recorded, write_info
from tootsie.executor.plan import decide, plan
from tootsie.executor.report import RunReport, StepReport, describe_error
from tootsie.executor.status import Status, observe, write_status
from tootsie.executor.step import Step
from tootsie.executor.steplog import capture_logs, log_current_exception

POLL_SECONDS = 0.25
RECORD_DIR = "experiments"

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _Outcome:
    status: Status
    seconds: float
    error: str | None


def run_experiment(
    steps: Sequence[Step[Any]],
    prefix: str | os.PathLike[str],
    *,
    force: str | None = None,
    dry_run: bool = False,
    experiment_path: str | os.PathLike[str] | None = None,
) -> RunReport:
    """Run `steps` and every step they reference, with outputs under `prefix`.

    `force` is a regex; steps whose name matches (`re.search`) rerun even if
    SUCCESS. A dry run reads the output directories and reports what a run
    would do, writing nothing. `experiment_path` is recorded in the metadata
    and names the run record `<prefix>/experiments/<stem>-<hash>.json`.
    """
    pattern = _compile_force(force)
    settings = LeaseSettings.from_env()
    graph = build_graph(steps, prefix)

    def forced(name: str) -> bool:
        return pattern is not None and pattern.search(name) is not None

    if dry_run:
        return plan(graph, forced=forced, settings=settings)
    ensure_writable(graph.prefix)
    environment = Environment.collect(experiment_path)
    since = time.time()
    failed: set[str] = set()
    reports = []
    for node in graph.nodes:
        report = _run_node(
            graph,
            node,
            forced=forced(node.step.name),
            since=since,
            failed=failed,
            settings=settings,
            environment=environment,
        )
        if report.status in (Status.FAILED, Status.DEP_FAILED):
            failed.add(node.id)
        reports.append(report)
    record = write_run_record(graph, reports, experiment_path)
    return RunReport(prefix=graph.prefix, steps=tuple(reports), record_path=record)


def experiment_status(steps: Sequence[Step[Any]], prefix: str | os.PathLike[str]) -> RunReport:
    """The reported status of every step (SUCCESS/RUNNING/FAILED/DEP_FAILED/NOT_STARTED), reading files only."""
    return plan(build_graph(steps, prefix), forced=lambda name: False, settings=LeaseSettings.from_env())


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


def _run_node(
    graph: Graph,
    node: Node,
    *,
    forced: bool,
    since: float,
    failed: set[str],
    settings: LeaseSettings,
    environment: Environment,
) -> StepReport:
    """Skip, mark DEP_FAILED, or run one step, and report what happened."""
    name, directory = node.step.name, node.output_path

    def report(status: Status, reason: str, seconds: float | None = None, error: str | None = None) -> StepReport:
        return StepReport(name, node.hash, status, directory, reason, seconds=seconds, error=error)

    decision = decide(observe(directory, settings), forced=forced, since=since)
    if decision.action == "skip":
        logger.info("step %s: %s", name, decision.reason)
        return report(Status.SUCCESS, decision.reason, recorded(directory).seconds)
    failed_inputs = [graph.by_id[dep].step.name for dep in node.dependencies if dep in failed]
    os.makedirs(directory, exist_ok=True)
    if failed_inputs:
        write_status(directory, Status.DEP_FAILED)
        reason = f"not run: input failed: {', '.join(failed_inputs)}"
        logger.error("step %s: %s", name, reason)
        return report(Status.DEP_FAILED, reason)
    lease = FileLease(directory, settings)
    done_elsewhere = _acquire(lease, name, directory, forced=forced, since=since, settings=settings)
    if done_elsewhere is not None:
        logger.info("step %s: %s", name, done_elsewhere)
        return report(Status.SUCCESS, done_elsewhere, recorded(directory).seconds)
    try:
        with Heartbeat(lease, settings.heartbeat_seconds, name):
            outcome = _execute(graph, node, environment, reason=decision.reason)
    finally:
        lease.release()
    return report(outcome.status, decision.reason, outcome.seconds, outcome.error)


def _acquire(
    lease: FileLease, name: str, directory: str, *, forced: bool, since: float, settings: LeaseSettings
) -> str | None:
    """Take the step's lease, waiting while a live process holds it; the skip reason if that process finished it."""
    waiting = False
    while not lease.acquire():
        if not waiting:
            holder = lease.read()
            where = "another process" if holder is None else f"pid {holder.pid} on host {holder.host}"
            logger.info("step %s: waiting while %s runs it", name, where)
            waiting = True
        time.sleep(POLL_SECONDS)
    decision = decide(observe(directory, settings), forced=forced, since=since)
    if decision.action == "skip":
        lease.release()
        return decision.reason
    return None


def _execute(graph: Graph, node: Node, environment: Environment, *, reason: str) -> _Outcome:
    """Call the step's fn with its log captured; write FAILED, or the metadata and then SUCCESS."""
    directory = node.output_path
    started = time.time()
    write_status(directory, Status.RUNNING)
    write_info(node, environment, status=Status.RUNNING, started=started)
    with capture_logs(directory) as log:
        logger.info("step %s: %s -> %s", node.step.name, reason, directory)
        try:
            node.step.fn(graph.resolved_config(node), directory)
        except BaseException as error:
            ended = time.time()
            log_current_exception(log, node.step.name)
            message = describe_error(error)
            write_info(node, environment, status=Status.FAILED, started=started, ended=ended, error=message)
            write_status(directory, Status.FAILED)
            logger.error("step %s: FAILED after %.1f s: %s", node.step.name, ended - started, message)
            if not isinstance(error, Exception):
                raise
            return _Outcome(Status.FAILED, ended - started, message)
        ended = time.time()
        logger.info("step %s: SUCCESS in %.1f s", node.step.name, ended - started)
    write_info(node, environment, status=Status.SUCCESS, started=started, ended=ended)
    write_status(directory, Status.SUCCESS)
    return _Outcome(Status.SUCCESS, ended - started, None)


def write_run_record(
    graph: Graph, reports: Sequence[StepReport], experiment_path: str | os.PathLike[str] | None
) -> str:
    """Write `<prefix>/experiments/<stem>-<hash of sorted output paths>.json` listing every step; return its path."""
    stem = "experiment" if experiment_path is None else Path(experiment_path).stem
    digest = hash_json(sorted(node.output_path for node in graph.nodes))
    path = os.path.join(graph.prefix, RECORD_DIR, f"{stem}-{digest}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    payload = {
        "experiment": None if experiment_path is None else os.path.abspath(os.fspath(experiment_path)),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "steps": [
            {"name": r.name, "hash": r.hash, "status": str(r.status), "output_path": r.output_path} for r in reports
        ],
    }
    write_json_atomic(path, payload)
    return path
