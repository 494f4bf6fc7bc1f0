"""Small JSON files written atomically and read back with errors that say which file is bad.

Status, lease, metadata and run-record files are all read by other processes
while they may be rewritten, so every write goes to a temporary file in the same
directory and is moved into place with `os.replace`: a reader sees the old file
or the new one, never half of one.
"""

import dataclasses
import json
import os
import typing
import uuid
from pathlib import Path
from typing import Any, TypeVar

from tootsie.errors import TootsieError

R = TypeVar("R")


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> None:
    """Write `payload` as JSON to `path` via a temporary file and `os.replace`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def read_json(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when the file does not exist."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise TootsieError(
            f"{path} is not valid JSON ({error}); it was edited or damaged by hand, "
            "delete it to let the executor rewrite it"
        ) from None
    if not isinstance(payload, dict):
        raise TootsieError(
            f"{path} holds a {type(payload).__name__}, not a JSON object; delete it to let the executor rewrite it"
        )
    return payload


def read_json_format(path: str | os.PathLike[str], expected: str, what: str, fix: str) -> dict[str, Any]:
    """The JSON object in `path`, which must exist and carry `"format": expected` (a file tootsie wrote).

    `what` names the kind of file and `fix` says how to make one, for the errors.
    """
    payload = read_json(path)
    if payload is None:
        raise TootsieError(f"{what} not found: {path}; {fix}")
    if payload.get("format") != expected:
        raise TootsieError(f"{path} is not a {what} (format {payload.get('format')!r}, expected {expected!r}); {fix}")
    return payload


def record_from_json(cls: type[R], payload: dict[str, Any], what: str, path: object, fix: str) -> R:
    """The frozen dataclass `cls` from a JSON object, each field through its declared type (`int`, `float`, an enum...).

    A missing or unconvertible field is an error naming the file (`what` `path`) and saying `fix`.
    """
    hints = typing.get_type_hints(cls)
    try:
        return cls(**{field.name: hints[field.name](payload[field.name]) for field in dataclasses.fields(cls)})
    except (KeyError, TypeError, ValueError) as error:
        raise TootsieError(f"{what} {path} is malformed ({error!r}); {fix}") from None
