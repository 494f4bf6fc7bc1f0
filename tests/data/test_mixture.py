"""Block-stratified mixtures: exact counts per block, deterministic, worker-sliceable batches."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.data.mixture import MixtureConfig, MixtureDataset


def _dataset(make_cache, weights: dict[str, float], block_size: int = 16, batch_size: int = 8) -> MixtureDataset:
    caches = {
        name: make_cache(name, [[base + (i % 7) for i in range(n)] for n in (50, 30, 41)])
        for name, base in (("a", 1), ("b", 11), ("c", 21))
    }
    return MixtureDataset(MixtureConfig(caches=caches, weights=weights, seq_len=8, batch_size=batch_size, block_size=block_size, seed=4))


@settings(max_examples=30, deadline=None)
@given(
    weights=st.lists(st.floats(0.0, 10.0), min_size=3, max_size=3).filter(lambda w: sum(w) > 0.1),
    block_size=st.integers(3, 64),
)
def test_block_counts_are_exact_and_sum_to_block(weights: list[float], block_size: int) -> None:
    config = MixtureConfig(caches={"a": "x", "b": "y", "c": "z"}, weights=dict(zip("abc", weights)), block_size=block_size)
    counts = config.block_counts()
    assert sum(counts.values()) == block_size
    total = sum(weights)
    for name, weight in zip("abc", weights):
        assert counts[name] >= int(np.floor(weight / total * block_size))


def test_every_block_realizes_its_counts(make_cache) -> None:
    dataset = _dataset(make_cache, {"a": 0.5, "b": 0.25, "c": 0.25}, block_size=16)
    expected = dataset.config.block_counts()
    for block in range(5):
        components, _ = dataset.sequence_sources(np.arange(block * 16, (block + 1) * 16))
        realized = {name: int((components == i).sum()) for i, name in enumerate(dataset.component_names)}
        assert realized == expected


def test_batch_is_deterministic_and_tokens_come_from_the_right_component(make_cache) -> None:
    dataset = _dataset(make_cache, {"a": 0.5, "b": 0.5, "c": 0.0})
    first, again = dataset.batch(3), _dataset(make_cache, {"a": 0.5, "b": 0.5, "c": 0.0}).batch(3)
    assert np.array_equal(first.tokens, again.tokens)
    for row, component in zip(first.tokens, first.component):
        base = {"a": 1, "b": 11, "c": 21}[dataset.component_names[component]]
        assert ((row >= base) & (row < base + 7)).all()
    assert (first.component != dataset.component_names.index("c")).all()


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_workers_slices_concatenate_to_the_global_batch(make_cache, workers: int) -> None:
    dataset = _dataset(make_cache, {"a": 0.3, "b": 0.3, "c": 0.4})
    whole = dataset.batch(5)
    parts = [dataset.batch(5, worker=w, num_workers=workers) for w in range(workers)]
    assert np.array_equal(np.concatenate([p.tokens for p in parts]), whole.tokens)
    assert np.array_equal(np.concatenate([p.component for p in parts]), whole.component)


def test_epochs_cover_every_sequence_once_per_epoch(make_cache) -> None:
    dataset = _dataset(make_cache, {"a": 1.0, "b": 0.0, "c": 0.0}, block_size=1)
    n = dataset.sources["a"].num_sequences
    _, local = dataset.sequence_sources(np.arange(2 * n))
    assert sorted(local[:n].tolist()) == list(range(n)) and sorted(local[n:].tolist()) == list(range(n))
    assert local[:n].tolist() != local[n:].tolist()


def test_loss_mask_skips_cross_document_predictions(make_cache) -> None:
    cache = make_cache("docs", [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14, 15, 16]])
    dataset = MixtureDataset(MixtureConfig(caches={"d": cache}, weights={"d": 1.0}, seq_len=8, batch_size=2, block_size=2))
    batch = dataset.batch(0)
    for tokens, segments, mask in zip(batch.tokens, batch.segment_ids, batch.loss_mask):
        for t in range(7):
            assert mask[t] == (segments[t] == segments[t + 1])
        assert mask[7] == 0


@pytest.mark.parametrize(
    ("weights", "message"),
    [({"a": 0.0, "b": 0.0}, "positive"), ({"a": -1.0, "b": 2.0}, "non-negative"), ({"zz": 1.0}, "zz")],
)
def test_bad_weights_are_rejected_with_the_field(weights: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MixtureConfig(caches={"a": "x", "b": "y"}, weights=weights)
