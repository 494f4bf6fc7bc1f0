"""Deduplication attributes: exact document, exact paragraph, exact line and MinHash-LSH fuzzy duplicates.

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
- `duplicate_paragraph_fraction`: characters in those spans / characters in the document;
- `duplicate_line_spans`, `duplicate_line_fraction`: the same for lines, filled
  only with `lines=True` (opt-in; empty lists and 0.0 otherwise).

Consolidate then drops on `exact_duplicate` / `fuzzy_duplicate` and cuts the spans.

Paragraphs are the text between blank lines (lines holding only whitespace),
trimmed of surrounding whitespace; whitespace-only paragraphs are ignored. A
paragraph is identified by the xxh3_128 of its trimmed text.

Lines are the pieces between `\n`s; blank ones are ignored. A line is
identified by the xxh3_128 of its text trimmed of surrounding whitespace (so
indentation does not make two lines differ), but its span is the whole line
and its `\n`, so cutting it leaves no blank line behind:
`"a\nnav\nb"` after a document holding `nav` gives the span `[2, 6)` and,
cut, `"a\nb"`. The first occurrence in corpus order (shard order, then row
order, then position) is kept, every later one is marked, also within one
document; the marks depend on the corpus order alone, never on the workers or
the order shards finish in. Line dedup is CCNet's paragraph dedup (a CCNet
"paragraph" is a line) without its normalization, and datatrove's sentence
dedup at one-line granularity: it removes a site's navigation lines after
their first page, and also any short line that happens to repeat ("Examples:",
"Returns"), which is why it is opt-in and meant for web prose, not code. The
reduce holds 40 bytes a non-blank line (hash, row, span), about twice that
while sorting.

Exact duplicates are left out of LSH (they are already marked, and ten thousand
copies of one page would make one huge bucket): they get `fuzzy_duplicate`
False and the `fuzzy_cluster` of the document they copy. So `exact_duplicates`
and `fuzzy_duplicates` count disjoint documents. A document without words has
no signature and is never a fuzzy duplicate.

How it runs: a map over shards (`map_shards`: parallel, retried, resumable)
writes per-shard arrays under `<output>/.dedup/` (id hashes, paragraph and
line hashes and spans, signatures, band keys); a reduce in this process finds first
occurrences by sorting hashes, builds LSH clusters band by band (see
`minhash`), and writes the attribute shards and `stats.json`:
`{"docs", "exact_duplicates", "fuzzy_duplicates", "fuzzy_clusters",
"paragraphs", "duplicate_paragraphs", "duplicate_paragraph_chars", "lines",
"duplicate_lines", "duplicate_line_chars", "candidate_pairs", "merged_pairs", "lsh_index_bytes", "shards",
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
from typing import Any, NamedTuple

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
SPAN_DTYPE = np.dtype([("hash_hi", "<u8"), ("hash_lo", "<u8"), ("row", "<i8"), ("start", "<i8"), ("end", "<i8")])
SPAN_KINDS = ("paragraph", "line")
"""The units marked by span: `duplicate_<kind>_spans` / `duplicate_<kind>_fraction` columns, `<kind>s` arrays."""
ATTRIBUTE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("exact_duplicate", pa.bool_()),
        ("fuzzy_duplicate", pa.bool_()),
        ("fuzzy_cluster", pa.int64()),
        *(
            field
            for kind in SPAN_KINDS
            for field in (
                pa.field(f"duplicate_{kind}_spans", pa.list_(pa.list_(pa.int64()))),
                pa.field(f"duplicate_{kind}_fraction", pa.float64()),
            )
        ),
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
    lines: bool = False
    """Mark lines seen earlier in the corpus (the dedup command cuts them); opt-in: for web prose, it would gut code."""
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


def line_spans(text: str) -> list[tuple[int, int]]:
    """`[start, end)` code-point spans of the non-blank lines of `text`, each the whole line and its `\\n`."""
    spans = []
    start = 0
    for line in text.split("\n"):
        end = start + len(line)
        if line.strip():
            spans.append((start, min(end + 1, len(text))))
        start = end + 1
    return spans


def _marked_spans(texts: list[str], first_row: int, split: Any) -> list[tuple[int, int, int, int, int]]:
    """(hash_hi, hash_lo, row, start, end) of every span `split` finds in `texts`, keyed by its trimmed text."""
    return [
        (*_hash128(text[s:e].strip().encode("utf-8")), first_row + offset, s, e)
        for offset, text in enumerate(texts)
        for s, e in split(text)
    ]


def _hash128(data: bytes) -> tuple[int, int]:
    value = xxhash.xxh3_128_intdigest(data)
    return value >> 64, value & 0xFFFFFFFFFFFFFFFF


def _load(work: Path, shard: str, kind: str, mmap: bool = False) -> np.ndarray:
    return np.load(work / f"{shard}.{kind}.npy", mmap_mode="r" if mmap else None, allow_pickle=False)


def dedup_shard(task: ShardTask, config: DedupConfig) -> dict[str, int]:
    """Hash one shard's ids, paragraphs and MinHash signatures into `<work>/<shard>.*.npy`; return counts."""
    work = Path(task.output_dir)
    hasher = config.minhash.build()
    splitters = {
        "paragraph": paragraph_spans if config.paragraphs else None,
        "line": line_spans if config.lines else None,
    }
    spans: dict[str, list[tuple[int, int, int, int, int]]] = {kind: [] for kind in SPAN_KINDS}
    docs, signatures, row = [], [], 0
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
        for kind, split in splitters.items():
            if split is not None:
                spans[kind] += _marked_spans(texts, row, split)
        if config.fuzzy:
            signatures.append(hasher.signatures(texts))
            batch_docs["empty"] = is_empty(signatures[-1])
        docs.append(batch_docs)
        row += len(texts)
    write_npy_atomic(np.concatenate(docs) if docs else np.zeros(0, DOC_DTYPE), work / f"{task.name}.docs.npy")
    for kind, found in spans.items():
        write_npy_atomic(np.array(found, dtype=SPAN_DTYPE), work / f"{task.name}.{kind}s.npy")
    if config.fuzzy:
        stacked = np.concatenate(signatures) if signatures else np.zeros((0, config.minhash.num_perms), np.uint32)
        write_npy_atomic(stacked, work / f"{task.name}.signatures.npy")
        write_npy_atomic(hasher.band_keys(stacked), work / f"{task.name}.bands.npy")
    return {"docs": row, **{f"{kind}s": len(found) for kind, found in spans.items()}}


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


def _spans_column(spans: np.ndarray, duplicate: np.ndarray, rows: int) -> pa.Array:
    """The list<list<int64>> spans of the duplicate spans, grouped by row (spans are in row order)."""
    marked = spans[duplicate]
    row_offsets = np.concatenate([[0], np.cumsum(np.bincount(marked["row"], minlength=rows))])
    flat = np.stack([marked["start"], marked["end"]], axis=1).reshape(-1)
    pairs = pa.ListArray.from_arrays(
        pa.array(np.arange(0, len(flat) + 1, 2, dtype=np.int32)), pa.array(flat, type=pa.int64())
    )
    return pa.ListArray.from_arrays(pa.array(row_offsets.astype(np.int32)), pairs)


class _DuplicateSpans(NamedTuple):
    """One span kind over the corpus: each shard's span table, which spans repeat an earlier one, and the counts."""

    tables: list[np.ndarray]
    duplicate: np.ndarray
    counts: dict[str, int]

    @classmethod
    def load(cls, work: Path, shards: list[str], kind: str) -> "_DuplicateSpans":
        """Read the shards' `<kind>s` arrays; a span is a repeat when an earlier one (corpus order) has its hash."""
        tables = [_load(work, shard, f"{kind}s") for shard in shards]
        # Shards concatenate in order and each table is in (row, start) order, so this is corpus order.
        spans = np.concatenate(tables) if tables else np.zeros(0, SPAN_DTYPE)
        duplicate = first_occurrence(spans["hash_hi"], spans["hash_lo"]) != np.arange(len(spans))
        marked = spans[duplicate]
        counts = {
            f"{kind}s": len(spans),
            f"duplicate_{kind}s": int(duplicate.sum()),
            f"duplicate_{kind}_chars": int((marked["end"] - marked["start"]).sum()),
        }
        return cls(tables, duplicate, counts)


def _span_columns(kind: str, spans: np.ndarray, duplicate: np.ndarray, chars: np.ndarray) -> dict[str, pa.Array]:
    """One shard's `duplicate_<kind>_spans` and `duplicate_<kind>_fraction` columns."""
    rows = len(chars)
    duplicate_chars = np.bincount(
        spans["row"][duplicate], weights=(spans["end"] - spans["start"])[duplicate], minlength=rows
    )
    return {
        f"duplicate_{kind}_spans": _spans_column(spans, duplicate, rows),
        f"duplicate_{kind}_fraction": pa.array(np.divide(duplicate_chars, chars, out=np.zeros(rows), where=chars > 0)),
    }


def _write_attributes(
    out: Path, shard_paths: list[Path], columns: dict[str, np.ndarray], spans: dict[str, _DuplicateSpans]
) -> None:
    """Write one attribute shard per document shard: same rows, same order."""
    doc_offset = 0
    span_offsets = dict.fromkeys(spans, 0)
    for index, path in enumerate(shard_paths):
        ids = pq.read_table(path, columns=["id"]).column("id")
        part = slice(doc_offset, doc_offset + len(ids))
        chars = columns["chars"][part]
        span_columns: dict[str, pa.Array] = {}
        for kind, found in spans.items():
            table = found.tables[index]
            duplicate = found.duplicate[span_offsets[kind] : span_offsets[kind] + len(table)]
            span_columns |= _span_columns(kind, table, duplicate, chars)
            span_offsets[kind] += len(table)
        table = pa.table(
            {
                "id": ids,
                "exact_duplicate": columns["exact_duplicate"][part],
                "fuzzy_duplicate": columns["fuzzy_duplicate"][part],
                "fuzzy_cluster": columns["fuzzy_cluster"][part],
                **span_columns,
            },
            schema=ATTRIBUTE_SCHEMA,
        )
        write_table_atomic(table, out / path.name)
        doc_offset += len(ids)


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

    spans = {kind: _DuplicateSpans.load(work, shards, kind) for kind in SPAN_KINDS}

    cluster, lsh_counts = (
        np.full(len(docs), -1, dtype=np.int64),
        {"candidate_pairs": 0, "merged_pairs": 0, "lsh_index_bytes": 0},
    )
    if config.fuzzy:
        cluster, lsh_counts = _fuzzy(config, work, shards, ~exact & ~docs["empty"])
        cluster[exact] = cluster[first[exact]]
    fuzzy = (cluster >= 0) & (cluster != np.arange(len(docs))) & ~exact
    columns = {"chars": docs["chars"], "exact_duplicate": exact, "fuzzy_duplicate": fuzzy, "fuzzy_cluster": cluster}
    _write_attributes(out, done, columns, spans)

    counts = merge_counts(list(results.stats.values()))
    docs_seen, exact_count, fuzzy_count = int(counts.get("docs", 0)), int(exact.sum()), int(fuzzy.sum())
    details = {
        "docs": docs_seen,
        "exact_duplicates": exact_count,
        "fuzzy_duplicates": fuzzy_count,
        "fuzzy_clusters": int(len(np.unique(cluster[cluster >= 0]))),
        **{key: value for kind, found in spans.items() for key, value in found.counts.items()},
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
    attributes: str, *, fuzzy: bool = True, remove_paragraphs: bool = False, remove_lines: bool = False
) -> tuple[AttributeFilter, ...]:
    """Consolidate filters applying a dedup stage's attributes: drop exact duplicates, with `fuzzy` near-duplicates
    too, with `remove_paragraphs` cut the paragraphs and with `remove_lines` the lines seen earlier in the corpus."""
    filters = [AttributeFilter("exact_duplicate", attributes, "exact_duplicate", drop_value=True)]
    if fuzzy:
        filters.append(AttributeFilter("fuzzy_duplicate", attributes, "fuzzy_duplicate", drop_value=True))
    if remove_paragraphs:
        filters.append(
            AttributeFilter("duplicate_paragraphs", attributes, "duplicate_paragraph_spans", remove_spans=True)
        )
    if remove_lines:
        filters.append(AttributeFilter("duplicate_lines", attributes, "duplicate_line_spans", remove_spans=True))
    return tuple(filters)
