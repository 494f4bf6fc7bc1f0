"""Status files, and the status a step is reported in given its status file and its lease.

Each output directory (local, or a prefix in object storage) holds `.executor_status.json`:
`{"status": "SUCCESS"|"RUNNING"|"FAILED"|"DEP_FAILED", "time": <ISO 8601 UTC>, "host": ..., "pid": ...}`,
written atomically. A status file alone cannot tell a running step from one
whose process was killed, so the reported status also looks at the lease:
RUNNING with a live lease is RUNNING; RUNNING with a stale or missing lease is
reported as FAILED with the detail that it was interrupted. A live lease
without a RUNNING status (a retry that just started) is RUNNING too.

A SUCCESS step whose recorded files (its manifest, `manifest`) are missing or
changed is reported DAMAGED, naming them. `observe` reads only the status and
lease files; `plan.inspect` adds the manifest and the damage.
"""

import dataclasses
import datetime
import enum
import os
import socket
import time
from typing import TYPE_CHECKING

from tootsie import storage
from tootsie.executor.lease import LeaseRecord, LeaseSettings, read_lease, stale_reason
from tootsie.jsonfile import record_from_json

if TYPE_CHECKING:  # manifest imports this module for STATUS_FILE
    from tootsie.executor.manifest import Manifest

STATUS_FILE = ".executor_status.json"


class Status(enum.StrEnum):
    """Status of a step; NOT_STARTED (no status file) and DAMAGED (SUCCESS, files broken) are only reported."""

    SUCCESS = "SUCCESS"
    RUNNING = "RUNNING"
    FAILED = "FAILED"
    DEP_FAILED = "DEP_FAILED"
    NOT_STARTED = "NOT_STARTED"
    DAMAGED = "DAMAGED"


@dataclasses.dataclass(frozen=True)
class StatusRecord:
    """The content of a status file."""

    status: Status
    """What the last writer said about the step."""
    time: str
    """When it was written, ISO 8601 in UTC."""
    host: str
    """Hostname of the writer."""
    pid: int
    """Process id of the writer."""

    @property
    def timestamp(self) -> float:
        """`time` as Unix seconds."""
        return datetime.datetime.fromisoformat(self.time).timestamp()

    @property
    def display_time(self) -> str:
        """`time` to the second, e.g. "2025-01-01 12:00:00 UTC"."""
        moment = datetime.datetime.fromisoformat(self.time).astimezone(datetime.UTC)
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def write_status(directory: str | os.PathLike[str], status: Status) -> StatusRecord:
    """Atomically write `status` (stamped with now, this host and this pid) to `directory`'s status file."""
    record = StatusRecord(
        status=status,
        time=datetime.datetime.now(datetime.UTC).isoformat(),
        host=socket.gethostname(),
        pid=os.getpid(),
    )
    storage.write_json(storage.join(os.fspath(directory), STATUS_FILE), dataclasses.asdict(record))
    return record


def read_status(directory: str | os.PathLike[str]) -> StatusRecord | None:
    """The status file of `directory`, or None when there is none."""
    path = storage.join(os.fspath(directory), STATUS_FILE)
    payload = storage.read_json(path)
    if payload is None:
        return None
    return record_from_json(StatusRecord, payload, "status file", path, "delete it to rerun the step")


@dataclasses.dataclass(frozen=True)
class Observed:
    """What the files of one output directory say about its step right now."""

    record: StatusRecord | None
    """The status file, if any."""
    lease: LeaseRecord | None
    """The lease file, if any."""
    lease_live: bool
    """Whether `lease` is held by a live owner (not stale)."""
    interrupted: str | None
    """Why a RUNNING status is not really running (stale or missing lease), else None."""
    manifest: "Manifest | None" = None
    """The recorded manifest of a SUCCESS step, once read (`plan.inspect`); None without one."""
    damage: tuple[str, ...] = ()
    """What is wrong with a SUCCESS step's recorded files, one line per file (`manifest.damage`)."""

    @property
    def succeeded(self) -> bool:
        """Whether the status file says SUCCESS."""
        return self.record is not None and self.record.status is Status.SUCCESS

    @property
    def status(self) -> Status:
        """The reported status: SUCCESS, DAMAGED, RUNNING, FAILED, DEP_FAILED or NOT_STARTED."""
        if self.succeeded:
            return Status.DAMAGED if self.damage else Status.SUCCESS
        if self.lease_live:
            return Status.RUNNING
        if self.interrupted is not None:
            return Status.FAILED
        return Status.NOT_STARTED if self.record is None else self.record.status

    @property
    def detail(self) -> str | None:
        """A note for an interrupted run or a damaged output, else None."""
        if self.damage:
            return f"damaged: {summarize(self.damage)}"
        return None if self.interrupted is None else f"interrupted: {self.interrupted}"


SHOWN_DAMAGE = 3
"""Damage lines a one-line note names before counting the rest (a deleted checkpoint can be hundreds of files)."""


def summarize(lines: tuple[str, ...] | list[str]) -> str:
    """The first `SHOWN_DAMAGE` lines joined with "; ", then "(and N more)"."""
    shown = "; ".join(lines[:SHOWN_DAMAGE])
    rest = len(lines) - SHOWN_DAMAGE
    return f"{shown} (and {rest} more)" if rest > 0 else shown


def observe(directory: str | os.PathLike[str], settings: LeaseSettings, *, now: float | None = None) -> Observed:
    """Read the status and lease files of `directory` (writing nothing) and judge the lease at `now`."""
    moment = time.time() if now is None else now
    record = read_status(directory)
    lease = read_lease(directory)
    stale = None if lease is None else stale_reason(lease, settings, now=moment)
    lease_live = lease is not None and stale is None
    interrupted = None
    if record is not None and record.status is Status.RUNNING and not lease_live:
        interrupted = stale if stale is not None else "no lease is held"
    return Observed(record=record, lease=lease, lease_live=lease_live, interrupted=interrupted)
