"""Output manifests: the relative path, size and sha256 of every file a step wrote, recorded before SUCCESS.

A step's hash names its config and inputs; the manifest names its content. With
both, "one hash, one content" can be checked instead of trusted: `verify` reruns
a step elsewhere and compares manifests, `status` notices a file that went
missing or changed size, and two machines can tell whether a prefix they share
holds the same bytes under the same name.

A step may declare files that are legitimately not reproducible (logs, timings,
wall-clock fields) with glob patterns (`Step(volatile=...)` or the
`volatile_outputs` decorator on its function). They are still listed, marked
`"volatile": true`, and left out of the digest and of every comparison.

The file `.executor_manifest.json` beside `.executor_status.json`::

    {"format": 1,
     "digest": "<sha256 of the canonical JSON of the non-volatile [path, size, sha256] triples>",
     "volatile_patterns": ["metrics.jsonl"],
     "files": [{"path": "cache/tokens.npy", "size": 4096, "sha256": "9f86d0...", "volatile": false}, ...]}

Paths are "/"-separated and sorted; the executor's own files (status, lease,
metadata, log, this manifest) are not listed.
"""

import dataclasses
import fnmatch
import hashlib
import json
import os
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.executor.lease import LEASE_FILE, MUTEX_FILE
from tootsie.executor.metadata import INFO_FILE
from tootsie.executor.status import STATUS_FILE
from tootsie.executor.steplog import LOG_FILE

MANIFEST_FILE = ".executor_manifest.json"
MANIFEST_FORMAT = 1
EXECUTOR_FILES = frozenset({STATUS_FILE, LEASE_FILE, MUTEX_FILE, INFO_FILE, LOG_FILE, MANIFEST_FILE})
"""The executor's own files in an output directory: never in a manifest, never staged, uploaded or deleted."""
CHUNK_BYTES = 1 << 20
HASH_THREADS = 4
"""Files hashed at once: hashlib releases the GIL on large buffers, so a few threads overlap reads and hashing."""


@dataclasses.dataclass(frozen=True)
class FileEntry:
    """One file of a step's output."""

    path: str
    """Relative to the output directory, "/"-separated."""
    size: int
    """Bytes."""
    sha256: str
    """Hex sha256 of the content."""
    volatile: bool = False
    """Whether a declared pattern matches it: listed, but left out of the digest and of comparisons."""


@dataclasses.dataclass(frozen=True)
class Manifest:
    """Every file of one step's output, with the patterns that mark some of them volatile."""

    files: tuple[FileEntry, ...]
    """Sorted by path."""
    volatile_patterns: tuple[str, ...] = ()
    """Glob patterns (fnmatch on the relative path) of files that may differ between reruns."""

    @property
    def compared(self) -> dict[str, FileEntry]:
        """The non-volatile entries by path: what the digest covers and comparisons look at."""
        return {entry.path: entry for entry in self.files if not entry.volatile}

    @property
    def digest(self) -> str:
        """Hex sha256 of the canonical JSON of the non-volatile (path, size, sha256) triples."""
        triples = [[entry.path, entry.size, entry.sha256] for entry in self.compared.values()]
        text = json.dumps(triples, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_json(self) -> dict[str, Any]:
        """The manifest file's content."""
        return {
            "format": MANIFEST_FORMAT,
            "digest": self.digest,
            "volatile_patterns": list(self.volatile_patterns),
            "files": [dataclasses.asdict(entry) for entry in self.files],
        }

    @classmethod
    def from_json(cls, payload: dict[str, Any], source: str) -> "Manifest":
        """Parse a manifest file's content; `source` names the file in errors."""
        try:
            if payload["format"] != MANIFEST_FORMAT:
                raise ValueError(f"format {payload['format']!r}, expected {MANIFEST_FORMAT}")
            files = tuple(
                FileEntry(str(f["path"]), int(f["size"]), str(f["sha256"]), bool(f["volatile"]))
                for f in payload["files"]
            )
            return cls(files, tuple(str(p) for p in payload["volatile_patterns"]))
        except (KeyError, TypeError, ValueError) as error:
            raise TootsieError(
                f"manifest {source} is malformed ({error!r}); rerun the step with --force to rewrite it"
            ) from None


TIMINGS_FILE = "timings.json"
"""A step's wall time (seconds, rates): the usual volatile output, listed in the manifest but never compared."""


def is_volatile(path: str, patterns: Iterable[str]) -> bool:
    """Whether the relative path `path` matches any of the glob `patterns` (or one matches its file name)."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def _sha256_local(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256_url(url: str) -> str:
    fs, path = storage.filesystem(url)
    digest = hashlib.sha256()
    with fs.open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _executor_temporary(name: str, skip: Collection[str]) -> bool:
    """Whether the top-level `name` is the temporary file of an atomic write of a skipped file.

    The lease heartbeat rewrites `.executor_lease.json` through `..executor_lease.json.<pid>.<hex>.tmp`
    (`jsonfile.write_json_atomic`) while the step runs and is hashed: such a file is never output.
    """
    return name.endswith(".tmp") and any(name.startswith(f".{kept}.") for kept in skip)


def list_files(directory: str, skip: Collection[str] = EXECUTOR_FILES) -> dict[str, int]:
    """Relative path -> size of every file under the local directory or URL `directory`, top-level `skip` left out.

    The temporary files of skipped files' atomic writes are left out too, and so is a file gone before its size
    was read.
    """
    if storage.is_remote(directory):
        fs, root = storage.filesystem(directory)
        root = root.rstrip("/")
        fs.invalidate_cache(root)
        found = fs.find(root, detail=True)
        return {
            path[len(root) + 1 :]: int(info["size"])
            for path, info in sorted(found.items())
            if path.startswith(root + "/") and path[len(root) + 1 :].split("/", 1)[0] not in skip
        }
    sizes = {}
    for base, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(base, name)
            relative = os.path.relpath(full, directory).replace(os.sep, "/")
            top = relative.split("/", 1)[0]
            if top in skip or _executor_temporary(top, skip) or os.path.islink(full):
                continue
            try:
                sizes[relative] = os.path.getsize(full)
            except FileNotFoundError:
                continue
    return dict(sorted(sizes.items()))


def build_manifest(
    directory: str, volatile: Sequence[str] = (), *, direct: str | None = None, direct_names: Collection[str] = ()
) -> Manifest:
    """Hash every file under `directory` (a local path or URL) into a manifest.

    A staged step writes its checkpoints straight to the store
    (`step.direct_outputs`): files under the top-level `direct_names` are
    then listed and hashed from the URL `direct`, the rest from `directory`.
    """
    sizes = {
        name: (directory, size) for name, size in list_files(directory, EXECUTOR_FILES | set(direct_names)).items()
    }
    if direct is not None:
        for name, size in list_files(direct).items():
            if name.split("/", 1)[0] in direct_names:
                sizes[name] = (direct, size)

    def entry(name: str) -> FileEntry:
        base, size = sizes[name]
        full = storage.join(base, name)
        sha = _sha256_url(full) if storage.is_remote(base) else _sha256_local(full)
        return FileEntry(name, size, sha, is_volatile(name, volatile))

    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        files = tuple(pool.map(entry, sorted(sizes)))
    return Manifest(files, tuple(volatile))


def write_manifest(directory: str, manifest: Manifest) -> None:
    """Atomically write `manifest` as `directory`'s manifest file (local or in object storage)."""
    storage.write_json(storage.join(directory, MANIFEST_FILE), manifest.to_json())


def read_manifest(directory: str) -> Manifest | None:
    """`directory`'s manifest, or None when it has none (a step finished before manifests existed)."""
    path = storage.join(directory, MANIFEST_FILE)
    payload = storage.read_json(path)
    return None if payload is None else Manifest.from_json(payload, path)


def differing(recorded: Manifest, fresh: Manifest) -> list[str]:
    """Sorted relative paths whose content differs, or that only one side has; volatile files on either side ignored."""
    old, new = recorded.compared, fresh.compared
    volatile = {e.path for e in recorded.files + fresh.files if e.volatile}
    names = (set(old) | set(new)) - volatile
    return sorted(n for n in names if n not in old or n not in new or old[n].sha256 != new[n].sha256)


def damage(directory: str, manifest: Manifest) -> list[str]:
    """What is wrong with the recorded files on disk, cheaply: missing ones and wrong sizes, one line each."""
    present = list_files(directory)
    problems = []
    for entry in manifest.files:
        size = present.get(entry.path)
        if size is None:
            problems.append(f"{entry.path}: missing")
        elif size != entry.size and not entry.volatile:
            problems.append(f"{entry.path}: {size} bytes, recorded {entry.size}")
    return problems


def digest_damage(directory: str, manifest: Manifest) -> list[str]:
    """Like `damage`, then re-hashes every non-volatile file that is present: changed content is named too."""
    problems = damage(directory, manifest)
    broken = {line.split(":", 1)[0] for line in problems}
    fresh = build_manifest(directory, manifest.volatile_patterns).compared
    for path, entry in manifest.compared.items():
        if path not in broken and path in fresh and fresh[path].sha256 != entry.sha256:
            problems.append(f"{path}: sha256 {fresh[path].sha256[:12]}, recorded {entry.sha256[:12]}")
    return problems
