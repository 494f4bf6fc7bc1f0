"""A step's lease in object storage, made exclusive by conditional writes, and the choice of lease per prefix.

`ObjectLease` keeps the `Lease` protocol of `FileLease` (same JSON record, same
staleness rules) but has no flock to lean on, so every change of the lease
object is a compare-and-swap on the store:

- acquire, when there is no lease: create the object only if it does not
  exist (S3 `PutObject` with `If-None-Match: *`); of two runs racing, the
  store lets exactly one create it;
- acquire, when the lease is stale: overwrite it only if it is still the
  version that was judged stale (`If-Match: <ETag>`); of two runs taking over
  the same dead owner's lease, exactly one succeeds;
- heartbeat: rewrite the object only if it is still the version this owner
  wrote last; a failed condition means another run took the lease over;
- release: delete it only if it is still this owner's version.

After a failed condition the object is read back: if it holds exactly the
bytes this owner tried to write, the write did land (a retried request whose
first answer was lost) and the lease is ours.

S3 (s3fs) has these conditions. Other fsspec stores get `UnguardedObject`,
which checks and then writes in two requests, and a warning once per scheme:
two runs that start the same step within that gap may both run it.
Staleness compares heartbeat times written by different machines, so their
clocks must agree to well within `lease_seconds` (NTP does).
"""

import dataclasses
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from typing import Any, Protocol

from fsspec import AbstractFileSystem
from fsspec.asyn import sync

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.executor.lease import LEASE_FILE, FileLease, Lease, LeaseRecord, LeaseSettings, stale_reason

CONDITIONAL_SCHEMES = ("s3", "s3a")
_FAILED_CONDITION = ("PreconditionFailed", "ConditionalRequestConflict")

logger = logging.getLogger(__name__)
_warned: set[str] = set()


class VersionedObject(Protocol):
    """One object read with a version tag and written only if its version is as expected."""

    def read(self) -> tuple[bytes, str] | None:
        """The content and version tag, or None when the object does not exist."""
        ...

    def create(self, data: bytes) -> str | None:
        """Write `data` if the object does not exist; its new tag, or None if it exists."""
        ...

    def replace(self, data: bytes, tag: str) -> str | None:
        """Overwrite with `data` if the object is still at version `tag`; the new tag, or None."""
        ...

    def delete(self, tag: str) -> bool:
        """Delete the object if it is still at version `tag`; whether it was deleted."""
        ...


def _failed_condition(error: BaseException) -> bool:
    """Whether an s3fs error is S3 refusing a conditional request (412, or 409 for a concurrent one)."""
    cause = error.__cause__
    response = getattr(cause, "response", None)
    if not isinstance(response, dict):
        return False
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in _FAILED_CONDITION or status in (409, 412)


class S3Object:
    """A `VersionedObject` in S3 through s3fs: the tag is the ETag; conditions are If-None-Match and If-Match."""

    def __init__(self, fs: AbstractFileSystem, path: str) -> None:
        self.fs = fs
        self.bucket, self.key, _ = fs.split_path(path)

    def read(self) -> tuple[bytes, str] | None:
        """GET the object: content and ETag from one response, so the tag belongs to that content."""

        async def get() -> tuple[bytes, str] | None:
            try:
                response = await self.fs._call_s3("get_object", Bucket=self.bucket, Key=self.key)
            except FileNotFoundError:
                return None
            body = response["Body"]
            try:
                return await body.read(), response["ETag"]
            finally:
                body.close()

        return sync(self.fs.loop, get)

    def _put(self, data: bytes, **condition: str) -> str | None:
        try:
            response = self.fs.call_s3("put_object", Bucket=self.bucket, Key=self.key, Body=data, **condition)
        except (
            OSError
        ) as error:  # s3fs turns 412/409 into FileExistsError or OSError(EINVAL), missing keys into FileNotFoundError
            if isinstance(error, FileNotFoundError) or _failed_condition(error):
                return None
            raise
        return response["ETag"]

    def create(self, data: bytes) -> str | None:
        """PUT with If-None-Match: *."""
        return self._put(data, IfNoneMatch="*")

    def replace(self, data: bytes, tag: str) -> str | None:
        """PUT with If-Match: tag."""
        return self._put(data, IfMatch=tag)

    def delete(self, tag: str) -> bool:
        """DELETE with If-Match: tag."""
        try:
            self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self.key, IfMatch=tag)
        except OSError as error:
            if isinstance(error, FileNotFoundError) or _failed_condition(error):
                return False
            raise
        return True


class UnguardedObject:
    """A `VersionedObject` for stores without conditional writes: check, then write (a race is possible between)."""

    def __init__(self, fs: AbstractFileSystem, path: str) -> None:
        self.fs = fs
        self.path = path

    def read(self) -> tuple[bytes, str] | None:
        """Content and its sha256 as the tag."""
        try:
            data = self.fs.cat_file(self.path)
        except FileNotFoundError:
            return None
        return data, hashlib.sha256(data).hexdigest()

    def create(self, data: bytes) -> str | None:
        """Write if absent (checked just before)."""
        if self.read() is not None:
            return None
        self.fs.pipe_file(self.path, data)
        return hashlib.sha256(data).hexdigest()

    def replace(self, data: bytes, tag: str) -> str | None:
        """Write if the content still hashes to `tag` (checked just before)."""
        current = self.read()
        if current is None or current[1] != tag:
            return None
        self.fs.pipe_file(self.path, data)
        return hashlib.sha256(data).hexdigest()

    def delete(self, tag: str) -> bool:
        """Delete if the content still hashes to `tag` (checked just before)."""
        current = self.read()
        if current is None or current[1] != tag:
            return False
        self.fs.rm_file(self.path)
        return True


def versioned_object(url: str) -> VersionedObject:
    """The conditional-write handle for `url`: `S3Object` for s3://, else `UnguardedObject` with a warning once."""
    fs, path = storage.filesystem(url)
    scheme = storage.scheme_of(url) or ""
    if scheme in CONDITIONAL_SCHEMES:
        return S3Object(fs, path)
    if scheme not in _warned:
        _warned.add(scheme)
        logger.warning(
            "%s:// has no conditional writes in tootsie: step leases there are checked, then written, so two runs "
            "that start the same step at the same moment may both run it; use s3:// or run one driver per prefix",
            scheme,
        )
    return UnguardedObject(fs, path)


class ObjectLease:
    """A `Lease` stored as the object `<directory>/.executor_lease.json`, changed only by conditional writes."""

    def __init__(self, directory: str, settings: LeaseSettings, target: VersionedObject | None = None) -> None:
        self.directory = directory
        self.url = storage.join(directory, LEASE_FILE)
        self.settings = settings
        self.owner = uuid.uuid4().hex
        self.target = versioned_object(self.url) if target is None else target
        self._held: tuple[LeaseRecord, str] | None = None
        """Our record and the tag of our last write, while we hold the lease."""

    def _parse(self, data: bytes) -> LeaseRecord:
        try:
            payload: Any = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise TootsieError(
                f"lease {self.url} is not valid JSON ({error}); delete it to let the executor take the step over"
            ) from None
        if not isinstance(payload, dict):
            raise TootsieError(
                f"lease {self.url} holds a {type(payload).__name__}; delete it to let the executor take the step over"
            )
        return LeaseRecord.from_json(payload, self.url)

    def _write(self, record: LeaseRecord, tag: str | None) -> bool:
        """Create (tag None) or replace (at `tag`) the lease with `record`; on success remember it as held."""
        data = (json.dumps(dataclasses.asdict(record), indent=2, sort_keys=True) + "\n").encode("utf-8")
        new_tag = self.target.create(data) if tag is None else self.target.replace(data, tag)
        if new_tag is None:
            current = self.target.read()
            if current is None or current[0] != data:
                self._held = None
                return False
            new_tag = current[1]  # our own write landed; only its answer was lost
        self._held = (record, new_tag)
        return True

    def read(self) -> LeaseRecord | None:
        """The current lease, or None when there is no lease object."""
        current = self.target.read()
        return None if current is None else self._parse(current[0])

    def acquire(self) -> bool:
        """Take the lease if it is absent, stale or already ours; False if a live owner holds it or won the race."""
        now = time.time()
        record = LeaseRecord(owner=self.owner, host=socket.gethostname(), pid=os.getpid(), acquired=now, heartbeat=now)
        current = self.target.read()
        if current is None:
            return self._write(record, None)
        holder = self._parse(current[0])
        if holder.owner != self.owner and stale_reason(holder, self.settings, now=now) is None:
            return False
        return self._write(record, current[1])

    def refresh(self) -> bool:
        """Move our heartbeat to now, if the object is still the version we wrote; False once another run took it."""
        if self._held is None:
            return False
        record, tag = self._held
        return self._write(dataclasses.replace(record, heartbeat=time.time()), tag)

    def release(self) -> None:
        """Delete the lease object if it is still the version we wrote."""
        if self._held is not None:
            self.target.delete(self._held[1])
            self._held = None


def open_lease(directory: str, settings: LeaseSettings) -> Lease:
    """The lease of the step whose output is `directory`: `FileLease` on local disk, `ObjectLease` in a store."""
    return ObjectLease(directory, settings) if storage.is_remote(directory) else FileLease(directory, settings)
