"""Read raw records from JSONL (plain, .gz, .zst), Parquet and text files, local or behind fsspec URLs.

Readers never raise on one bad record: they yield `(record_id, text)` for good
records and `(record_id, None, reason)`-style rejections through a callback, so
a corrupt line costs one count in the stats, not the job.
"""

import gzip
import io
import json
import posixpath
from collections.abc import Callable, Iterator

import fsspec
import pyarrow.parquet as pq

from tootsie.errors import TootsieError
from tootsie.executor.portable import portable_tree

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz")
TEXT_SUFFIXES = (".txt", ".md")
Reject = Callable[[str], None]


def expand_inputs(
    inputs: tuple[str, ...],
    accept: Callable[[str], bool] | None = None,
    expected: tuple[str, ...] = JSONL_SUFFIXES + (".parquet",) + TEXT_SUFFIXES,
) -> list[str]:
    """Resolve files, directories (recursively) and globs, local or fsspec URLs, to a list of readable files.

    In input order, then by path relative to the input (`expand_named_inputs`); `accept` says which files a stage
    reads (default: the record formats below); `expected` names them in errors.
    """
    return [path for path, _ in expand_named_inputs(inputs, accept, expected)]


def expand_named_inputs(
    inputs: tuple[str, ...],
    accept: Callable[[str], bool] | None = None,
    expected: tuple[str, ...] = JSONL_SUFFIXES + (".parquet",) + TEXT_SUFFIXES,
) -> list[tuple[str, str]]:
    """`(path, name)` for every readable file of `inputs`, in input order, then by path relative to the input.

    The order depends on the config alone, never on where the inputs live: sorting absolute paths would put a
    step's output (under the prefix) before or after a fixed input depending on the prefix, and a stage that keeps
    the first copy of a document would keep another one. A file listed by two inputs comes once, at its first.
    `name` is the input as given (made `portable`: a step's output is `<name>-<hash>/...`) joined with the file's
    path relative to it: a directory's `part.jsonl` is `<input>/part.jsonl`, a file input is itself, a glob's match
    is relative to the glob's directory. Example: `("pages", "/runs/demo/crawl-1a2b/")` under the prefix `/runs`
    gives `pages/a.html`, `pages/b/c.html`, then `demo/crawl-1a2b/x.html`.
    """
    accept = accept or _is_supported
    files: dict[str, str] = {}
    for item in inputs:
        given = str(item)
        fs, path = fsspec.core.url_to_fs(given)
        magic = fsspec.core.has_magic(path)
        matches = fs.glob(path) if magic else ([path] if fs.exists(path) else [])
        if not matches:
            raise TootsieError(f"input not found: {item}")
        base, given_base = _glob_base(path, given) if magic else (path, given.rstrip("/") or given)
        found: list[str] = []
        for match in matches:
            if fs.isdir(match):
                found += [f for f in fs.find(match) if accept(f) and not posixpath.basename(f).startswith(".")]
            elif accept(match):
                found.append(match)
            else:
                raise TootsieError(f"unsupported input file {match}: expected one of {expected}")
        named = sorted((_relative(f, base), f) for f in found)
        for relative, f in named:
            files.setdefault(_as_url(fs, f, given), _input_name(given_base, relative))
    if not files:
        raise TootsieError(f"no input files ({', '.join(expected)}) found in {list(inputs)}")
    return list(files.items())


def _glob_base(path: str, given: str) -> tuple[str, str]:
    """The directory a glob's matches are named from: its components before the first with a wildcard."""
    parts = path.split("/")
    first = next(i for i, part in enumerate(parts) if fsspec.core.has_magic(part))
    tail = len(parts) - first
    return "/".join(parts[:first]), "/".join(given.split("/")[:-tail])


def _relative(path: str, base: str) -> str:
    """`path` relative to `base` ("" for `base` itself)."""
    if path == base:
        return ""
    prefix = base.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else posixpath.basename(path)


def _input_name(given_base: str, relative: str) -> str:
    """The input as given joined with a path relative to it, portable when it is absolute (a step's output)."""
    if not relative:
        name = given_base
    elif not given_base:
        name = relative
    else:
        name = given_base.rstrip("/") + "/" + relative
    return str(portable_tree(name))


def _as_url(fs: fsspec.AbstractFileSystem, path: str, given: str) -> str:
    """A local path stays a path; a remote one keeps its protocol so workers can open it."""
    return path if "://" not in given else fs.unstrip_protocol(path)


def _is_supported(path: str) -> bool:
    name = posixpath.basename(path)
    return name.endswith(JSONL_SUFFIXES) or name.endswith(".parquet") or name.endswith(TEXT_SUFFIXES)


def open_decompressed(raw: io.BufferedIOBase, name: str) -> io.BufferedIOBase:
    """`raw` read through gzip or zstd when `name` says it is compressed."""
    if name.endswith(".gz"):
        return gzip.open(raw, "rb")
    if name.endswith(".zst"):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))
    return raw


def read_records(path: str, text_field: str, id_field: str, reject: Reject) -> Iterator[tuple[str, str]]:
    """Yield `(original_id, text)` from one file (a local path or an fsspec URL); bad records go to `reject(reason)`."""
    name = posixpath.basename(str(path))
    with fsspec.open(str(path), "rb") as raw:
        if name.endswith(".parquet"):
            yield from _read_parquet(raw, name, text_field, id_field)
        elif name.endswith(TEXT_SUFFIXES):
            yield from _read_text_file(raw, name, reject)
        else:
            yield from _read_jsonl(open_decompressed(raw, name), name, text_field, id_field, reject)


def _read_jsonl(
    handle: io.BufferedIOBase, name: str, text_field: str, id_field: str, reject: Reject
) -> Iterator[tuple[str, str]]:
    for line_number, raw in enumerate(handle, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            reject("invalid_utf8")
            continue
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            reject("broken_json")
            continue
        text = record.get(text_field) if isinstance(record, dict) else None
        if not isinstance(text, str):
            reject("missing_text")
            continue
        yield str(record.get(id_field, f"{name}:{line_number}")), text


def _read_parquet(handle: io.BufferedIOBase, name: str, text_field: str, id_field: str) -> Iterator[tuple[str, str]]:
    parquet = pq.ParquetFile(handle)
    names = parquet.schema_arrow.names
    if text_field not in names:
        raise TootsieError(f"{name} has no column {text_field!r} (columns: {names}); pass --text-field")
    columns = [text_field] + ([id_field] if id_field in names else [])
    row = 0
    for batch in parquet.iter_batches(columns=columns):
        texts = batch.column(text_field).to_pylist()
        ids = batch.column(id_field).to_pylist() if id_field in names else [None] * len(texts)
        for text, original in zip(texts, ids):
            row += 1
            yield (str(original) if original is not None else f"{name}:{row}"), text


def _read_text_file(handle: io.BufferedIOBase, name: str, reject: Reject) -> Iterator[tuple[str, str]]:
    try:
        yield name, handle.read().decode("utf-8")
    except UnicodeDecodeError:
        reject("invalid_utf8")
