"""The attribute-stage loop: co-partitioned attribute shards, stats.json, a failure budget that resumes, bad input."""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.datakit.real_corpora import write_documents
from tootsie.datakit.attribute_stage import documents, run_attribute_stage
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.stats import STATS_FILE, StageStats
from tootsie.errors import TootsieError


@dataclass(frozen=True)
class LengthConfig:
    """A toy attribute stage: each document's length; documents whose text starts with `fail` break their shard."""

    input: str
    """A document directory."""
    fail: str = "\0"
    """Text prefix that makes annotating a shard raise."""
    batch_rows: int = 2
    """Rows read at a time (small, so a shard is several batches)."""
    engine: EngineConfig = field(default_factory=lambda: EngineConfig(workers=1, retries=0, progress=False))
    """Inline, no retries: a failure is final for this run."""


def annotate_lengths(batches: Iterator[pa.RecordBatch], config: LengthConfig) -> tuple[pa.Table, dict[str, Any]]:
    """`chars` per document; empty documents count as dropped (`empty`)."""
    ids, chars, stage = [], [], StageStats()
    for doc_id, text in documents(batches):
        if text.startswith(config.fail):
            raise RuntimeError(f"cannot annotate {doc_id}")
        ids.append(doc_id)
        chars.append(len(text))
        if text:
            stage.keep()
        else:
            stage.drop("empty")
    return pa.table({"id": ids, "chars": chars}), {"chars": sum(chars), **stage.to_json()}


def _run(config: LengthConfig, out: Path) -> dict[str, Any]:
    return run_attribute_stage(
        config, str(out), name="lengths", annotate=annotate_lengths, details=lambda c: {"chars": c.get("chars", 0)}
    )


def test_writes_attribute_shards_beside_the_documents_and_counts_them(tmp_path: Path) -> None:
    texts = ["alpha", "", "gamma delta", "b", "epsilon"]
    docs = write_documents(texts, tmp_path / "docs", per_shard=3)
    stats = _run(LengthConfig(input=str(docs)), tmp_path / "out")
    for shard in sorted(docs.glob("part-*.parquet")):
        attributes = pq.read_table(tmp_path / "out" / shard.name)
        assert attributes.column("id").to_pylist() == pq.read_table(shard).column("id").to_pylist()
    assert stats == json.loads((tmp_path / "out" / STATS_FILE).read_text())
    assert stats == {
        "docs": 5,
        "chars": sum(map(len, texts)),
        "shards": 2,
        "failed_shards": {},
        "total": 5,
        "kept": 4,
        "dropped": {"empty": 1},
    }
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "part-00000.parquet",
        "part-00001.parquet",
        STATS_FILE,
    ]


def test_a_failed_shard_keeps_the_markers_and_a_rerun_redoes_only_it(tmp_path: Path) -> None:
    docs = write_documents(["one", "two", "BAD three", "four"], tmp_path / "docs", per_shard=2)
    budget = EngineConfig(workers=1, retries=0, max_failed_shards=1, progress=False)
    failed = _run(LengthConfig(input=str(docs), fail="BAD", engine=budget), tmp_path / "out")
    assert failed["shards"] == 1 and list(failed["failed_shards"]) == ["part-00001"]
    assert (tmp_path / "out" / ".lengths" / "done" / "part-00000.json").exists()
    first = (tmp_path / "out" / "part-00000.parquet").stat().st_mtime_ns
    again = _run(LengthConfig(input=str(docs), engine=budget), tmp_path / "out")
    assert again["shards"] == 2 and again["failed_shards"] == {} and again["docs"] == 4
    assert (tmp_path / "out" / "part-00000.parquet").stat().st_mtime_ns == first  # finished shard not redone
    assert not (tmp_path / "out" / ".lengths").exists()


def test_a_shard_without_text_names_the_file_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    pq.write_table(pa.table({"id": ["a"]}), tmp_path / "docs" / "part-00000.parquet")
    with pytest.raises(TootsieError, match=r"part-00000.parquet lacks columns \['text'\]; lengths reads a document"):
        _run(LengthConfig(input=str(tmp_path / "docs")), tmp_path / "out")
