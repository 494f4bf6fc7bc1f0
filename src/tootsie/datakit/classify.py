"""Classify: a trained quality classifier's score for every document, as an attribute co-partitioned with them.

For each document shard `part-NNNNN.parquet` of `config.input`, the stage
writes `<output>/part-NNNNN.parquet` with the same rows in the same order:
`id` and `quality_score` (float32, the positive-class probability of
`classifier_model.HashedLinearModel`). Documents are never rewritten:
consolidate keeps them by threshold (`drop_below`), by the top fraction over
all shards (`keep_top_fraction`), or by quantile buckets (`keep_buckets`).
The shard loop, resume and `stats.json` are `attribute_stage`'s.

`stats.json`: `{"docs", "shards", "failed_shards", "mean_score", "model",
"model_sha256"}` and the shared `total` / `kept` / `dropped`; with no
threshold known here, every document counts as kept. `model` is the model
file's name relative to the prefix under the executor (`portable`), and
`model_sha256` its bytes' digest, so the same scores under another prefix
give the same file. Wall time goes to `timings.json` (`{"seconds",
"docs_per_second"}`, written after `stats.json`), which the step declares
volatile: documents over the wall time of the whole stage (reading,
featurizing, scoring, writing, every worker process's start included); a
rerun that skips finished shards counts their documents too, so read it from
a fresh run.

Example: a model trained on docstrings (positive) against license texts
scores a docstring shard near 1 and a shard of licenses near 0.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tootsie.configfile import unhashed
from tootsie.datakit.attribute_stage import run_attribute_stage
from tootsie.datakit.classifier_model import load_classifier, model_path
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.stats import StageStats
from tootsie.datakit.tokenizer import file_sha256
from tootsie.executor.manifest import TIMINGS_FILE
from tootsie.executor.portable import portable
from tootsie.executor.step import volatile_outputs
from tootsie.jsonfile import write_json_atomic

SCORE_COLUMN = "quality_score"
"""The attribute column classify writes."""
ATTRIBUTE_SCHEMA = pa.schema([("id", pa.string()), (SCORE_COLUMN, pa.float32())])


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


def annotate_scores(batches: Iterator[pa.RecordBatch], config: ClassifyConfig) -> tuple[pa.Table, dict[str, Any]]:
    """Score one shard's documents, a batch at a time: the attribute table and its counts (every document kept)."""
    model = load_classifier(config.model)
    ids: list[pa.Array] = []
    scores: list[np.ndarray] = []
    for batch in batches:
        ids.append(batch.column("id"))
        scores.append(model.scores(batch.column("text").to_pylist()))
    score = np.concatenate(scores) if scores else np.zeros(0, np.float32)
    table = pa.table(
        {"id": pa.concat_arrays(ids) if ids else pa.array([], pa.string()), SCORE_COLUMN: score},
        schema=ATTRIBUTE_SCHEMA,
    )
    stage = StageStats(total=len(score), kept=len(score))
    return table, {"score_sum": float(score.sum()), **stage.to_json()}


@volatile_outputs(TIMINGS_FILE)
def classify(config: ClassifyConfig, output_path: str) -> dict[str, Any]:
    """Write a `quality_score` attribute shard for every shard of `config.input`, `stats.json`, then `timings.json`.

    Returns `stats.json`'s content with the timings added."""
    started = time.perf_counter()
    load_classifier(config.model)  # a bad model file fails here, once, not in every shard
    model = model_path(config.model)

    def details(counts: dict[str, Any]) -> dict[str, Any]:
        docs = counts.get("docs", 0)
        return {
            "mean_score": counts.get("score_sum", 0.0) / docs if docs else None,
            "model": portable(model),
            "model_sha256": file_sha256(model),
        }

    stats = run_attribute_stage(config, output_path, name="classify", annotate=annotate_scores, details=details)
    seconds = time.perf_counter() - started
    docs = stats["docs"]
    timings = {"seconds": round(seconds, 3), "docs_per_second": round(docs / seconds, 1) if seconds > 0 else None}
    write_json_atomic(Path(output_path) / TIMINGS_FILE, timings)
    return {**stats, **timings}
