"""Global score cutoffs: the top-fraction threshold and quantile bucket edges are exact order statistics."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tootsie.datakit.score_cutoffs import bucket_edges, bucket_of, read_scores, top_fraction_cutoff
from tootsie.errors import TootsieError


def test_cutoffs_of_the_docstring_example() -> None:
    scores = np.arange(1, 11, dtype=np.float32) / 10
    assert top_fraction_cutoff(scores, 0.3, "t") == pytest.approx(0.8)
    edges = bucket_edges(scores, 5, "t")
    assert edges == pytest.approx((0.28, 0.46, 0.64, 0.82))
    assert bucket_of(np.array([0.1, 0.28, 0.5, 0.9], np.float32), edges).tolist() == [0, 1, 2, 4]


def test_top_fraction_keeps_ceil_of_the_fraction_and_ties() -> None:
    rng = np.random.default_rng(0)
    scores = rng.random(1001).astype(np.float32)
    for fraction in (0.001, 0.1, 0.5, 1.0):
        cutoff = top_fraction_cutoff(scores, fraction, "t")
        assert (scores >= cutoff).sum() == int(np.ceil(fraction * len(scores)))
    tied = np.array([0.9, 0.5, 0.5, 0.5, 0.1], np.float32)
    assert (tied >= top_fraction_cutoff(tied, 0.4, "t")).sum() == 4  # ties at the cutoff are all kept


def test_quantile_buckets_are_near_equal_in_size() -> None:
    scores = np.random.default_rng(1).random(10_000).astype(np.float32)
    counts = np.bincount(bucket_of(scores, bucket_edges(scores, 5, "t")), minlength=5)
    assert counts.min() >= 1990 and counts.max() <= 2010


def test_read_scores_spans_shards_and_skips_nulls(tmp_path) -> None:
    for index, values in enumerate([[0.5, None], [0.25]]):
        pq.write_table(pa.table({"s": pa.array(values, pa.float32())}), tmp_path / f"part-{index}.parquet")
    assert read_scores(sorted(tmp_path.glob("*.parquet")), "s").tolist() == [0.5, 0.25]
    with pytest.raises(TootsieError, match="no non-null scores"):
        top_fraction_cutoff(np.zeros(0, np.float32), 0.5, "filter 'q'")
