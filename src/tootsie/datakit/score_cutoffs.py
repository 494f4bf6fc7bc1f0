"""Global cutoffs of a score column over every shard: the top-fraction threshold and quantile bucket edges.

Consolidate keeps "the top 10 % by quality_score" or "buckets 3 and 4 of 5"
(Nemotron-CC's quantile buckets) over the whole corpus, not per shard, so the
cutoffs are computed once, before the shards run, from the column of every
attribute shard: the non-null scores are read into one float32 array (4 bytes
a document: 10^8 documents take 400 MB) and the cutoffs are exact order
statistics of it. Every shard then compares its own scores to the same
numbers, so the result does not depend on how documents fall into shards.

Ties: the top-fraction cutoff is the k-th highest score, k = ceil(fraction *
n), and every document scoring at least that is kept, so ties at the cutoff
can keep slightly more than the fraction. Bucket b (0 = lowest) holds scores in
[edge[b-1], edge[b]), edges being the 1/n, ..., (n-1)/n quantiles.

Example: scores 0.1, 0.2, ..., 1.0 and fraction 0.3 give cutoff 0.8 (0.8, 0.9
and 1.0 kept); 5 buckets give edges at 0.28, 0.46, 0.64, 0.82 and put 0.9 in
bucket 4.
"""

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from jaxtyping import Float32, Int64

from tootsie.errors import TootsieError


def read_scores(paths: Sequence[Path], column: str) -> Float32[np.ndarray, " docs"]:
    """The non-null values of `column` in every attribute shard of `paths`, as one float32 array."""
    parts = []
    for path in paths:
        values = pq.read_table(path, columns=[column]).column(column)
        parts.append(pc.drop_null(values).to_numpy().astype(np.float32))
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def top_fraction_cutoff(scores: Float32[np.ndarray, " docs"], fraction: float, what: str) -> float:
    """The k-th highest score, k = ceil(fraction * n): keeping scores >= it keeps the top `fraction`."""
    if not len(scores):
        raise TootsieError(f"{what}: no non-null scores in any shard, so there is no top fraction to keep")
    k = max(1, math.ceil(fraction * len(scores)))
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


def bucket_edges(scores: Float32[np.ndarray, " docs"], buckets: int, what: str) -> tuple[float, ...]:
    """The `buckets - 1` interior quantile edges of `scores`, lowest first."""
    if not len(scores):
        raise TootsieError(f"{what}: no non-null scores in any shard, so there are no quantile buckets")
    return tuple(float(edge) for edge in np.quantile(scores, np.arange(1, buckets) / buckets))


def bucket_of(scores: Float32[np.ndarray, " docs"], edges: Sequence[float]) -> Int64[np.ndarray, " docs"]:
    """The quantile bucket (0 = lowest) of every score: the number of edges at or below it."""
    return np.searchsorted(np.asarray(edges, np.float32), scores, side="right").astype(np.int64)
