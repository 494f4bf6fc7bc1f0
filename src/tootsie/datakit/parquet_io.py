"""Reading and writing document Parquet files (and .npy side arrays): atomic writes, streamed reads.

Every datakit stage exchanges documents as Parquet files with at least the
columns `id` (hex xxh3_128 of the text) and `text`. Writes go to a temporary
name and are renamed into place, so a half-written file is never read as done.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tootsie.errors import TootsieError


def temporary_path(path: Path) -> Path:
    """Where a file bound for `path` is written before its rename: hidden, and private to this process."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_table_atomic(table: pa.Table, path: Path) -> None:
    """Write `table` to `path` via a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def write_npy_atomic(array: np.ndarray, path: Path) -> None:
    """Write a .npy file (never pickled objects) via a temporary file and a rename."""
    tmp = temporary_path(path)
    with open(tmp, "wb") as handle:
        np.save(handle, array, allow_pickle=False)
    os.replace(tmp, path)


def parquet_files(directory: str | Path) -> list[Path]:
    """The finished Parquet files of a document directory (or the one file given), in a stable order."""
    root = Path(directory)
    if root.is_file() and root.suffix == ".parquet":
        return [root]
    if not root.is_dir():
        raise TootsieError(f"document directory not found: {root} (run the stage that produces it first)")
    files = sorted(p for p in root.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise TootsieError(f"no .parquet files in {root}: is this a document directory?")
    return files


def iter_batches(directory: str | Path, columns: list[str], batch_rows: int = 1024) -> Iterator[pa.RecordBatch]:
    """Stream record batches of `columns` from every Parquet file of `directory` (or from one file)."""
    for path in parquet_files(directory):
        parquet = pq.ParquetFile(path)
        missing = [c for c in columns if c not in parquet.schema_arrow.names]
        if missing:
            raise TootsieError(f"{path} lacks columns {missing}; it has {parquet.schema_arrow.names}")
        yield from parquet.iter_batches(batch_size=batch_rows, columns=columns)


def iter_texts(directory: str | Path, batch_rows: int = 1024) -> Iterator[list[str]]:
    """Stream the `text` column of a document directory as lists of strings."""
    for batch in iter_batches(directory, ["text"], batch_rows):
        yield batch.column("text").to_pylist()
