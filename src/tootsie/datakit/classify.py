"""Classify: a trained quality classifier's score for every document, as an attribute co-partitioned with them.

For each document shard `part-NNNNN.parquet` of `config.input`, the stage
writes `<output>/part-NNNNN.parquet` with the same rows in the same order:
`id` and `quality_score` (float32, the positive-class probability of
`classifier_model.HashedLinearModel`). Documents are never rewritten:
consolidate keeps them by threshold (`drop_below`), by the top fraction over
all shards (`keep_top_fraction`), or by quantile buckets (`keep_buckets`).

`stats.json`: `{"docs", "shards", "failed_shards", "mean_score", "model",
"model_sha256"}` and the shared `total` / `kept` / `dropped`; with no
threshold known here, every document counts as kept. `model` is the model
file's name relative to the prefix under the executor (`portable`), and
`model_sha256` its bytes' digest, so the same scores under another prefix
give the same file. Wall time goes to `timings.json` (`{"seconds",
"docs_per_second"}`), which the step declares volatile: documents over the
wall time of the whole stage (reading, featurizing, scoring, writing, every
worker process's start included); a rerun that skips finished shards counts
their documents too, so read it from a fresh run.

Example: a model trained on docstrings (positive) against license texts
scores a docstring shard near 1 and a shard of licenses near 0.
"""

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tootsie.configfile import unhashed
from tootsie.datakit.classifier_model import load_model, model_path
from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, merge_counts
from tootsie.datakit.parquet_io import parquet_files, write_table_atomic
from tootsie.datakit.stats import StageStats, finish_stage
from tootsie.datakit.tokenizer import file_sha256
from tootsie.errors import TootsieError
from tootsie.executor.portable import portable
from tootsie.executor.step import volatile_outputs
from tootsie.jsonfile import write_json_atomic

WORK_DIR = ".classify"
SCORE_COLUMN = "quality_score"
"""The attribute column classify writes."""
ATTRIBUTE_SCHEMA = pa.schema([("id", pa.string()), (SCORE_COLUMN, pa.float32())])
TIMINGS_FILE = "timings.json"
"""Wall time of the step: declared volatile (listed in the manifest, never compared), unlike `stats.json`."""


@dataclass(frozen=True)
class ClassifyConfig:
    """Which documents to score with which trained classifier."""

    input: str
    """A document directory (Parquet shards with `id` and `text`)."""
    model: str
    """A train-classifier output directory, or its `classifier.safetensors`."""
    batch_rows: int = unhashed(1024)
    """Documents read and scored at a time."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Parallelism, retries and failure budget (not hashed)."""

    def __post_init__(self) -> None:
        if self.batch_rows < 1:
            raise ValueError(f"ClassifyConfig.batch_rows must be >= 1, got {self.batch_rows!r}")


def classify_shard(task: ShardTask, config: ClassifyConfig) -> dict[str, Any]:
    """Map: score one document shard into its attribute shard; return its counts."""
    source = pq.ParquetFile(task.inputs[0])
    missing = {"id", "text"} - set(source.schema_arrow.names)
    if missing:
        raise TootsieError(
            f"{task.inputs[0]} lacks columns {sorted(missing)};"
            " classify reads a document directory (from normalize or consolidate)"
        )
    model = load_model(config.model)
    ids: list[pa.Array] = []
    scores: list[np.ndarray] = []
    for batch in source.iter_batches(batch_size=config.batch_rows, columns=["id", "text"]):
        ids.append(batch.column("id"))
        scores.append(model.scores(batch.column("text").to_pylist()))
    score = np.concatenate(scores) if scores else np.zeros(0, np.float32)
    table = pa.table(
        {"id": pa.concat_arrays(ids) if ids else pa.array([], pa.string()), SCORE_COLUMN: score},
        schema=ATTRIBUTE_SCHEMA,
    )
    write_table_atomic(table, Path(task.output_dir) / Path(task.inputs[0]).name)
    stage = StageStats(total=len(score), kept=len(score))
    return {"docs": len(score), "score_sum": float(score.sum()), **stage.to_json()}


@volatile_outputs(TIMINGS_FILE)
def classify(config: ClassifyConfig, output_path: str) -> dict[str, Any]:
    """Write a `quality_score` attribute shard for every shard of `config.input`, `timings.json`, then `stats.json`.

    Returns `stats.json`'s content with the timings added."""
    started = time.perf_counter()
    out = Path(output_path)
    load_model(config.model)  # a bad model file fails here, once, not in every shard
    tasks = [
        ShardTask(name=path.stem, inputs=(str(path),), output_dir=str(out)) for path in parquet_files(config.input)
    ]
    results = map_shards(classify_shard, config, tasks, out / WORK_DIR / "done", config.engine, label="classify")
    counts = merge_counts(list(results.stats.values()))
    docs = counts.get("docs", 0)
    seconds = time.perf_counter() - started
    timings = {"seconds": round(seconds, 3), "docs_per_second": round(docs / seconds, 1) if seconds > 0 else None}
    write_json_atomic(out / TIMINGS_FILE, timings)
    model = model_path(config.model)
    details = {
        "docs": docs,
        "shards": len(results.stats),
        "failed_shards": results.failed,
        "mean_score": counts.get("score_sum", 0.0) / docs if docs else None,
        "model": portable(model),
        "model_sha256": file_sha256(model),
    }
    stats = finish_stage(out, StageStats.from_json(counts), details)
    if not results.failed:
        shutil.rmtree(out / WORK_DIR)  # finished; with failed shards the markers stay so a rerun redoes only those
    return {**stats, **timings}
