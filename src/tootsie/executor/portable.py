"""Paths that name steps, not machines: how a step's outputs mention its inputs and itself.

A step's function sees absolute paths (its output directory and its inputs'),
and those depend on the prefix, the machine, and whether the step runs in
place, in a staging directory or in `verify`'s scratch directory. Anything an
output records about where its inputs came from must not: the same step under
two prefixes must write the same bytes. While a step runs, the executor knows
every directory it may mention, each by its id `<name>-<hash>`; `portable`
turns a path inside one of them into `<name>-<hash>/<subpath>`, the path
relative to the prefix, and leaves any other path as it is (a file outside the
prefix is named by the hashed config already). Absolute locations belong in
the executor's unhashed metadata (`.executor_info.json`), never in outputs.

Example: running `demo/tokenize-7f077f7467e5` under `/runs`, whose input is
`demo/corpus-5ade71dc2641`::

    portable("/runs/demo/corpus-5ade71dc2641/docs.jsonl")  # "demo/corpus-5ade71dc2641/docs.jsonl"
    portable("/scratch/verify-1/demo/tokenize-7f077f7467e5")  # "demo/tokenize-7f077f7467e5" (its own output)
    portable("/home/me/evals/gsm8k.jsonl")                     # unchanged

Outside a running step (a CLI command run by hand) every path is unchanged.
Readers turn a recorded path back into one to open with `resolve_recorded`,
which joins a relative path to the prefix the reading step's directory sits in
(`step_prefix`, from its `.executor_info.json`).
"""

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tootsie import storage
from tootsie.executor.metadata import INFO_FILE

_places: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar("step_places", default=())


def _normal(path: str) -> str:
    text = os.fspath(path)
    return text.rstrip("/") if storage.is_remote(text) else os.path.normpath(os.path.abspath(text))


@contextlib.contextmanager
def step_places(places: Mapping[str, str]) -> Iterator[None]:
    """While the block runs, `portable` maps each directory in `places` to its relative name ("" for the prefix)."""
    ordered = sorted(((_normal(d), name) for d, name in places.items()), key=lambda item: -len(item[0]))
    token = _places.set(tuple(ordered))
    try:
        yield
    finally:
        _places.reset(token)


def portable(path: str | os.PathLike[str]) -> str:
    """`path` relative to the prefix when it lies in a directory the running step knows, else unchanged."""
    text = os.fspath(path)
    if not text:
        return text
    full = _normal(text)
    for directory, name in _places.get():
        if full == directory:
            return name
        if full.startswith(directory + "/"):
            rest = full[len(directory) + 1 :]
            return f"{name}/{rest}" if name else rest
    return text


def portable_tree(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with every string that is an absolute path or URL made `portable`."""
    if isinstance(value, str):
        return portable(value) if os.path.isabs(value) or storage.is_remote(value) else value
    if isinstance(value, dict):
        return {key: portable_tree(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable_tree(item) for item in value]
    return value


def step_prefix(directory: str | os.PathLike[str]) -> str | None:
    """The prefix holding the step output `directory` (`<prefix>/<name>-<hash>`), from its executor metadata.

    None when `directory` (local or a URL) has no `.executor_info.json`, or is not where its name says (renamed).
    """
    text = os.fspath(directory)
    location = text.rstrip("/") if storage.is_remote(text) else os.path.abspath(text)
    info = storage.read_json(storage.join(location, INFO_FILE)) or {}
    name, version = info.get("name"), info.get("hash")
    own = f"/{name}-{version}"
    if not (isinstance(name, str) and isinstance(version, str) and location.endswith(own)):
        return None
    return location[: -len(own)] or "/"


def resolve_recorded(value: str, directory: str | os.PathLike[str]) -> str:
    """A path that an output in step directory `directory` recorded, as a path to read.

    Absolute paths and URLs are returned as they are (older outputs, runs made by
    hand); a relative one is joined to the prefix `directory` sits in, else to
    the nearest local ancestor of `directory` that holds it, else returned as
    given (relative to the working directory, as a run by hand recorded it).
    """
    if not value or os.path.isabs(value) or storage.is_remote(value):
        return value
    prefix = step_prefix(directory)
    if prefix is not None:
        return storage.join(prefix, value)
    if not storage.is_remote(os.fspath(directory)):
        for ancestor in Path(os.path.abspath(directory)).parents:
            if (ancestor / value).exists():
                return str(ancestor / value)
    return value
