"""Attribute stages: columns about every document, written beside the documents and never into them.

langid, quality and classify each compute per-document attributes (a language,
rule verdicts, a classifier score) and share one loop, which this module owns
(datatrove's `BaseFilter` owns the same one):

1. for each document shard `part-NNNNN.parquet` of `config.input`, check that
   it has `id` and `text` (else a TootsieError naming the shard and the fix);
2. hand its `id`/`text` record batches (`config.batch_rows` rows each) to the
   stage's `annotate(batches, config)`, which returns the attribute table (the
   shard's rows, in their order) and the shard's counts (`StageStats.to_json()`
   keys and any of the stage's own, which `merge_counts` sums);
3. write the table to `<output>/part-NNNNN.parquet` atomically, so consolidate
   reads it co-partitioned with the documents;
4. shards run through `map_shards` (parallel, retried, resumable from the done
   markers in `<output>/.<name>/done`, within the failure budget);
5. `stats.json` (`finish_stage`) holds `docs`, `shards`, `failed_shards`, the
   stage's `details(merged counts)` and the shared `total` / `kept` / `dropped`;
6. when no shard failed the done markers go; otherwise they stay, so a rerun
   redoes only the failed shards.

Adding a stage: a frozen config with `input`, `batch_rows` and `engine`
(`AttributeConfig`), a module-level `annotate` (it runs in worker processes),
and `run_attribute_stage(config, output_path, name=..., annotate=...,
details=...)`.

Example: an `annotate` that returns `pa.table({"id": ids, "chars": lengths})`
and `StageStats(total=n, kept=n).to_json()` for a directory of 2 shards of 3
documents gives two 3-row attribute shards and a `stats.json` with `docs` 6,
`shards` 2 and `failed_shards` {}.
"""

import shutil
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, merge_counts
from tootsie.datakit.parquet_io import parquet_files, write_table_atomic
from tootsie.datakit.stats import StageStats, finish_stage
from tootsie.errors import TootsieError


class AttributeConfig(Protocol):
    """What an attribute stage's config provides: the documents, the batch size and the engine."""

    @property
    def input(self) -> str:
        """A document directory (Parquet shards with `id` and `text`)."""

    @property
    def batch_rows(self) -> int:
        """Rows read from a shard at a time."""

    @property
    def engine(self) -> EngineConfig:
        """Parallelism, retries and failure budget."""


C = TypeVar("C", bound=AttributeConfig)
Annotate = Callable[[Iterator[pa.RecordBatch], C], tuple[pa.Table, dict[str, Any]]]
"""A stage's per-shard work: `id`/`text` batches and the config → (attribute table, the shard's counts)."""


def documents(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[str, str]]:
    """Every (id, text) pair of `id`/`text` batches, in order; a null text reads as ""."""
    for batch in batches:
        ids, texts = batch.column("id").to_pylist(), batch.column("text").to_pylist()
        yield from zip(ids, (text or "" for text in texts), strict=True)


def annotate_shard(task: ShardTask, config: C, *, name: str, annotate: Annotate[C]) -> dict[str, Any]:
    """Map: one document shard → its attribute shard (same rows, same order); return its counts with `docs`."""
    source = pq.ParquetFile(task.inputs[0])
    missing = {"id", "text"} - set(source.schema_arrow.names)
    if missing:
        raise TootsieError(
            f"{task.inputs[0]} lacks columns {sorted(missing)};"
            f" {name} reads a document directory (from normalize or consolidate)"
        )
    table, counts = annotate(source.iter_batches(batch_size=config.batch_rows, columns=["id", "text"]), config)
    write_table_atomic(table, Path(task.output_dir) / Path(task.inputs[0]).name)
    return {"docs": table.num_rows, **counts}


def run_attribute_stage(
    config: C,
    output_path: str,
    *,
    name: str,
    annotate: Annotate[C],
    details: Callable[[dict[str, Any]], Mapping[str, Any]],
) -> dict[str, Any]:
    """Annotate every shard of `config.input` into `output_path`, then write `stats.json` (`details` of the merged
    shard counts, plus `docs`, `shards`, `failed_shards` and the shared counts); return the stats."""
    out = Path(output_path)
    work = out / f".{name}"
    tasks = [
        ShardTask(name=path.stem, inputs=(str(path),), output_dir=str(out)) for path in parquet_files(config.input)
    ]
    shard = partial(annotate_shard, name=name, annotate=annotate)
    results = map_shards(shard, config, tasks, work / "done", config.engine, label=name)
    counts = merge_counts(list(results.stats.values()))
    summary = {
        "docs": counts.get("docs", 0),
        **details(counts),
        "shards": len(results.stats),
        "failed_shards": results.failed,
    }
    stats = finish_stage(out, StageStats.from_json(counts), summary)
    if not results.failed:
        shutil.rmtree(work)  # finished; with failed shards the markers stay so a rerun redoes only those
    return stats
