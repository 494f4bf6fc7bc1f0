"""Normalize raw records into Parquet documents with stable content ids.

Each record's text is NFC-normalized and checked against cheap guards (empty,
too large, pathological whitespace runs — the weekly update's multi-megabyte
whitespace runs that OOM'd tokenization), then given `id = xxh3_128(text)`.
Exact duplicates (same id) keep their first occurrence. Output: Parquet shards
`part-NNNNN.parquet` of about `shard_bytes` of text each, with columns `id`,
`text`, `source_id` (the record's original id), plus `stats.json`.

Example: two JSONL lines `{"text": "a\u0301"}` and `{"text": "á"}` normalize to
the same NFC text, hence the same id; the second counts as `exact_duplicate`.
"""

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tootsie.datakit.ids import content_id
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.readers import expand_inputs, read_records
from tootsie.datakit.stats import StageStats
from tootsie.jsonfile import write_json_atomic

DOCUMENT_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("source_id", pa.string())])


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
    if len(text.encode("utf-8")) > config.max_doc_bytes:
        return "too_large"
    if re.search(rf"\s{{{config.max_whitespace_run + 1}}}", text):
        return "whitespace_run"
    return None


def normalize(config: NormalizeConfig, output_path: str) -> StageStats:
    """Read every input record, keep the good unique ones, and write Parquet shards plus stats."""
    out = Path(output_path)
    stats = StageStats()
    seen: set[str] = set()
    shard: list[tuple[str, str, str]] = []
    shard_bytes = 0
    shard_index = 0
    exact_duplicates = 0

    def flush() -> None:
        nonlocal shard, shard_bytes, shard_index
        ids, texts, sources = zip(*shard) if shard else ((), (), ())
        table = pa.table({"id": list(ids), "text": list(texts), "source_id": list(sources)}, schema=DOCUMENT_SCHEMA)
        write_table_atomic(table, out / f"part-{shard_index:05d}.parquet")
        shard, shard_bytes, shard_index = [], 0, shard_index + 1

    for path in expand_inputs(config.inputs):
        for source_id, raw_text in read_records(path, config.text_field, config.id_field, stats.reject_input):
            stats.input_docs += 1
            if raw_text is None:
                stats.reject("missing_text")
                continue
            text = unicodedata.normalize("NFC", raw_text)
            reason = rejection_reason(text, config)
            if reason is not None:
                stats.reject(reason)
                continue
            doc_id = content_id(text)
            if doc_id in seen:
                exact_duplicates += 1
                stats.reject("exact_duplicate")
                continue
            seen.add(doc_id)
            shard.append((doc_id, text, source_id))
            shard_bytes += len(text)
            stats.output_docs += 1
            if shard_bytes >= config.shard_bytes:
                flush()
    if shard or shard_index == 0:
        flush()
    write_json_atomic(out / "stats.json", {**stats.to_json(), "exact_duplicates": exact_duplicates, "shards": shard_index})
    return stats
