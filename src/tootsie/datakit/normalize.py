"""Normalize raw records into Parquet documents with stable content ids.

Map (one shard per input file, in parallel, resumable): each record's text is
NFC-normalized and checked against cheap guards (empty, too large,
pathological whitespace runs — the weekly update's multi-megabyte whitespace
runs that OOM'd tokenization), then given `id = xxh3_128(text)`. Bad records
(broken JSON, invalid UTF-8, a missing text field) are counted by reason, never
fatal. Kept documents go to chunk files of about `shard_bytes` of text.

Reduce (in-process): the ids of all chunks, in input order, are deduplicated
with a sort (16 bytes a document, so the corpus text is never in memory); the
first occurrence of each text is kept and the chunks are rewritten as the final
`part-NNNNN.parquet` shards, then `stats.json` is written last: `{"input_docs",
"output_docs", "exact_duplicates", "rejected", "shards", "failed_inputs"}` and
the shared `total` / `kept` / `dropped` (`tootsie.datakit.stats`), in which the
exact duplicates are dropped as `exact_duplicate`.

Example: two JSONL lines `{"text": "a\\u0301"}` and `{"text": "á"}` normalize to
the same NFC text, hence the same id; the second counts as an exact duplicate.
"""

import re
import shutil
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, merge_counts
from tootsie.datakit.ids import content_id
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.readers import expand_inputs, read_records
from tootsie.datakit.stats import StageStats, finish_stage

DOCUMENT_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("source_id", pa.string())])
WORK_DIR = ".normalize"


@dataclass(frozen=True)
class NormalizeConfig:
    """Inputs and guards of the normalize stage."""

    inputs: tuple[str, ...]
    """Files, directories or globs of .jsonl[.gz|.zst], .parquet, .txt/.md."""
    text_field: str = "text"
    """Name of the text field in JSONL records and Parquet columns."""
    id_field: str = "id"
    """Name of the original-id field, kept as `source_id`."""
    max_doc_bytes: int = 10_000_000
    """Documents larger than this (UTF-8 bytes) are rejected as `too_large`."""
    max_whitespace_run: int = 10_000
    """A run of more whitespace characters than this rejects the document as `whitespace_run`."""
    shard_bytes: int = 64_000_000
    """Target bytes of text per output shard."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Parallelism, retries and failure budget (not hashed)."""

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError("inputs is empty: give at least one file, directory or glob")
        for name in ("max_doc_bytes", "max_whitespace_run", "shard_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def rejection_reason(text: str, config: NormalizeConfig) -> str | None:
    """Why a normalized text is dropped, or None to keep it."""
    if not text.strip():
        return "empty"
    if len(text) > config.max_doc_bytes or len(text.encode("utf-8")) > config.max_doc_bytes:
        return "too_large"
    if re.search(rf"\s{{{config.max_whitespace_run + 1}}}", text):
        return "whitespace_run"
    return None


def normalize_file(task: ShardTask, config: NormalizeConfig) -> dict[str, object]:
    """Map: normalize one input file into chunk files under `task.output_dir`; return its counts."""
    out = Path(task.output_dir)
    stats = StageStats()
    rows: list[tuple[str, str, str]] = []
    chunk_bytes, chunks = 0, 0

    def flush() -> None:
        nonlocal rows, chunk_bytes, chunks
        ids, texts, sources = (list(column) for column in zip(*rows)) if rows else ([], [], [])
        write_table_atomic(
            pa.table({"id": ids, "text": texts, "source_id": sources}, schema=DOCUMENT_SCHEMA),
            out / f"chunk-{chunks:05d}.parquet",
        )
        rows, chunk_bytes, chunks = [], 0, chunks + 1

    for source_id, raw_text in read_records(task.inputs[0], config.text_field, config.id_field, stats.drop):
        if raw_text is None:
            stats.drop("missing_text")
            continue
        text = unicodedata.normalize("NFC", raw_text)
        reason = rejection_reason(text, config)
        if reason is not None:
            stats.drop(reason)
            continue
        rows.append((content_id(text), text, source_id))
        chunk_bytes += len(text)
        stats.keep()
        if chunk_bytes >= config.shard_bytes:
            flush()
    if rows or chunks == 0:
        flush()
    return {**stats.to_json(), "chunks": chunks}


def _chunk_files(tasks: list[ShardTask]) -> list[Path]:
    return [chunk for task in tasks for chunk in sorted(Path(task.output_dir).glob("chunk-*.parquet"))]


def first_occurrences(ids: np.ndarray) -> np.ndarray:
    """Boolean mask that is True at the first occurrence of every distinct id."""
    keep = np.zeros(len(ids), dtype=bool)
    if len(ids):
        keep[np.unique(ids, return_index=True)[1]] = True
    return keep


def normalize(config: NormalizeConfig, output_path: str) -> dict[str, object]:
    """Normalize every input into deduplicated `part-NNNNN.parquet` shards plus `stats.json`; return the stats."""
    out = Path(output_path)
    work = out / WORK_DIR
    files = expand_inputs(config.inputs)
    tasks = [
        ShardTask(name=f"input-{i:05d}", inputs=(str(path),), output_dir=str(work / f"input-{i:05d}"))
        for i, path in enumerate(files)
    ]
    results = map_shards(normalize_file, config, tasks, work / "done", config.engine, label="normalize")
    chunks = _chunk_files([t for t in tasks if t.name in results.stats])
    ids = (
        np.concatenate(
            [pq.read_table(c, columns=["id"]).column("id").to_numpy(zero_copy_only=False).astype("S32") for c in chunks]
        )
        if chunks
        else np.zeros(0, "S32")
    )
    keep = first_occurrences(ids)
    start = 0
    for index, chunk in enumerate(chunks):
        table = pq.read_table(chunk)
        write_table_atomic(
            table.filter(pa.array(keep[start : start + table.num_rows])), out / f"part-{index:05d}.parquet"
        )
        start += table.num_rows
    for stale in sorted(out.glob("part-*.parquet"))[len(chunks) :]:
        stale.unlink()
    counts = StageStats.from_json(merge_counts(list(results.stats.values())))
    rejected = dict(sorted(counts.dropped.items()))
    duplicates = int(len(keep) - keep.sum())
    counts.kept -= duplicates
    counts.dropped["exact_duplicate"] += duplicates
    details = {
        "input_docs": counts.total,
        "output_docs": counts.kept,
        "exact_duplicates": duplicates,
        "rejected": rejected,
        "shards": len(chunks),
        "failed_inputs": results.failed,
    }
    stats = finish_stage(out, counts, details)
    shutil.rmtree(work)  # finished: the chunks are now parts; an interrupted run keeps them to resume
    return stats
