"""Flag documents that contain eval-set items: word 13-gram overlap, written as co-partitioned attributes.

The 32B retrospective's GSM8K contamination came from test items that reached
a cooldown mix in a different format (OLMes prompts, not LM Eval's). This stage
finds such items whatever the formatting: both sides go through the same
normalization (`tootsie.datakit.ngrams`: NFKC, lowercase, punctuation and
whitespace runs dropped), so line breaks, markdown, bullets, curly quotes,
capitals and "Question:" prefixes do not hide a copy.

Definitions. An eval item's key set `G` holds its distinct word n-grams
(`ngram` words, 13 as in GPT-3's and Marin's decontamination); a text field
with fewer than `ngram` words contributes itself, whole, as one key, so short
questions are still caught (but only as an exact phrase). A document's overlap
with an item is `|G ∩ document n-grams| / |G|`; the document is contaminated
when some item reaches `threshold`. `max_overlap` is the largest overlap over
all items, `matched_eval_ids` the items at or above the threshold, best first.

Threshold 0.5: a copy, however formatted, scores 1.0; a copy with one word
changed in the middle of a typical GSM8K question (about 45 words, 33
13-grams) still scores 20/33 ≈ 0.6, since one word breaks at most 13
n-grams; a document that shares one stock 13-word phrase with an item scores
1/33 ≈ 0.03, where GPT-3's any-shared-13-gram rule would flag it. The tests
measure recall 300/300 on planted copies and 0 false positives in 3,000 clean
documents. Sibling questions from the same templates (other names, numbers
and objects; not in the eval set) mostly score well below it (median about
0.15 in `benchmarks/bench_decontaminate.py`), though about a tenth (8-14%)
reach it by sharing long template stretches: near-copies at the edge of what
13-gram overlap can tell apart.

Outputs under the output directory: for document shard `part-00003.parquet`,
an attribute file `part-00003.parquet` with columns `id`, `contaminated`,
`max_overlap`, `matched_eval_ids`, same rows in the same order; `stats.json`
(`docs`, `contaminated`, `eval_items_matched`, and the shared `total` / `kept`
/ `dropped` of `tootsie.datakit.stats`, contaminated documents dropped as
`contaminated`); `report.json` (per matched
eval item, how many documents contain it and its file, relative to the prefix
under the executor (`executor.portable`), and the spread of `max_overlap`);
`.decontaminate/index/` (the n-gram index as `.npy` files, built once and
memory-mapped by every worker, and a manifest that a rerun must match);
`.decontaminate/done/` (per-shard markers: a rerun skips finished shards).

Example: eval item `gsm:1` "Natalia sold clips to 48 of her friends in April,
and then she sold half as many clips in May. How many clips did she sell?" and a
document "## Practice\\n\\n**Q:** NATALIA sold clips to 48 of her\\nfriends in
April, and then..." give `contaminated=True, max_overlap=1.0,
matched_eval_ids=["gsm:1"]`.
"""

import hashlib
import io
import json
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, merge_counts
from tootsie.datakit.ngrams import INDEX_ARRAYS, NgramIndex, word_hashes
from tootsie.datakit.parquet_io import parquet_files, write_table_atomic
from tootsie.datakit.readers import open_decompressed
from tootsie.datakit.stats import StageStats, finish_stage
from tootsie.errors import TootsieError
from tootsie.executor.portable import portable
from tootsie.jsonfile import read_json, write_json_atomic

logger = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.5
"""See the module docstring for why."""
EVAL_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".json.gz", ".jsonl", ".parquet")
ATTRIBUTE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("contaminated", pa.bool_()),
        ("max_overlap", pa.float64()),
        ("matched_eval_ids", pa.list_(pa.string())),
    ]
)
WORK_DIR = ".decontaminate"
"""Hidden (so not read as attribute shards) home of the index and the done markers."""
INDEX_DIR, DONE_DIR, MANIFEST_FILE, EVAL_ITEMS_FILE = (
    f"{WORK_DIR}/index",
    f"{WORK_DIR}/done",
    "manifest.json",
    "eval_items.json",
)
BATCH_ROWS, BATCH_BYTES = 1024, 16_000_000
"""Documents are scanned in batches of at most this many rows and (beyond one document) text bytes."""


@dataclass(frozen=True)
class DecontaminateConfig:
    """Which corpus to scan against which eval sets, and what counts as contaminated.

    The eval text is the question alone by default: a few-word answer would match common phrases.
    """

    input: str
    """Document directory (Parquet shards with columns `id` and `text`) to scan."""
    eval_files: tuple[str, ...]
    """Eval sets: JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet files (a directory: its files), a record an item."""
    eval_field: str | tuple[str, ...] = "question"
    """Field holding an item's text (the question, not a few-word answer); several fields each add n-grams."""
    eval_id_field: str = "id"
    """Field holding an item's id; records without it get `<file stem>:<line number>`."""
    ngram: int = 13
    """Words per n-gram (13, as in GPT-3's and Marin's decontamination)."""
    threshold: float = DEFAULT_THRESHOLD
    """Contaminated when a document holds at least this fraction of some item's distinct n-grams."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """How shards are executed; not hashed."""

    def __post_init__(self) -> None:
        # Paths may still be executor references to other steps' outputs here; only empty strings are wrong.
        if self.input == "":
            raise ValueError("input is empty; give a document directory path")
        if not isinstance(self.eval_files, tuple) or not self.eval_files or any(f == "" for f in self.eval_files):
            raise ValueError(
                f"eval_files must be a non-empty tuple of paths, got {self.eval_files!r};"
                " e.g. eval_files=('gsm8k_test.jsonl',)"
            )
        if not self.eval_fields or not all(isinstance(f, str) and f for f in self.eval_fields):
            raise ValueError(
                f"eval_field must be a field name or a tuple of them, got {self.eval_field!r};"
                " e.g. eval_field='question'"
            )
        if not isinstance(self.ngram, int) or self.ngram < 1:
            raise ValueError(f"ngram must be a positive number of words, got {self.ngram=}; 13 is the usual choice")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(
                f"threshold must be in (0, 1] (a fraction of an item's n-grams), got {self.threshold=};"
                f" the default is {DEFAULT_THRESHOLD}"
            )

    @property
    def eval_fields(self) -> tuple[str, ...]:
        """`eval_field` as a tuple."""
        return (self.eval_field,) if isinstance(self.eval_field, str) else tuple(self.eval_field)


@dataclass(frozen=True)
class EvalItem:
    """One eval record: its id, the file it came from, and the texts of its eval fields."""

    eval_id: str
    """The record's id, or `<file stem>:<line number>`."""
    file: str
    """The eval file it was read from."""
    texts: tuple[str, ...]
    """One text per eval field."""


def _eval_records(path: Path, suffix: str) -> Iterator[tuple[int, Any]]:
    """Yield `(line or row number, record)` of one eval file; a broken line is an error (eval sets must be clean)."""
    if suffix == ".parquet":
        yield from enumerate(pq.read_table(path).to_pylist(), start=1)
        return
    with open(path, "rb") as raw, io.TextIOWrapper(open_decompressed(raw, path.name), encoding="utf-8-sig") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as error:
                    raise TootsieError(
                        f"{path}:{number} is not valid JSON ({error}); fix or drop that line of the eval file"
                    ) from None


def _eval_paths(names: tuple[str, ...]) -> list[Path]:
    """Eval files as given, with a directory standing for its eval files (e.g. a held-out split)."""
    paths: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            paths += sorted(p for p in path.iterdir() if p.name.endswith(EVAL_SUFFIXES) and not p.name.startswith("."))
        else:
            paths.append(path)
    return paths


def read_eval_items(config: DecontaminateConfig) -> list[EvalItem]:
    """Read every eval file's records; a missing file, a missing field or a duplicate id is a TootsieError."""
    items: list[EvalItem] = []
    for path in _eval_paths(config.eval_files):
        if not path.is_file():
            raise TootsieError(
                f"eval file not found: {path}; pass an existing JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet file"
            )
        suffix = next((s for s in EVAL_SUFFIXES if path.name.endswith(s)), None)
        if suffix is None:
            raise TootsieError(
                f"eval file {path} has an unsupported type; expected a name ending in one of {EVAL_SUFFIXES}"
            )
        stem = path.name[: -len(suffix)]
        for number, record in _eval_records(path, suffix):
            if not isinstance(record, dict):
                raise TootsieError(
                    f"{path}:{number} holds a {type(record).__name__},"
                    f" not a JSON object with field(s) {config.eval_fields}"
                )
            for text_field in config.eval_fields:
                if not isinstance(record.get(text_field), str):
                    raise TootsieError(
                        f"eval file {path}, record {number}: no text field {text_field!r} (fields: {sorted(record)}); "
                        "pass --eval-field naming the field that holds the eval text"
                    )
            raw_id = record.get(config.eval_id_field)
            items.append(
                EvalItem(
                    str(raw_id) if raw_id is not None else f"{stem}:{number}",
                    str(path),
                    tuple(record[f] for f in config.eval_fields),
                )
            )
    repeated = sorted(eval_id for eval_id, count in Counter(item.eval_id for item in items).items() if count > 1)[:5]
    if repeated:
        raise TootsieError(
            f"eval ids repeat across records ({repeated}...); each item needs a unique id:"
            " pass --eval-id-field naming a unique field, "
            "or one that no record has so that ids become <file stem>:<line number>"
        )
    if not items:
        raise TootsieError(f"the eval files {list(config.eval_files)} hold no records")
    return items


def _manifest(index: NgramIndex, items: list[EvalItem], config: DecontaminateConfig) -> dict[str, Any]:
    """What the outputs depend on: settings and a digest of the index and the eval ids."""
    digest = hashlib.sha256(json.dumps([item.eval_id for item in items]).encode())
    for name in INDEX_ARRAYS:
        digest.update(np.ascontiguousarray(getattr(index, name)).tobytes())
    return {
        "ngram": config.ngram,
        "threshold": config.threshold,
        "eval_fields": list(config.eval_fields),
        "index_sha256": digest.hexdigest(),
    }


def _prepare_index(out: Path, items: list[EvalItem], config: DecontaminateConfig) -> NgramIndex:
    """Build the index and save it under `out/.decontaminate/index`, or check that an earlier run saved the same one."""
    index = NgramIndex.build([item.texts for item in items], config.ngram)
    if len(index.keys) == 0:
        raise TootsieError(
            f"the eval items of {list(config.eval_files)} have no words in field(s) {config.eval_fields};"
            " check --eval-field"
        )
    manifest = _manifest(index, items, config)
    previous = read_json(out / INDEX_DIR / MANIFEST_FILE)
    if previous is not None and previous != manifest:
        changed = {
            key: f"{previous.get(key)!r} -> {value!r}" for key, value in manifest.items() if previous.get(key) != value
        }
        raise TootsieError(
            f"{out} holds decontamination results for other eval items or settings (changed: {changed}); "
            "choose a new output directory or delete this one"
        )
    if previous is None:
        index.save(out / INDEX_DIR)
        write_json_atomic(out / INDEX_DIR / EVAL_ITEMS_FILE, {"eval_ids": [item.eval_id for item in items]})
        write_json_atomic(out / INDEX_DIR / MANIFEST_FILE, manifest)
    return index


@lru_cache(maxsize=2)
def _load_index(directory: str, digest: str) -> tuple[NgramIndex, pa.Array]:
    """The memory-mapped index and eval ids, once per process and index version (`digest`)."""
    eval_ids = read_json(Path(directory) / EVAL_ITEMS_FILE) or {}
    return NgramIndex.load(Path(directory)), pa.array(eval_ids.get("eval_ids", []), type=pa.string())


def _batches(parquet: pq.ParquetFile) -> Iterator[pa.RecordBatch]:
    """Record batches of `id` and `text`, cut so that no batch holds much more than BATCH_BYTES of text."""
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=["id", "text"]):
        ends = np.cumsum(pc.binary_length(batch.column("text")).fill_null(0).to_numpy())
        start = 0
        while start < batch.num_rows:
            before = int(ends[start - 1]) if start else 0
            stop = max(start + 1, int(np.searchsorted(ends, before + BATCH_BYTES, side="right")))
            yield batch.slice(start, stop - start)
            start = stop


def decontaminate_shard(task: ShardTask, config: DecontaminateConfig) -> dict[str, Any]:
    """Scan one document shard and write its attribute file; return its counts (runs in a worker process)."""
    index_dir = Path(task.output_dir) / INDEX_DIR
    index, eval_ids = _load_index(str(index_dir), (read_json(index_dir / MANIFEST_FILE) or {}).get("index_sha256", ""))
    parquet = pq.ParquetFile(task.inputs[0])
    missing = {"id", "text"} - set(parquet.schema_arrow.names)
    if missing:
        raise TootsieError(
            f"{task.inputs[0]} lacks columns {sorted(missing)};"
            " decontaminate reads a document directory (normalize's output)"
        )
    parts, per_item = [], np.zeros(len(eval_ids), dtype=np.int64)
    for batch in _batches(parquet):
        docs, items, overlap = index.overlaps(*word_hashes(batch.column("text").cast(pa.string())))
        max_overlap = np.zeros(batch.num_rows)
        np.maximum.at(max_overlap, docs, overlap)
        keep = overlap >= config.threshold
        order = np.lexsort((items[keep], -overlap[keep], docs[keep]))
        docs, items = docs[keep][order], items[keep][order]
        list_offsets = pa.array(np.searchsorted(docs, np.arange(batch.num_rows + 1)).astype(np.int32))
        per_item += np.bincount(items, minlength=len(eval_ids))
        columns = [
            batch.column("id").cast(pa.string()),
            pa.array(max_overlap >= config.threshold),
            pa.array(max_overlap),
        ]
        columns.append(pa.ListArray.from_arrays(list_offsets, eval_ids.take(pa.array(items, type=pa.int64()))))
        parts.append(pa.Table.from_arrays(columns, schema=ATTRIBUTE_SCHEMA))
    table = pa.concat_tables(parts) if parts else ATTRIBUTE_SCHEMA.empty_table()
    write_table_atomic(table, Path(task.output_dir) / f"{task.name}.parquet")
    max_overlap = table.column("max_overlap").to_numpy()
    tenths = np.bincount(np.floor(max_overlap * 10).astype(np.int64), minlength=11)
    return {
        "docs": table.num_rows,
        "contaminated": int(pc.sum(table.column("contaminated")).as_py() or 0),
        "docs_per_eval_item": {eval_ids[i].as_py(): int(per_item[i]) for i in np.flatnonzero(per_item)},
        "docs_by_max_overlap": {f"{k / 10:.1f}": int(tenths[k]) for k in np.flatnonzero(tenths)},
    }


def decontaminate(config: DecontaminateConfig, output_path: str) -> dict[str, Any]:
    """Write contamination attributes for each document shard, plus `stats.json` and `report.json`; return the stats."""
    out = Path(output_path)
    shards = parquet_files(config.input)
    items = read_eval_items(config)
    index = _prepare_index(out, items, config)
    tasks = [ShardTask(name=path.stem, inputs=(str(path),), output_dir=str(out)) for path in shards]
    results = map_shards(decontaminate_shard, config, tasks, out / DONE_DIR, config.engine, label="decontaminate")
    if results.failed:
        logger.warning(
            "decontaminate: %d shards failed and have no attributes: %s", len(results.failed), sorted(results.failed)
        )
    merged = merge_counts(list(results.stats.values()))
    per_item: dict[str, int] = merged.get("docs_per_eval_item", {})
    details = {
        "docs": int(merged.get("docs", 0)),
        "contaminated": int(merged.get("contaminated", 0)),
        "eval_items_matched": len(per_item),
    }
    files = {item.eval_id: item.file for item in items}
    order = {item.eval_id: number for number, item in enumerate(items)}
    report = {
        **details,
        "ngram": config.ngram,
        "threshold": config.threshold,
        "eval_items": len(items),
        "eval_items_without_words": int(np.count_nonzero(np.asarray(index.sizes) == 0)),
        "docs_by_max_overlap": merged.get("docs_by_max_overlap", {}),
        "failed_shards": sorted(results.failed),
        "matched": [
            {"eval_id": eval_id, "file": portable(files[eval_id]), "docs": docs}
            for eval_id, docs in sorted(per_item.items(), key=lambda pair: (-pair[1], order[pair[0]]))
        ],
    }
    write_json_atomic(out / "report.json", report)
    counts = StageStats(
        total=details["docs"],
        kept=details["docs"] - details["contaminated"],
        dropped=Counter({"contaminated": details["contaminated"]}),
    )
    return finish_stage(out, counts, details)
