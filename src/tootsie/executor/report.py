"""What a run, a dry run or a status query found, per step: the value `run_experiment` returns.

The CLI prints it as a table or as one JSON object; `tootsie demo` prints its
own summary from it. `failure_summary` is the one line that names the first
failed step, its error and its log file.
"""

import dataclasses
from typing import Any

from tootsie import storage
from tootsie.executor.manifest import Manifest
from tootsie.executor.status import Status
from tootsie.executor.steplog import LOG_FILE


@dataclasses.dataclass(frozen=True)
class ManifestSummary:
    """What a report shows of a step's manifest (`manifest`)."""

    digest: str
    """Hex sha256 over the non-volatile files' paths, sizes and hashes (`Manifest.digest`)."""
    files: int
    """Files listed, volatile ones included."""

    @classmethod
    def of(cls, manifest: Manifest | None) -> "ManifestSummary | None":
        """The summary of `manifest`, None when there is none."""
        return None if manifest is None else cls(manifest.digest, len(manifest.files))


@dataclasses.dataclass(frozen=True)
class StepReport:
    """One step version in a report."""

    name: str
    """Step name, e.g. "demo/tokenize"."""
    hash: str
    """12-hex-character version hash."""
    status: Status
    """SUCCESS, RUNNING, FAILED, DEP_FAILED, NOT_STARTED, or DAMAGED (a status or dry-run report only)."""
    output_path: str
    """Absolute output directory, or its URL in object storage."""
    reason: str
    """Why the step was (or would be) skipped, run or waited on, e.g. "skip: SUCCESS at ..."."""
    seconds: float | None = None
    """Duration of the run that produced the current status, when one finished."""
    detail: str | None = None
    """Extra note, e.g. "interrupted: owner pid 12 on host a is gone"."""
    error: str | None = None
    """"<ExceptionType>: <message>" of the last attempt, when the step is FAILED."""
    damage: tuple[str, ...] = ()
    """Recorded files missing or changed, one line each: why it is DAMAGED, or why a run reran it."""
    manifest: ManifestSummary | None = None
    """The digest and file count of its manifest; None when it has none (not finished, or finished before them)."""
    moved_to: str | None = None
    """Where a run moved the step's earlier output before rerunning it from a clean directory."""

    @property
    def log_path(self) -> str:
        """The step's `.executor.log`."""
        return storage.join(self.output_path, LOG_FILE)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with name, hash, status, output_path, reason, seconds, manifest, and the rest when set."""
        payload: dict[str, Any] = {
            "name": self.name,
            "hash": self.hash,
            "status": str(self.status),
            "output_path": self.output_path,
            "reason": self.reason,
            "seconds": self.seconds,
            "manifest": None if self.manifest is None else dataclasses.asdict(self.manifest),
        }
        if self.damage:
            payload["damage"] = list(self.damage)
        if self.moved_to is not None:
            payload["moved_to"] = self.moved_to
        if self.detail is not None:
            payload["detail"] = self.detail
        if self.error is not None:
            payload["error"] = self.error
            payload["log"] = self.log_path
        return payload


@dataclasses.dataclass(frozen=True)
class RunReport:
    """Every step of an experiment, inputs first, with what happened to it."""

    prefix: str
    """Absolute directory (or URL) holding the outputs."""
    steps: tuple[StepReport, ...]
    """One entry per step version, in run order."""
    dry_run: bool = False
    """True for a plan (or status query) that ran and wrote nothing."""
    record_path: str | None = None
    """The run record under `<prefix>/experiments/`, written after a real run."""

    @property
    def ok(self) -> bool:
        """A dry run is ok once planned; a run is ok when every step is SUCCESS."""
        return self.dry_run or all(step.status is Status.SUCCESS for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict: {"steps": [...], "ok", "dry_run", "prefix", "record"}."""
        return {
            "steps": [step.to_json() for step in self.steps],
            "ok": self.ok,
            "dry_run": self.dry_run,
            "prefix": self.prefix,
            "record": self.record_path,
        }


def describe_error(error: BaseException) -> str:
    """ "<ExceptionType>: <message>" on one line (just the type when the message is empty)."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def failure_summary(report: RunReport) -> str | None:
    """One line naming the first failed step, its error and log; None when nothing failed."""
    failed = [step for step in report.steps if step.status is Status.FAILED]
    if not failed:
        return None
    first = failed[0]
    line = f"step {first.name!r} failed: {first.error or first.detail or 'see its log'} (log: {first.log_path})"
    dep_failed = sum(step.status is Status.DEP_FAILED for step in report.steps)
    extra = []
    if len(failed) > 1:
        extra.append(f"{len(failed) - 1} more failed ({', '.join(step.name for step in failed[1:])})")
    if dep_failed:
        extra.append(f"{dep_failed} not run because an input failed")
    return line + (f"; {'; '.join(extra)}" if extra else "")
