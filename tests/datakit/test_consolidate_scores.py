"""Consolidate by a score over the whole corpus: top fraction and quantile buckets use cutoffs from every shard."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tootsie.datakit.consolidate import AttributeFilter, ConsolidateConfig, consolidate
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.ids import content_id
from tootsie.datakit.stats import STATS_FILE

ENGINE = EngineConfig(workers=1, retries=0, progress=False)
# Shard 0 holds the high scores, shard 1 the low ones: a per-shard cutoff would keep the top of each.
SCORES = [[0.9, 0.8, 0.7, None], [0.3, 0.2, 0.1, 0.05]]


def _corpus(tmp_path) -> tuple[str, str]:
    for index, scores in enumerate(SCORES):
        texts = [f"document {index}-{row}" for row in range(len(scores))]
        ids = [content_id(t) for t in texts]
        name = f"part-{index:05d}.parquet"
        (tmp_path / "docs").mkdir(exist_ok=True)
        (tmp_path / "attr").mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": ids, "text": texts}), tmp_path / "docs" / name)
        pq.write_table(pa.table({"id": ids, "quality_score": pa.array(scores, pa.float32())}), tmp_path / "attr" / name)
    return str(tmp_path / "docs"), str(tmp_path / "attr")


def _kept(out) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("part-*.parquet")))


def test_top_fraction_is_global_across_shards(tmp_path) -> None:
    docs, attr = _corpus(tmp_path)
    top = AttributeFilter("top", attr, "quality_score", keep_top_fraction=3 / 7)
    stats = consolidate(ConsolidateConfig(input=docs, attributes=(top,), engine=ENGINE), str(tmp_path / "out"))
    kept = _kept(tmp_path / "out").column("text").to_pylist()
    # 7 scored documents: ceil(3/7 * 7) = 3 kept, all from shard 0, plus the unscored one (nulls never drop)
    assert sorted(kept) == ["document 0-0", "document 0-1", "document 0-2", "document 0-3"]
    assert stats["removed_by"]["top"] == 4
    assert stats["cutoffs"] == {"top": [pytest.approx(0.7)]}
    assert json.loads((tmp_path / "out" / STATS_FILE).read_text())["cutoffs"] == stats["cutoffs"]


def test_buckets_keep_the_listed_quantiles_and_record_them(tmp_path) -> None:
    docs, attr = _corpus(tmp_path)
    buckets = AttributeFilter("nemotron", attr, "quality_score", buckets=2, keep_buckets=(1,))
    stats = consolidate(ConsolidateConfig(input=docs, attributes=(buckets,), engine=ENGINE), str(tmp_path / "out"))
    kept = _kept(tmp_path / "out")
    by_text = dict(zip(kept.column("text").to_pylist(), kept.column("quality_score_bucket").to_pylist(), strict=True))
    # the median of the 7 scores is 0.3: the upper bucket holds 0.3 and above
    assert by_text == {"document 0-0": 1, "document 0-1": 1, "document 0-2": 1, "document 0-3": None, "document 1-0": 1}
    assert stats["removed_by"]["nemotron"] == 3
    np.testing.assert_allclose(stats["cutoffs"]["nemotron"], [0.3], rtol=1e-6)


def test_score_filters_are_validated() -> None:
    with pytest.raises(ValueError, match="keep_top_fraction must be in"):
        AttributeFilter("t", "a", "s", keep_top_fraction=0.0)
    with pytest.raises(ValueError, match="keep_buckets a non-empty tuple"):
        AttributeFilter("b", "a", "s", buckets=5, keep_buckets=(5,))
    with pytest.raises(ValueError, match="keep_buckets a non-empty tuple"):
        AttributeFilter("b", "a", "s", buckets=5)
    with pytest.raises(ValueError, match="exactly one of"):
        AttributeFilter("b", "a", "s", keep_top_fraction=0.5, drop_below=0.1)
