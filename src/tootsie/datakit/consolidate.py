"""Consolidate: apply attribute filters to a document directory, writing a new one.

Attribute stages (quality, dedup, decontamination, classifiers) only label
documents; this stage acts on the labels. Each `AttributeFilter` names an
attribute directory co-partitioned with the input (for document shard
`part-00003.parquet`, an attribute shard of the same name with `id` and the
attribute columns, same rows, same order) and one column, used one of these ways:

- `drop_value`: a boolean column; drop the document when it equals this value
  (`exact_duplicate == True`, `quality_pass == False`, `contaminated == True`);
- `drop_above` / `drop_below`: a numeric column; drop when it is greater /
  less than the bound (`max_overlap > 0.5`);
- `remove_spans`: a list<list<int64>> column of `[start, end)` code-point
  offsets (`duplicate_paragraph_spans`, `c4_removed_spans`); the spans of all
  such filters are merged and cut out of the text. A document left empty or
  blank is dropped as `empty_after_span_removal`;
- `keep_values`: a string column; keep the documents whose value is one of
  these, drop the rest (`lang` in `("en", "de")`, see `langid.langid_filters`);
- `keep_top_fraction`: a numeric column (`quality_score` from classify); keep
  the documents in the top fraction over all shards, drop the rest;
- `buckets` + `keep_buckets`: a numeric column cut into `buckets` quantile
  buckets over all shards (Nemotron-CC; 0 = lowest); keep the listed buckets
  and record each kept document's bucket in a column `<column>_bucket`.

The last two need the whole corpus's scores: their cutoffs are computed once,
before the shards run, from every attribute shard (`score_cutoffs`), and are
written to `stats.json` as `cutoffs`.

Null attribute values never drop a document. Drop filters apply in config
order and a dropped document counts under the first filter that dropped it, so
`input_docs - output_docs == sum(removed_by.values())`. Characters are counted
the same way (whole documents for drops, spans not already cut by an earlier
span filter), so `input_chars - output_chars == sum(chars_removed_by.values())`.

Output: shards with the input's names and columns; a document whose text
changed gets `id = content_id(new_text)`; `source_id` is kept; `parent_id` holds
the input document's `id` (equal to `id` when the text is unchanged), so every
output document joins back to its input and its attributes. `stats.json`:
`{"input_docs", "output_docs", "removed_by", "chars_removed_by", "input_chars",
"output_chars", "shards", "failed_shards", "cutoffs"}` and the shared `total` / `kept` /
`dropped` (`tootsie.datakit.stats`; `dropped` is `removed_by`).

Example: a doc `"keep. junk\\nmore."` with spans `[[6, 11]]` becomes
`"keep. more."`, with a new id and `parent_id` the old one;
`chars_removed_by` gains 5 for that filter.
"""

import shutil
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, merge_counts
from tootsie.datakit.ids import content_id
from tootsie.datakit.parquet_io import parquet_files, write_table_atomic
from tootsie.datakit.score_cutoffs import bucket_edges, bucket_of, read_scores, top_fraction_cutoff
from tootsie.datakit.stats import StageStats, finish_stage
from tootsie.errors import TootsieError

WORK_DIR = ".consolidate"
EMPTY = "empty_after_span_removal"


@dataclass(frozen=True)
class AttributeFilter:
    """One attribute column of one attribute directory, and what it does to documents."""

    name: str
    """Key of this filter in the stats, e.g. "exact_dedup"."""
    attributes: str
    """Attribute directory co-partitioned with the input documents."""
    column: str
    """The attribute column to read."""
    drop_value: bool | None = None
    """Boolean column: drop the document when the column equals this."""
    drop_above: float | None = None
    """Numeric column: drop the document when the column is greater than this."""
    drop_below: float | None = None
    """Numeric column: drop the document when the column is less than this."""
    remove_spans: bool = False
    """Spans column (list of [start, end) code-point offsets): cut the spans out of the text."""
    keep_values: tuple[str, ...] | None = None
    """String column: keep the document only when the column is one of these (e.g. languages)."""
    keep_top_fraction: float | None = None
    """Numeric column: keep the documents whose score is in this top fraction over all shards."""
    buckets: int | None = None
    """Numeric column: cut it into this many quantile buckets over all shards (with `keep_buckets`)."""
    keep_buckets: tuple[int, ...] = ()
    """Buckets to keep (0 = lowest); each kept document's bucket goes to a column `<column>_bucket`."""

    def __post_init__(self) -> None:
        if not self.name or self.name == EMPTY:
            raise ValueError(f"AttributeFilter.name must be non-empty and not {EMPTY!r} (reserved), got {self.name!r}")
        modes = [
            self.drop_value is not None,
            self.drop_above is not None or self.drop_below is not None,
            self.remove_spans,
            self.keep_values is not None,
            self.keep_top_fraction is not None,
            self.buckets is not None,
        ]
        if sum(modes) != 1:
            raise ValueError(
                f"AttributeFilter {self.name!r} must set exactly one of drop_value, drop_above/drop_below,"
                " remove_spans, keep_values, keep_top_fraction, buckets; "
                f"got {self.drop_value=}, {self.drop_above=}, {self.drop_below=}, {self.remove_spans=},"
                f" {self.keep_values=}, {self.keep_top_fraction=}, {self.buckets=}"
            )
        if self.keep_top_fraction is not None and not 0.0 < self.keep_top_fraction <= 1.0:
            raise ValueError(
                f"AttributeFilter {self.name!r}: keep_top_fraction must be in (0, 1], got {self.keep_top_fraction!r}"
            )
        if (self.buckets is None) != (not self.keep_buckets) or (
            self.buckets is not None and (self.buckets < 2 or not all(0 <= b < self.buckets for b in self.keep_buckets))
        ):
            raise ValueError(
                f"AttributeFilter {self.name!r}: buckets needs an int >= 2 and keep_buckets a non-empty tuple of"
                f" buckets in [0, buckets); got {self.buckets=}, {self.keep_buckets=}"
            )

    @property
    def drops(self) -> bool:
        """True for a filter that drops whole documents, False for one that cuts spans."""
        return not self.remove_spans

    @property
    def is_global(self) -> bool:
        """True for a filter whose cutoffs come from every shard's scores (top fraction, buckets)."""
        return self.keep_top_fraction is not None or self.buckets is not None


def global_cutoffs(f: AttributeFilter, docs: list[Path]) -> tuple[float, ...]:
    """The cutoffs of a global filter over the attribute shards of `docs`: (top-fraction cutoff,) or bucket edges."""
    scores = read_scores([Path(f.attributes) / doc.name for doc in docs], f.column)
    what = f"filter {f.name!r} on {f.column!r} of {f.attributes}"
    if f.keep_top_fraction is not None:
        return (top_fraction_cutoff(scores, f.keep_top_fraction, what),)
    return bucket_edges(scores, f.buckets or 0, what)


@dataclass(frozen=True)
class ConsolidateConfig:
    """Which documents to consolidate, and which attribute filters to apply in order."""

    input: str
    """A document directory."""
    attributes: tuple[AttributeFilter, ...]
    """Filters, applied in this order (drops first counts)."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Parallelism, retries and failure budget (not hashed)."""

    def __post_init__(self) -> None:
        if not self.attributes:
            raise ValueError(
                "ConsolidateConfig.attributes is empty; give at least one AttributeFilter"
                " (to copy documents, there is nothing to consolidate)"
            )
        names = [f.name for f in self.attributes]
        if len(set(names)) != len(names):
            raise ValueError(f"ConsolidateConfig.attributes names must be unique, got {names}; rename one filter")


def merge_spans(spans: list[list[int]]) -> list[list[int]]:
    """Sort `[start, end)` spans and merge the ones that overlap or touch."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def remove_spans(text: str, merged: list[list[int]]) -> str:
    """`text` without the characters of `merged` (sorted, disjoint spans from `merge_spans`)."""
    pieces, position = [], 0
    for start, end in merged:
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _covered(merged: list[list[int]]) -> int:
    return sum(end - start for start, end in merged)


def _is_spans(kind: pa.DataType) -> bool:
    lists = (pa.types.is_list, pa.types.is_large_list)
    return (
        any(f(kind) for f in lists)
        and any(f(kind.value_type) for f in lists)
        and pa.types.is_integer(kind.value_type.value_type)
    )


def _check_column(f: AttributeFilter, kind: pa.DataType, path: Path) -> None:
    """Raise unless the column's type suits the filter's mode."""
    if f.drop_value is not None:
        ok, want = pa.types.is_boolean(kind), "bool"
    elif f.remove_spans:
        ok, want = _is_spans(kind), "list<list<int64>>"
    elif f.keep_values is not None:
        ok, want = pa.types.is_string(kind) or pa.types.is_large_string(kind), "a string"
    else:
        ok, want = pa.types.is_integer(kind) or pa.types.is_floating(kind), "a number"
    if not ok:
        raise TootsieError(
            f"filter {f.name!r}: column {f.column!r} of {path} is {kind}, but this filter needs {want};"
            " pick the right mode or column"
        )


def _read_attributes(path: Path, filters: list[AttributeFilter], doc_ids: pa.ChunkedArray, doc_path: Path) -> pa.Table:
    """The attribute shard's columns for `filters`, after checking it is co-partitioned with the documents."""
    if not path.exists():
        raise TootsieError(
            f"attribute shard {path} is missing for document shard {doc_path};"
            " run the attribute stage on the same document directory"
        )
    names = pq.ParquetFile(path).schema_arrow.names
    wanted = sorted({f.column for f in filters})
    missing = [c for c in ["id", *wanted] if c not in names]
    if missing:
        raise TootsieError(
            f"attribute shard {path} lacks columns {missing}; it has {names} (filters {[f.name for f in filters]})"
        )
    table = pq.read_table(path, columns=["id", *wanted])
    ids = table.column("id")
    if len(ids) != len(doc_ids):
        raise TootsieError(
            f"attribute shard {path} has {len(ids)} rows but document shard {doc_path} has {len(doc_ids)};"
            " they are not co-partitioned, recompute the attributes from these documents"
        )
    differ = np.flatnonzero(~pc.fill_null(pc.equal(ids, doc_ids), False).to_numpy(zero_copy_only=False))
    if len(differ):
        row = int(differ[0])
        raise TootsieError(
            f"attribute shard {path} is not co-partitioned with document shard {doc_path}:"
            f" row {row} has id {ids[row].as_py()!r} "
            f"vs {doc_ids[row].as_py()!r} ({len(differ)} rows differ); recompute the attributes from these documents"
        )
    for f in filters:
        _check_column(f, table.schema.field(f.column).type, path)
    return table


def _drop_mask(f: AttributeFilter, column: pa.ChunkedArray, cutoffs: tuple[float, ...]) -> np.ndarray:
    if f.keep_top_fraction is not None:
        hit = pc.less(column, cutoffs[0])
    elif f.buckets is not None:
        buckets = bucket_of(pc.fill_null(column, np.nan).to_numpy().astype(np.float32), cutoffs)
        return pc.is_valid(column).to_numpy(zero_copy_only=False) & ~np.isin(buckets, f.keep_buckets)
    elif f.drop_value is not None:
        hit = pc.equal(column, f.drop_value)
    elif f.keep_values is not None:
        hit = pc.and_(pc.is_valid(column), pc.invert(pc.is_in(column, value_set=pa.array(f.keep_values, pa.string()))))
    else:
        above = pc.greater(column, f.drop_above) if f.drop_above is not None else None
        below = pc.less(column, f.drop_below) if f.drop_below is not None else None
        hit = above if below is None else below if above is None else pc.or_(above, below)
    return pc.fill_null(hit, False).to_numpy(zero_copy_only=False)


def _valid_spans(spans: list[list[int]], size: int, where: str) -> list[list[int]]:
    for span in spans:
        if span is None or len(span) != 2 or not 0 <= span[0] <= span[1] <= size:
            raise TootsieError(
                f"{where}: span {span!r} is not [start, end) with 0 <= start <= end <= {size} (the text length);"
                " spans must be code-point offsets into this document"
            )
    return spans


def _bucket_column(f: AttributeFilter, column: pa.ChunkedArray, cutoffs: tuple[float, ...]) -> pa.Array:
    """Each document's quantile bucket under `f` (null where the score is null)."""
    buckets = bucket_of(pc.fill_null(column, np.nan).to_numpy().astype(np.float32), cutoffs)
    return pa.array(buckets, pa.int16(), mask=~pc.is_valid(column).to_numpy(zero_copy_only=False))


def consolidate_shard(
    task: ShardTask, config: ConsolidateConfig, cutoffs: Mapping[str, tuple[float, ...]] | None = None
) -> dict[str, Any]:
    """Map: apply every filter to one document shard and write the surviving documents.

    `cutoffs` holds, per global filter name, the cutoffs `global_cutoffs` computed over all shards.
    """
    cutoffs = cutoffs or {}
    doc_path = Path(task.inputs[0])
    table = pq.read_table(doc_path)
    if not {"id", "text"} <= set(table.column_names):
        raise TootsieError(
            f"{doc_path} lacks `id` or `text` (has {table.column_names}); consolidate reads a document directory"
        )
    by_dir: dict[str, list[AttributeFilter]] = {}
    for f in config.attributes:
        by_dir.setdefault(f.attributes, []).append(f)
    attributes = {
        d: _read_attributes(Path(d) / doc_path.name, fs, table.column("id"), doc_path) for d, fs in by_dir.items()
    }
    lengths = pc.fill_null(pc.utf8_length(table.column("text")), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    alive = np.ones(table.num_rows, dtype=bool)
    removed = {f.name: 0 for f in config.attributes} | {EMPTY: 0}
    chars = dict.fromkeys(removed, 0)
    for f in (f for f in config.attributes if f.drops):
        hit = _drop_mask(f, attributes[f.attributes].column(f.column), cutoffs.get(f.name, ())) & alive
        removed[f.name] += int(hit.sum())
        chars[f.name] += int(lengths[hit].sum())
        alive &= ~hit
    ids = table.column("id").to_pylist()
    texts = table.column("text").to_pylist()
    new_ids, new_texts = list(ids), list(texts)
    span_columns = [
        (f, attributes[f.attributes].column(f.column).to_pylist()) for f in config.attributes if f.remove_spans
    ]
    for row in np.flatnonzero(alive) if span_columns else ():
        text = texts[row] or ""
        cut: list[list[int]] = []
        for f, column in span_columns:
            if column[row]:
                before = _covered(cut)
                cut = merge_spans(
                    cut
                    + _valid_spans(
                        column[row],
                        len(text),
                        f"filter {f.name!r}, {f.attributes}/{doc_path.name}, document {ids[row]}",
                    )
                )
                chars[f.name] += _covered(cut) - before
        if not cut:
            continue
        new_text = remove_spans(text, cut)
        if not new_text.strip():
            alive[row] = False
            removed[EMPTY] += 1
            chars[EMPTY] += len(new_text)
        elif new_text != text:
            new_texts[row], new_ids[row] = new_text, content_id(new_text)
    out = table.drop_columns([c for c in ("id", "text", "parent_id") if c in table.column_names])
    out = out.add_column(0, "text", pa.array(new_texts, pa.string())).add_column(
        0, "id", pa.array(new_ids, pa.string())
    )
    out = out.append_column("parent_id", pa.array(ids, pa.string()))
    for f in (f for f in config.attributes if f.buckets is not None):
        out = out.append_column(
            f"{f.column}_bucket", _bucket_column(f, attributes[f.attributes].column(f.column), cutoffs[f.name])
        )
    out = out.filter(pa.array(alive))
    write_table_atomic(out, Path(task.output_dir) / doc_path.name)
    output_chars = int(pc.sum(pc.utf8_length(out.column("text"))).as_py() or 0)
    return {
        "input_docs": table.num_rows,
        "output_docs": out.num_rows,
        "removed_by": removed,
        "chars_removed_by": chars,
        "input_chars": int(lengths.sum()),
        "output_chars": output_chars,
    }


def consolidate(config: ConsolidateConfig, output_path: str) -> dict[str, Any]:
    """Apply `config.attributes` to every shard of `config.input`; write the new document directory and `stats.json`."""
    out = Path(output_path)
    docs = parquet_files(config.input)
    for f in config.attributes:
        for doc_path in docs:
            attribute_path = Path(f.attributes) / doc_path.name
            if not attribute_path.exists():
                raise TootsieError(
                    f"filter {f.name!r}: attribute shard {attribute_path} is missing for document shard {doc_path};"
                    f" run the attribute stage on {config.input}"
                )
    cutoffs = {f.name: global_cutoffs(f, docs) for f in config.attributes if f.is_global}
    tasks = [ShardTask(name=path.stem, inputs=(str(path),), output_dir=str(out)) for path in docs]
    shard_fn = partial(consolidate_shard, cutoffs=cutoffs)
    results = map_shards(shard_fn, config, tasks, out / WORK_DIR / "done", config.engine, label="consolidate")
    counts = merge_counts(list(results.stats.values()))
    names = [f.name for f in config.attributes] + [EMPTY]
    removed_by = {name: counts.get("removed_by", {}).get(name, 0) for name in names}
    details = {
        "input_docs": counts.get("input_docs", 0),
        "output_docs": counts.get("output_docs", 0),
        "removed_by": removed_by,
        "chars_removed_by": {name: counts.get("chars_removed_by", {}).get(name, 0) for name in names},
        "input_chars": counts.get("input_chars", 0),
        "output_chars": counts.get("output_chars", 0),
        "shards": len(results.stats),
        "failed_shards": results.failed,
        "cutoffs": {name: list(values) for name, values in cutoffs.items()},
    }
    stats = finish_stage(
        out, StageStats(total=details["input_docs"], kept=details["output_docs"], dropped=Counter(removed_by)), details
    )
    if not results.failed:
        shutil.rmtree(out / WORK_DIR)  # finished; with failed shards the markers stay so a rerun redoes only those
    return stats
