"""Where outputs live: a local directory or an fsspec URL (s3://, gs://, ...), behind one small set of helpers.

A location is a plain `str`, either a local path or a URL of an object store,
and every helper here answers which one it is (`is_remote`), so a caller never
asks again: reading and writing files (`read_bytes`, `write_bytes`, `read_json`),
and directories (`exists`, `list_dirs`, `rmtree`, `list_tree`). The executor
keeps its own files (status, lease, metadata, step log, run record) there
through these helpers, checkpoints (`tootsie.train.checkpoint`) theirs, and
the executor moves whole output directories between the store
and local disk with `upload_tree` / `download_tree` (see `staging`). Local
paths keep the old behaviour exactly (atomic writes through a temporary file
and `os.replace`); in an object store one PUT is already atomic: a reader sees
the old object or the new one.

Which store a URL reaches is fsspec's business: `s3://` needs s3fs (the `s3`
extra), `gs://` gcsfs; endpoints and credentials come from their usual
settings (AWS_* environment variables, `FSSPEC_S3_ENDPOINT_URL`, ...).

Example: `join("s3://bucket/runs", "demo/tokenize-abc")` is
`"s3://bucket/runs/demo/tokenize-abc"`, and `join("/tmp/out", ...)` is the
`os.path.join`.
"""

import json
import os
import re
import shutil
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any

import fsspec

from tootsie.errors import TootsieError
from tootsie.extras import install_hint
from tootsie.jsonfile import read_json as read_local_json
from tootsie.jsonfile import write_json_atomic

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
LOCAL_SCHEMES = ("file", "local")
INSTALL_HINTS = {
    "s3": install_hint("s3"),
    "s3a": install_hint("s3"),
    "gs": "pip install gcsfs",
    "gcs": "pip install gcsfs",
}


def scheme_of(path: str) -> str | None:
    """The URL scheme of `path` ("s3", "gs", "memory", ...), or None for a plain local path."""
    match = _URL.match(path)
    return match.group(1).lower() if match else None


def is_remote(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is an fsspec URL of a store other than the local disk (file:// counts as local)."""
    scheme = scheme_of(os.fspath(path))
    return scheme is not None and scheme not in LOCAL_SCHEMES


def normalize_prefix(prefix: str | os.PathLike[str]) -> str:
    """A URL without its trailing slash, or an absolute local path (a file:// URL becomes its path)."""
    text = os.fspath(prefix)
    if is_remote(text):
        return text.rstrip("/")
    scheme = scheme_of(text)
    if scheme is not None:
        text = text[len(scheme) + 3 :]
    return os.path.abspath(text)


def join(base: str, *parts: str) -> str:
    """`base` and `parts` joined with "/" for a URL, with `os.path.join` for a local path."""
    if is_remote(base):
        return "/".join([base.rstrip("/"), *(part.strip("/") for part in parts if part)])
    return os.path.join(base, *parts)


def filesystem(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem serving `url` and the path inside it; a missing backend is a TootsieError."""
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as error:
        hint = INSTALL_HINTS.get(scheme_of(url) or "", "install the fsspec backend for this scheme")
        raise TootsieError(f"{url!r} needs an fsspec backend that is not installed ({error}); {hint}") from None
    except ValueError as error:
        raise TootsieError(
            f"{url!r} is not a URL fsspec knows ({error}); use s3://bucket/path, gs://bucket/path or a local directory"
        ) from None


def read_bytes(path: str) -> bytes | None:
    """The content of the file or object at `path`, or None when there is none."""
    try:
        if not is_remote(path):
            return Path(path).read_bytes()
        fs, inner = filesystem(path)
        return fs.cat_file(inner)
    except FileNotFoundError:
        return None


def write_bytes(path: str, data: bytes) -> None:
    """Write `data` to `path` atomically: one PUT in an object store, a temporary file and `os.replace` locally."""
    if is_remote(path):
        fs, inner = filesystem(path)
        fs.pipe_file(inner, data)
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def remove(path: str) -> None:
    """Delete the file or object at `path`; nothing happens when it is already gone."""
    try:
        if is_remote(path):
            fs, inner = filesystem(path)
            fs.rm_file(inner)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return


def read_json(path: str) -> dict[str, Any] | None:
    """The JSON object at `path` (local or remote), or None when there is none; a damaged file names itself."""
    if not is_remote(path):
        return read_local_json(path)
    data = read_bytes(path)
    if data is None:
        return None
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TootsieError(
            f"{path} is not valid JSON ({error});"
            " it was edited or damaged by hand, delete it to let the executor rewrite it"
        ) from None
    if not isinstance(payload, dict):
        raise TootsieError(
            f"{path} holds a {type(payload).__name__}, not a JSON object; delete it to let the executor rewrite it"
        )
    return payload


def write_json(path: str, payload: Any) -> None:
    """Write `payload` as JSON (indented, sorted keys) to `path` atomically, locally or in an object store."""
    if not is_remote(path):
        write_json_atomic(path, payload)
        return
    write_bytes(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def append_bytes(path: str, data: bytes) -> None:
    """Append `data` to the file at `path`; in an object store, which cannot append, by rewriting the object.

    Only the holder of a step's lease appends to its files, so the
    read-and-rewrite never races another writer.
    """
    if not is_remote(path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as handle:
            handle.write(data)
        return
    write_bytes(path, (read_bytes(path) or b"") + data)


def exists(path: str) -> bool:
    """Whether a file, object or directory exists at `path`."""
    if not is_remote(path):
        return os.path.exists(path)
    fs, inner = filesystem(path)
    return fs.exists(inner)


def list_dirs(path: str) -> list[str]:
    """Names of the directories directly under `path` (read fresh from an object store); [] when it is none."""
    if not is_remote(path):
        return sorted(entry.name for entry in os.scandir(path) if entry.is_dir()) if os.path.isdir(path) else []
    fs, inner = filesystem(path)
    fs.invalidate_cache(inner)
    if not fs.isdir(inner):
        return []
    entries = fs.ls(inner, detail=True)
    return sorted(entry["name"].rstrip("/").rsplit("/", 1)[-1] for entry in entries if entry["type"] == "directory")


def rmtree(path: str) -> None:
    """Delete the directory `path` and everything under it; nothing happens when it is already gone.

    A local directory is first renamed to a hidden sibling, so it disappears in one step even if the
    deletion is cut short; an object store has no such step, so delete its marker files first.
    """
    if is_remote(path):
        fs, inner = filesystem(path)
        fs.invalidate_cache(inner)
        if fs.exists(inner):
            fs.rm(inner, recursive=True)
        return
    if not os.path.exists(path):
        return
    base = os.path.normpath(path)
    hidden = os.path.join(
        os.path.dirname(base), f".deleted-{os.path.basename(base)}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    )
    os.replace(base, hidden)
    shutil.rmtree(hidden)


def makedirs(path: str) -> None:
    """Create the local directory `path` (and its parents); object stores have no directories, so a URL is a no-op."""
    if not is_remote(path):
        os.makedirs(path, exist_ok=True)


def list_tree(url: str) -> list[str]:
    """Paths (relative, "/"-separated, sorted) of every object under the directory `url`, read fresh from the store."""
    fs, root = filesystem(url)
    root = root.rstrip("/")
    fs.invalidate_cache(root)
    return sorted(path[len(root) + 1 :] for path in fs.find(root) if path.startswith(root + "/"))


def _top(name: str) -> str:
    """The top-level component of a "/"-separated relative path (`checkpoints` of `checkpoints/step-1/state.json`)."""
    return name.split("/", 1)[0]


def download_tree(url: str, local: str, *, skip: Collection[str] = ()) -> None:
    """Copy every object under `url` into the local directory `local`, leaving out top-level names in `skip`."""
    fs, root = filesystem(url)
    names = [name for name in list_tree(url) if _top(name) not in skip]
    os.makedirs(local, exist_ok=True)
    for name in names:
        os.makedirs(os.path.dirname(os.path.join(local, name)), exist_ok=True)
    if names:
        fs.get([f"{root.rstrip('/')}/{name}" for name in names], [os.path.join(local, name) for name in names])


def upload_tree(local: str, url: str, *, skip: Collection[str] = ()) -> None:
    """Make the objects under `url` equal the files under `local`, except the top-level names in `skip`.

    Files go up one at a time, oldest first, so a file written after another
    (a shard's done marker after its data) never reaches the store before it:
    a reader of a half-finished upload sees a prefix of the writer's history.
    Objects with no local file left (a temporary checkpoint the step deleted)
    are removed afterwards.
    """
    fs, root = filesystem(url)
    root = root.rstrip("/")
    base = Path(local)
    files = [path for path in base.rglob("*") if path.is_file()]
    files.sort(key=lambda path: (path.stat().st_mtime_ns, str(path)))
    sent = set()
    for path in files:
        name = path.relative_to(base).as_posix()
        if _top(name) in skip:
            continue
        fs.put_file(str(path), f"{root}/{name}")
        sent.add(name)
    for name in list_tree(url):
        if name not in sent and _top(name) not in skip:
            fs.rm_file(f"{root}/{name}")
