"""Lease locks with a heartbeat, so that each step runs in at most one process at a time.

A lease is a small JSON file in the step's output directory naming its owner
(a random token, host and pid) and the time of its last heartbeat. The owner
refreshes the heartbeat from a daemon thread every `heartbeat_seconds`. Another
process may take the lease over once it is stale:

- its heartbeat is older than `lease_seconds` (the owner hung, or its machine
  died), or
- its owner ran on this host and its pid is gone (`os.kill(pid, 0)` fails), so
  a local run killed with SIGKILL is taken over at once instead of after
  `lease_seconds`.

Every read-check-write of the lease happens while holding `fcntl.flock` on a
sidecar `.executor_lease.mutex` file. The kernel drops a flock when its process
dies, so the mutex itself can never go stale; the lease file is written with a
temporary file and `os.replace`. The `Lease` protocol (acquire / refresh /
release / read) is all the runner uses; `remote_lease.ObjectLease` implements
it in object storage with conditional writes, and `remote_lease.open_lease`
picks the one a prefix needs.
"""

import contextlib
import dataclasses
import fcntl
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.jsonfile import record_from_json, write_json_atomic

LEASE_FILE = ".executor_lease.json"
MUTEX_FILE = ".executor_lease.mutex"

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LeaseSettings:
    """How long a lease lives without a heartbeat, and how often its owner refreshes it."""

    lease_seconds: float = 60.0
    """A lease whose heartbeat is older than this is stale and may be taken over."""
    heartbeat_seconds: float = 5.0
    """The owner refreshes its heartbeat this often; must be well below `lease_seconds`."""

    def __post_init__(self) -> None:
        if not (self.heartbeat_seconds > 0 and self.lease_seconds > self.heartbeat_seconds):
            raise ValueError(
                f"need 0 < heartbeat_seconds < lease_seconds, got {self.heartbeat_seconds=} and {self.lease_seconds=}; "
                "a lease must outlive several heartbeats or live owners lose it"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "LeaseSettings":
        """Defaults overridden by TOOTSIE_LEASE_SECONDS and TOOTSIE_HEARTBEAT_SECONDS when set."""
        values: dict[str, float] = {}
        for field, variable in (
            ("lease_seconds", "TOOTSIE_LEASE_SECONDS"),
            ("heartbeat_seconds", "TOOTSIE_HEARTBEAT_SECONDS"),
        ):
            text = environ.get(variable)
            if text is None:
                continue
            try:
                values[field] = float(text)
            except ValueError:
                raise TootsieError(
                    f"{variable}={text!r} is not a number of seconds; set it to e.g. 60, or unset it"
                ) from None
        try:
            return cls(**values)
        except ValueError as error:
            raise TootsieError(f"TOOTSIE_LEASE_SECONDS / TOOTSIE_HEARTBEAT_SECONDS: {error}") from None


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """The content of a lease file."""

    owner: str
    """Random token of the holder; a process only refreshes or releases a lease with its own token."""
    host: str
    """Hostname of the holder."""
    pid: int
    """Process id of the holder on `host`."""
    acquired: float
    """Unix time when the lease was taken."""
    heartbeat: float
    """Unix time of the holder's last heartbeat."""

    @classmethod
    def from_json(cls, payload: dict[str, Any], path: str | os.PathLike[str]) -> "LeaseRecord":
        """Parse a lease file's JSON; a malformed file is an error naming it."""
        return record_from_json(cls, payload, "lease file", path, "delete it to let the executor take the step over")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def stale_reason(record: LeaseRecord, settings: LeaseSettings, *, now: float) -> str | None:
    """Why `record` may be taken over (old heartbeat, or a local owner that is gone), or None if it is live."""
    age = now - record.heartbeat
    if age > settings.lease_seconds:
        return (
            f"heartbeat from pid {record.pid} on host {record.host} is {age:.0f} s old, "
            f"lease {settings.lease_seconds:g} s"
        )
    if record.host == socket.gethostname() and not pid_alive(record.pid):
        return f"owner pid {record.pid} on host {record.host} is gone"
    return None


def read_lease(directory: str | os.PathLike[str]) -> LeaseRecord | None:
    """The lease file of `directory` (local or in object storage), or None when there is none; nothing is written."""
    path = storage.join(os.fspath(directory), LEASE_FILE)
    payload = storage.read_json(path)
    return None if payload is None else LeaseRecord.from_json(payload, path)


class Lease(Protocol):
    """The lock the runner holds while a step runs: `FileLease` locally, `remote_lease.ObjectLease` in object stores."""

    def acquire(self) -> bool:
        """Take the lease if it is absent, stale or already ours; False if someone else holds it."""
        ...

    def refresh(self) -> bool:
        """Move our heartbeat to now; False if the lease is no longer ours."""
        ...

    def release(self) -> None:
        """Give the lease up if it is still ours."""
        ...

    def read(self) -> LeaseRecord | None:
        """The current lease, or None when nobody holds one."""
        ...


class FileLease:
    """A `Lease` stored as `.executor_lease.json` in a local directory, guarded by flock on a sidecar mutex."""

    def __init__(self, directory: str | os.PathLike[str], settings: LeaseSettings) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LEASE_FILE
        self.settings = settings
        self.owner = uuid.uuid4().hex

    @contextlib.contextmanager
    def _mutex(self) -> Iterator[None]:
        """Exclusive flock on the sidecar mutex file; the kernel releases it if this process dies."""
        fd = os.open(self.directory / MUTEX_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def read(self) -> LeaseRecord | None:
        """The current lease, or None when there is no lease file (reading takes no lock and writes nothing)."""
        return read_lease(self.directory)

    def acquire(self) -> bool:
        """Take the lease if it is absent, stale or already ours; False if a live owner holds it."""
        with self._mutex():
            current = self.read()
            now = time.time()
            if (
                current is not None
                and current.owner != self.owner
                and stale_reason(current, self.settings, now=now) is None
            ):
                return False
            record = LeaseRecord(
                owner=self.owner, host=socket.gethostname(), pid=os.getpid(), acquired=now, heartbeat=now
            )
            write_json_atomic(self.path, dataclasses.asdict(record))
            return True

    def refresh(self) -> bool:
        """Move our heartbeat to now; False (and no write) if another process took the lease."""
        with self._mutex():
            current = self.read()
            if current is None or current.owner != self.owner:
                return False
            write_json_atomic(self.path, dataclasses.asdict(dataclasses.replace(current, heartbeat=time.time())))
            return True

    def release(self) -> None:
        """Delete the lease file if the lease is still ours."""
        with self._mutex():
            current = self.read()
            if current is not None and current.owner == self.owner:
                self.path.unlink()


class Heartbeat:
    """While the `with` block runs, refresh `lease` every `interval` seconds from a daemon thread.

    If a refresh finds the lease gone to another process, it logs an error and
    stops; the step itself keeps running (killing it could leave a worse mess
    than a duplicate run of a step that resumes itself).
    """

    def __init__(self, lease: Lease, interval: float, label: str) -> None:
        self._lease = lease
        self._interval = interval
        self._label = label
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"tootsie-heartbeat {label}", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                held = self._lease.refresh()
            except Exception as error:  # noqa: BLE001 - e.g. an object store briefly unreachable: keep beating
                logger.error("step %s: heartbeat failed (%s); will retry in %g s", self._label, error, self._interval)
                continue
            if not held:
                logger.error(
                    "step %s: lost its lease to another process (%s); the step keeps running, "
                    "but the other process may run it at the same time",
                    self._label,
                    self._describe_holder(),
                )
                return

    def _describe_holder(self) -> str:
        try:
            holder = self._lease.read()
        except (OSError, TootsieError) as error:
            return f"lease unreadable: {error}"
        return "no lease file" if holder is None else f"now held by pid {holder.pid} on host {holder.host}"
