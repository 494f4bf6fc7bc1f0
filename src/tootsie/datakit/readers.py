"""Read raw records from JSONL (plain, .gz, .zst), Parquet and text files.

Readers never raise on one bad record: they yield `(record_id, text)` for good
records and `(record_id, None, reason)`-style rejections through a callback, so
a corrupt line costs one count in the stats, not the job.
"""

import glob
import gzip
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq

from tootsie.errors import TootsieError

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz")
TEXT_SUFFIXES = (".txt", ".md")
Reject = Callable[[str], None]


def expand_inputs(inputs: tuple[str, ...]) -> list[Path]:
    """Resolve files, directories (recursively) and globs to a sorted list of readable files."""
    files: set[Path] = set()
    for item in inputs:
        matches = [Path(m) for m in glob.glob(item, recursive=True)] or [Path(item)]
        for match in matches:
            if match.is_dir():
                files.update(p for p in match.rglob("*") if p.is_file() and _is_supported(p) and not p.name.startswith("."))
            elif match.is_file():
                if not _is_supported(match):
                    raise TootsieError(f"unsupported input file {match}: expected one of {JSONL_SUFFIXES + ('.parquet',) + TEXT_SUFFIXES}")
                files.add(match)
            else:
                raise TootsieError(f"input not found: {item}")
    if not files:
        raise TootsieError(f"no input files found in {list(inputs)}")
    return sorted(files)


def _is_supported(path: Path) -> bool:
    name = path.name
    return name.endswith(JSONL_SUFFIXES) or name.endswith(".parquet") or name.endswith(TEXT_SUFFIXES)


def _open_binary(path: Path) -> io.BufferedIOBase:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.name.endswith(".zst"):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")))
    return open(path, "rb")


def read_records(path: Path, text_field: str, id_field: str, reject: Reject) -> Iterator[tuple[str, str]]:
    """Yield `(original_id, text)` from one file; bad records go to `reject(reason)`."""
    if path.name.endswith(".parquet"):
        yield from _read_parquet(path, text_field, id_field)
    elif path.name.endswith(TEXT_SUFFIXES):
        yield from _read_text_file(path, reject)
    else:
        yield from _read_jsonl(path, text_field, id_field, reject)


def _read_jsonl(path: Path, text_field: str, id_field: str, reject: Reject) -> Iterator[tuple[str, str]]:
    with _open_binary(path) as handle:
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
            yield str(record.get(id_field, f"{path.name}:{line_number}")), text


def _read_parquet(path: Path, text_field: str, id_field: str) -> Iterator[tuple[str, str]]:
    parquet = pq.ParquetFile(path)
    names = parquet.schema_arrow.names
    if text_field not in names:
        raise TootsieError(f"{path} has no column {text_field!r} (columns: {names}); pass --text-field")
    columns = [text_field] + ([id_field] if id_field in names else [])
    row = 0
    for batch in parquet.iter_batches(columns=columns):
        texts = batch.column(text_field).to_pylist()
        ids = batch.column(id_field).to_pylist() if id_field in names else [None] * len(texts)
        for text, original in zip(texts, ids):
            row += 1
            yield (str(original) if original is not None else f"{path.name}:{row}"), text


def _read_text_file(path: Path, reject: Reject) -> Iterator[tuple[str, str]]:
    try:
        yield path.name, path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        reject("invalid_utf8")
