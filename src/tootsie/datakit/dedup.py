"""Deduplication attributes: exact document, exact paragraph and MinHash-LSH fuzzy duplicates.

Documents are never rewritten: for each document shard `part-NNNNN.parquet` of
`config.input`, the stage writes `<output>/part-NNNNN.parquet` with the same rows
in the same order and the columns

- `id`: the document's id;
- `exact_duplicate`: an earlier document (shard order, then row order) has the same `id`;
- `fuzzy_duplicate`: the document is in a MinHash-LSH cluster whose first document is another one;
- `fuzzy_cluster`: global ordinal (row number over all shards in order) of the
  cluster's first document, -1 when the document is in no cluster;
- `duplicate_paragraph_spans`: `[start, end)` code-point offsets of the
  paragraphs already seen earlier in the corpus (or earlier in the same document);
- `duplicate_paragraph_fraction`: characters in those spans / characters in the document.

Consolidate then drops on `exact_duplicate` / `fuzzy_duplicate` and cuts the spans.

Paragraphs are the text between blank lines (lines holding only whitespace),
trimmed of surrounding whitespace; whitespace-only paragraphs are ignored. A
paragraph is identified by the xxh3_128 of its trimmed text.

Exact duplicates are left out of LSH (they are already marked, and ten thousand
copies of one page would make one huge bucket): they get `fuzzy_duplicate`
False and the `fuzzy_cluster` of the document they copy. So `exact_duplicates`
and `fuzzy_duplicates` count disjoint documents. A document without words has
no signature and is never a fuzzy duplicate.

How it runs: a map over shards (`map_shards`: parallel, retried, resumable)
writes per-shard arrays under `<output>/.dedup/` (id hashes, paragraph hashes
and spans, signatures, band keys); a reduce in this process finds first
occurrences by sorting hashes, builds LSH clusters band by band (see
`minhash`), and writes the attribute shards and `stats.json`:
`{"docs", "exact_duplicates", "fuzzy_duplicates", "fuzzy_clusters",
"paragraphs", "duplicate_paragraphs", "duplicate_paragraph_chars",
"candidate_pairs", "merged_pairs", "lsh_index_bytes", "shards",
"failed_shards"}` and the shared `total` / `kept` / `dropped`
(`tootsie.datakit.stats`: what consolidate drops on the two duplicate
columns, `exact_duplicate` and `fuzzy_duplicate`), which is also `dedup`'s
return value. Every output is a
function of the input and the hashed config, so a rerun after a kill writes the
same bytes; a finished output (stats.json without failed shards) is returned as is.

Example: shards `[A, B]` and `[A, B']` where B' is B with two words changed
give attribute rows `exact_duplicate` [F, F] / [T, F] and `fuzzy_duplicate`
[F, F] / [F, T], with B' in `fuzzy_cluster` 1 (B's ordinal).
"""

import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from jaxtyping import Bool, Int64

from tootsie.datakit.consolidate import AttributeFilter
from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, merge_counts
from tootsie.datakit.minhash import MinHashConfig, is_empty, lsh_clusters
from tootsie.datakit.parquet_io import parquet_files, write_npy_atomic, write_table_atomic
from tootsie.datakit.stats import STATS_FILE, StageStats, finish_stage
from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json

WORK_DIR = ".dedup"
BATCH_ROWS = 1024  # documents hashed per signature batch: enough to amortize NumPy calls, small enough to bound memory
DOC_DTYPE = np.dtype([("id_hi", "<u8"), ("id_lo", "<u8"), ("chars", "<i8"), ("empty", "?")])
PARAGRAPH_DTYPE = np.dtype([("hash_hi", "<u8"), ("hash_lo", "<u8"), ("row", "<i8"), ("start", "<i8"), ("end", "<i8")])
ATTRIBUTE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("exact_duplicate", pa.bool_()),
        ("fuzzy_duplicate", pa.bool_()),
        ("fuzzy_cluster", pa.int64()),
        ("duplicate_paragraph_spans", pa.list_(pa.list_(pa.int64()))),
        ("duplicate_paragraph_fraction", pa.float64()),
    ]
)
_BLANK_LINES = re.compile(r"\n[^\S\n]*\n(?:[^\S\n]*\n)*")


@dataclass(frozen=True)
class DedupConfig:
    """Which documents to deduplicate and which kinds of duplicates to look for."""

    input: str
    """A document directory (Parquet shards with `id` and `text`)."""
    fuzzy: bool = True
    """Find near-duplicate documents with MinHash-LSH."""
    threshold: float | None = 0.8
    """Minimum estimated Jaccard for an LSH candidate pair to be merged; None merges every candidate pair."""
    minhash: MinHashConfig = field(default_factory=MinHashConfig)
    """Shingles, permutations and bands of the MinHash signatures."""
    paragraphs: bool = True
    """Mark paragraphs seen earlier in the corpus."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Parallelism, retries and failure budget (not hashed)."""

    def __post_init__(self) -> None:
        if not self.input:
            raise ValueError("DedupConfig.input is empty; give a document directory (the output of normalize)")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(
                f"DedupConfig.threshold must be in [0, 1] or None, got {self.threshold=};"
                " 0.8 is the usual near-duplicate bar"
            )


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """`[start, end)` code-point spans of the non-blank paragraphs of `text`, trimmed of surrounding whitespace."""
    spans = []
    start = 0
    for end, next_start in [(m.start(), m.end()) for m in _BLANK_LINES.finditer(text)] + [(len(text), len(text))]:
        chunk = text[start:end]
        stripped = chunk.strip()
        if stripped:
            left = start + len(chunk) - len(chunk.lstrip())
            spans.append((left, left + len(stripped)))
        start = next_start
    return spans


def _hash128(data: bytes) -> tuple[int, int]:
    value = xxhash.xxh3_128_intdigest(data)
    return value >> 64, value & 0xFFFFFFFFFFFFFFFF


def _load(work: Path, shard: str, kind: str, mmap: bool = False) -> np.ndarray:
    return np.load(work / f"{shard}.{kind}.npy", mmap_mode="r" if mmap else None, allow_pickle=False)


def dedup_shard(task: ShardTask, config: DedupConfig) -> dict[str, int]:
    """Hash one shard's ids, paragraphs and MinHash signatures into `<work>/<shard>.*.npy`; return counts."""
    work = Path(task.output_dir)
    hasher = config.minhash.build()
    docs, paragraphs, signatures, row = [], [], [], 0
    for batch in pq.ParquetFile(task.inputs[0]).iter_batches(batch_size=BATCH_ROWS, columns=["id", "text"]):
        if batch.column("id").null_count or batch.column("text").null_count:
            raise TootsieError(
                f"{task.inputs[0]} has null ids or texts near row {row};"
                " dedup reads document directories written by normalize, rerun it on the raw input"
            )
        texts = batch.column("text").to_pylist()
        batch_docs = np.zeros(len(texts), dtype=DOC_DTYPE)
        batch_docs["id_hi"], batch_docs["id_lo"] = (
            np.array([_hash128(i.encode("utf-8")) for i in batch.column("id").to_pylist()], dtype=np.uint64)
            .reshape(-1, 2)
            .T
        )
        batch_docs["chars"] = [len(t) for t in texts]
        if config.paragraphs:
            for offset, text in enumerate(texts):
                paragraphs += [
                    (*_hash128(text[s:e].encode("utf-8")), row + offset, s, e) for s, e in paragraph_spans(text)
                ]
        if config.fuzzy:
            signatures.append(hasher.signatures(texts))
            batch_docs["empty"] = is_empty(signatures[-1])
        docs.append(batch_docs)
        row += len(texts)
    write_npy_atomic(np.concatenate(docs) if docs else np.zeros(0, DOC_DTYPE), work / f"{task.name}.docs.npy")
    write_npy_atomic(np.array(paragraphs, dtype=PARAGRAPH_DTYPE), work / f"{task.name}.paragraphs.npy")
    if config.fuzzy:
        stacked = np.concatenate(signatures) if signatures else np.zeros((0, config.minhash.num_perms), np.uint32)
        write_npy_atomic(stacked, work / f"{task.name}.signatures.npy")
        write_npy_atomic(hasher.band_keys(stacked), work / f"{task.name}.bands.npy")
    return {"docs": row, "paragraphs": len(paragraphs)}


def first_occurrence(hi: np.ndarray, lo: np.ndarray) -> Int64[np.ndarray, " items"]:
    """For each item, the index of the first item with the same (hi, lo) key; sort-based, no Python sets."""
    order = np.lexsort((lo, hi))  # stable: equal keys keep their original order
    new_key = np.ones(len(order), dtype=bool)
    new_key[1:] = (hi[order][1:] != hi[order][:-1]) | (lo[order][1:] != lo[order][:-1])
    firsts = np.empty(len(order), dtype=np.int64)
    firsts[order] = order[np.maximum.accumulate(np.where(new_key, np.arange(len(order)), 0))]
    return firsts


def _fuzzy(
    config: DedupConfig, work: Path, shards: list[str], active: Bool[np.ndarray, " docs"]
) -> tuple[np.ndarray, dict[str, int]]:
    """Each document's cluster (ordinal of its first member, -1 if none) over the `active` documents."""
    cluster = np.full(len(active), -1, dtype=np.int64)
    ordinals = np.flatnonzero(active)
    if len(ordinals) < 2:
        return cluster, {"candidate_pairs": 0, "merged_pairs": 0, "lsh_index_bytes": 0}
    signatures = np.lib.format.open_memmap(
        work / "signatures.npy", mode="w+", dtype=np.uint32, shape=(len(active), config.minhash.num_perms)
    )
    offset = 0
    for shard in shards:
        block = _load(work, shard, "signatures", mmap=True)
        signatures[offset : offset + len(block)] = block
        offset += len(block)

    def bands() -> Iterator[np.ndarray]:
        for band in range(config.minhash.num_bands):
            yield np.concatenate([_load(work, shard, "bands", mmap=True)[band] for shard in shards])[ordinals]

    clusters = lsh_clusters(bands(), ordinals, signatures, config.threshold)
    cluster[clusters.members] = clusters.firsts
    counts = {
        "candidate_pairs": clusters.candidate_pairs,
        "merged_pairs": clusters.merged_pairs,
        "lsh_index_bytes": clusters.index_bytes,
    }
    return cluster, counts


def _spans_column(paragraphs: np.ndarray, duplicate: np.ndarray, rows: int) -> pa.Array:
    """The list<list<int64>> spans of the duplicate paragraphs, grouped by row (paragraphs are in row order)."""
    marked = paragraphs[duplicate]
    row_offsets = np.concatenate([[0], np.cumsum(np.bincount(marked["row"], minlength=rows))])
    flat = np.stack([marked["start"], marked["end"]], axis=1).reshape(-1)
    pairs = pa.ListArray.from_arrays(
        pa.array(np.arange(0, len(flat) + 1, 2, dtype=np.int32)), pa.array(flat, type=pa.int64())
    )
    return pa.ListArray.from_arrays(pa.array(row_offsets.astype(np.int32)), pairs)


def _write_attributes(
    out: Path,
    shard_paths: list[Path],
    columns: dict[str, np.ndarray],
    paragraph_tables: list[np.ndarray],
    duplicate_paragraph: np.ndarray,
) -> None:
    """Write one attribute shard per document shard: same rows, same order."""
    doc_offset = paragraph_offset = 0
    for path, paragraphs in zip(shard_paths, paragraph_tables, strict=True):
        ids = pq.read_table(path, columns=["id"]).column("id")
        rows = len(ids)
        part = slice(doc_offset, doc_offset + rows)
        duplicate = duplicate_paragraph[paragraph_offset : paragraph_offset + len(paragraphs)]
        chars = columns["chars"][part]
        duplicate_chars = np.bincount(
            paragraphs["row"][duplicate], weights=(paragraphs["end"] - paragraphs["start"])[duplicate], minlength=rows
        )
        table = pa.table(
            {
                "id": ids,
                "exact_duplicate": columns["exact_duplicate"][part],
                "fuzzy_duplicate": columns["fuzzy_duplicate"][part],
                "fuzzy_cluster": columns["fuzzy_cluster"][part],
                "duplicate_paragraph_spans": _spans_column(paragraphs, duplicate, rows),
                "duplicate_paragraph_fraction": np.divide(duplicate_chars, chars, out=np.zeros(rows), where=chars > 0),
            },
            schema=ATTRIBUTE_SCHEMA,
        )
        write_table_atomic(table, out / path.name)
        doc_offset += rows
        paragraph_offset += len(paragraphs)


def dedup(config: DedupConfig, output_path: str) -> dict[str, Any]:
    """Mark exact, paragraph and fuzzy duplicates of `config.input`; write attribute shards and `stats.json`.

    Returns the stats.
    """
    out = Path(output_path)
    work = out / WORK_DIR
    previous = read_json(out / STATS_FILE)
    if previous is not None and not previous.get("failed_shards"):
        shutil.rmtree(work, ignore_errors=True)  # a kill after stats.json, before the cleanup
        return previous
    paths = parquet_files(config.input)
    work.mkdir(parents=True, exist_ok=True)
    tasks = [ShardTask(name=path.stem, inputs=(str(path),), output_dir=str(work)) for path in paths]
    results = map_shards(dedup_shard, config, tasks, work / "done", config.engine, label="dedup")
    done = [path for path in paths if path.stem in results.stats]
    shards = [path.stem for path in done]
    docs = np.concatenate([_load(work, shard, "docs") for shard in shards]) if shards else np.zeros(0, DOC_DTYPE)
    if len(docs) >= 2**32:
        raise TootsieError(
            f"dedup handles fewer than 2^32 documents per run, got {len(docs)};"
            " split the input into several document directories"
        )
    first = first_occurrence(docs["id_hi"], docs["id_lo"])
    exact = first != np.arange(len(docs))

    paragraph_tables = [_load(work, shard, "paragraphs") for shard in shards]
    # Shards concatenate in order and each table is in (row, start) order, so this is corpus order.
    hashes = np.concatenate(paragraph_tables) if shards else np.zeros(0, PARAGRAPH_DTYPE)
    duplicate_paragraph = first_occurrence(hashes["hash_hi"], hashes["hash_lo"]) != np.arange(len(hashes))

    cluster, lsh_counts = (
        np.full(len(docs), -1, dtype=np.int64),
        {"candidate_pairs": 0, "merged_pairs": 0, "lsh_index_bytes": 0},
    )
    if config.fuzzy:
        cluster, lsh_counts = _fuzzy(config, work, shards, ~exact & ~docs["empty"])
        cluster[exact] = cluster[first[exact]]
    fuzzy = (cluster >= 0) & (cluster != np.arange(len(docs))) & ~exact
    columns = {"chars": docs["chars"], "exact_duplicate": exact, "fuzzy_duplicate": fuzzy, "fuzzy_cluster": cluster}
    _write_attributes(out, done, columns, paragraph_tables, duplicate_paragraph)

    counts = merge_counts(list(results.stats.values()))
    marked = hashes[duplicate_paragraph]
    docs_seen, exact_count, fuzzy_count = int(counts.get("docs", 0)), int(exact.sum()), int(fuzzy.sum())
    details = {
        "docs": docs_seen,
        "exact_duplicates": exact_count,
        "fuzzy_duplicates": fuzzy_count,
        "fuzzy_clusters": int(len(np.unique(cluster[cluster >= 0]))),
        "paragraphs": int(counts.get("paragraphs", 0)),
        "duplicate_paragraphs": int(duplicate_paragraph.sum()),
        "duplicate_paragraph_chars": int((marked["end"] - marked["start"]).sum()),
        **lsh_counts,
        "shards": len(done),
        "failed_shards": results.failed,
    }
    dropped = Counter({"exact_duplicate": exact_count, "fuzzy_duplicate": fuzzy_count})
    stats = finish_stage(
        out, StageStats(total=docs_seen, kept=docs_seen - exact_count - fuzzy_count, dropped=dropped), details
    )
    if not results.failed:
        shutil.rmtree(work)  # finished; with failed shards the arrays stay so a rerun redoes only those
    return stats


def dedup_filters(
    attributes: str, *, fuzzy: bool = True, remove_paragraphs: bool = False
) -> tuple[AttributeFilter, ...]:
    """Consolidate filters applying a dedup stage's attributes: drop exact duplicates, with `fuzzy` near-duplicates
    too, and with `remove_paragraphs` cut the paragraphs seen earlier in the corpus."""
    filters = [AttributeFilter("exact_duplicate", attributes, "exact_duplicate", drop_value=True)]
    if fuzzy:
        filters.append(AttributeFilter("fuzzy_duplicate", attributes, "fuzzy_duplicate", drop_value=True))
    if remove_paragraphs:
        filters.append(
            AttributeFilter("duplicate_paragraphs", attributes, "duplicate_paragraph_spans", remove_spans=True)
        )
    return tuple(filters)
