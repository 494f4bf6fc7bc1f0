"""Block-stratified mixtures: exact counts, batches as uniform slices of blocks, stages and interpolation.

Also batch-size changes, workers, and resume.
"""

from math import ceil, comb
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tootsie.configfile import from_plain, to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureDataset, MixtureStage, block_counts
from tootsie.data.permutation import EraConfig, FeistelConfig, LinearPermutationConfig
from tootsie.errors import TootsieError

BASES = {"a": 1, "b": 11, "c": 21}


@pytest.fixture
def caches(make_cache) -> dict[str, str]:
    return {
        name: make_cache(name, [[base + (i % 7) for i in range(n)] for n in (50, 30, 41)])
        for name, base in BASES.items()
    }


def _config(
    caches: dict[str, str],
    stages: tuple[MixtureStage, ...],
    schedule: BatchSchedule = BatchSchedule.constant(8),
    block_size: int = 16,
    **extra,
) -> MixtureConfig:
    return MixtureConfig(
        caches=caches, stages=stages, seq_len=8, batch_schedule=schedule, block_size=block_size, seed=4, **extra
    )


@settings(max_examples=100, deadline=None)
@given(
    weights=st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 10.0)), min_size=1, max_size=6).filter(
        lambda w: sum(w) > 0.1
    ),
    size=st.integers(1, 300),
)
@example(
    weights=[0.0, 1.0, 1.0], size=1
)  # every floor is 0: the remainder goes to a weighted component, never the zero one
@example(weights=[3.0, 0.0, 7.0], size=10)  # 0.3 * 10 = 2.9999999999999996 still counts as 3
def test_block_counts_are_the_floors_plus_the_remainder_on_the_largest(weights: list[float], size: int) -> None:
    vector = np.array(weights) / sum(weights)
    exact = vector * size
    floors = np.floor(exact + 1e-9).astype(np.int64)
    assert ((floors <= exact + 1e-9) & (floors > exact - 1)).all()  # floors, up to float rounding of an exact share
    counts = block_counts(vector, size)
    extra = counts - floors
    assert (
        counts.sum() == size and (extra >= 0).all() and np.count_nonzero(extra) <= 1
    )  # the whole remainder on one component
    if extra.any():
        receiver = int(np.argmax(extra))
        assert floors[receiver] == floors.max() and vector[receiver] > 0, (counts, floors)
    assert (counts[vector == 0] == 0).all()


def test_every_block_realizes_its_counts(caches) -> None:
    dataset = MixtureDataset(_config(caches, (MixtureStage(0, {"a": 0.5, "b": 0.25, "c": 0.25}),)))
    expected = block_counts(np.array([0.5, 0.25, 0.25]), 16)
    for block in range(6):
        components, _ = dataset.draws(np.arange(block * 16, (block + 1) * 16))
        assert np.array_equal(np.bincount(components, minlength=3), expected)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # caches are read-only
@given(
    seed=st.integers(0, 2**32 - 1),
    first=st.tuples(*[st.sampled_from([0.0, 0.05, 0.3, 1.0, 2.5])] * 3).filter(any),
    second=st.tuples(*[st.sampled_from([0.0, 0.05, 0.3, 1.0, 2.5])] * 3).filter(any),
    block=st.integers(1, 64),
    batch=st.integers(1, 48),
    switch=st.integers(1, 12),
)
def test_every_block_realizes_its_counts_and_every_draw_is_taken_once(
    caches, seed: int, first: tuple, second: tuple, block: int, batch: int, switch: int
) -> None:
    names = sorted(BASES)
    stages = (MixtureStage(0, dict(zip(names, first))), MixtureStage(switch, dict(zip(names, second))))
    dataset = MixtureDataset(
        MixtureConfig(
            caches=caches,
            stages=stages,
            seq_len=8,
            batch_schedule=BatchSchedule.constant(batch),
            block_size=block,
            seed=seed,
        )
    )
    first_segment, second_segment = (
        dataset.segments
    )  # the switch at step `switch` usually cuts a block: a partial one ends the first
    stop = second_segment.start + 3 * block
    components, draws = dataset.draws(np.arange(stop))
    for segment, end in ((first_segment, first_segment.end), (second_segment, stop)):
        for start in range(segment.start, end, block):
            size = min(block, end - start)
            expected = segment.counts if size == block else segment.partial_counts
            assert np.array_equal(np.bincount(components[start : start + size], minlength=3), expected), (start, size)
    for c, weights in enumerate(zip(first, second)):
        taken = np.sort(draws[components == c])
        assert np.array_equal(taken, np.arange(len(taken)))  # no draw skipped, none taken twice
        if not any(weights):
            assert taken.size == 0


@pytest.fixture
def five_caches(make_cache) -> dict[str, str]:
    """Five one-sequence components: enough to compute draws, which never read tokens."""
    return {f"m{i}": make_cache(f"m{i}", [list(range(1, 9))]) for i in range(5)}


def _slice_statistics(dataset: MixtureDataset, batches: int) -> tuple[float, np.ndarray, float]:
    """How the first `batches` batches of a one-stage stream compare with uniform random slices of their blocks.

    A batch is cut at block boundaries into pieces; a piece of m slots of a block
    of S holding K of a component should hold a hypergeometric count of it (mean
    m·K/S, variance m·(K/S)(1 − K/S)(S − m)/(S − 1)), and the k ≥ 2 draws it takes
    of a component should all share one parity with probability
    (C(E, k) + C(O, k)) / C(K, k), E and O the even and odd draws of the block.
    Returns the realized over the hypergeometric count variance (1 for a uniform
    slice), the z-score of each component's summed count, and the z-score of the
    number of parity-locked pieces.
    """
    block, batch = dataset.config.block_size, dataset.config.batch_schedule.batch_size(0)
    counts = dataset.segments[0].counts
    shares = counts / block
    components, draws = dataset.draws(np.arange(batches * batch))
    realized, mean, variance = (np.zeros((batches, len(counts))) for _ in range(3))
    locked = expected = spread = 0.0
    edges = np.union1d(np.arange(0, batches * batch + 1, batch), np.arange(0, batches * batch + 1, block)).tolist()
    for lo, hi in zip(edges[:-1], edges[1:]):
        taken = np.bincount(components[lo:hi], minlength=len(counts))
        realized[lo // batch] += taken
        mean[lo // batch] += (hi - lo) * shares
        variance[lo // batch] += (hi - lo) * shares * (1 - shares) * (block - (hi - lo)) / (block - 1)
        for c in np.flatnonzero(taken >= 2):
            first, k = (
                (lo // block) * int(counts[c]),
                int(taken[c]),
            )  # this block's draws of c are first .. first + K - 1
            evens = (first + int(counts[c]) + 1) // 2 - (first + 1) // 2
            p = (comb(evens, k) + comb(int(counts[c]) - evens, k)) / comb(int(counts[c]), k)
            locked += len(np.unique(draws[lo:hi][components[lo:hi] == c] % 2)) == 1
            expected, spread = expected + p, spread + p * (1 - p)
    ratio = float(((realized - mean) ** 2).sum() / variance.sum()) if variance.sum() else 1.0
    count_z = (realized - mean).sum(axis=0) / np.sqrt(np.maximum(variance.sum(axis=0), 1e-12))
    return ratio, count_z, (locked - expected) / np.sqrt(spread) if spread else 0.0


def _one_stage(caches: dict[str, str], weights: list[float], batch: int, block: int, seed: int) -> MixtureDataset:
    stage = MixtureStage(0, dict(zip(sorted(caches), weights)))
    return MixtureDataset(
        MixtureConfig(
            caches=caches,
            stages=(stage,),
            seq_len=8,
            batch_schedule=BatchSchedule.constant(batch),
            block_size=block,
            seed=seed,
        )
    )


# Tolerances: over 794 random shapes of both tests (about 800 batches each), the variance ratio stayed in 0.87–1.19
# (standard deviation 0.045) and the parity z-score in −3.1..3.6 (standard deviation 1.03). The Feistel slot shuffle
# this replaced gives a ratio of 0.04 at block 256, batch 16 (the example) and fails 48 of 77 random shapes (ratios
# 0.32–2.05, parity z-scores up to 28).
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # caches are read-only
@given(
    seed=st.integers(0, 2**32 - 1),
    weights=st.lists(st.floats(0.05, 1.0), min_size=2, max_size=5),
    batch=st.integers(2, 256),
    extra=st.integers(1, 256),
)
@example(seed=0, weights=[0.5, 0.3, 0.2], batch=16, extra=240)  # docs/case-studies.md: every batch of 16 had one parity
def test_a_batch_smaller_than_a_block_is_a_uniform_random_slice_of_it(
    five_caches, seed: int, weights: list[float], batch: int, extra: int
) -> None:
    block = batch + extra
    ratio, count_z, parity_z = _slice_statistics(
        _one_stage(five_caches, weights, batch, block, seed), batches=max(800, ceil(4 * block / batch))
    )
    assert 0.7 < ratio < 1.4, f"component counts per batch vary {ratio:.2f}× as much as in a random slice"
    assert np.abs(count_z).max() < 6
    assert abs(parity_z) < 6, (
        f"batches draw ranks of one parity far more (or less) often than a random slice: z = {parity_z:.1f}"
    )


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    weights=st.lists(st.floats(0.05, 1.0), min_size=2, max_size=5),
    block=st.integers(4, 64),
    data=st.data(),
)
def test_a_batch_larger_than_a_block_takes_uniform_slices_of_the_blocks_it_cuts(
    five_caches, seed: int, weights: list[float], block: int, data: st.DataObject
) -> None:
    batch = data.draw(st.integers(block + 1, 3 * block).filter(lambda b: b % block))
    ratio, count_z, parity_z = _slice_statistics(_one_stage(five_caches, weights, batch, block, seed), batches=800)
    assert 0.7 < ratio < 1.4 and np.abs(count_z).max() < 6 and abs(parity_z) < 6, (ratio, count_z, parity_z)


def test_transition_realizes_interpolated_weights_step_by_step(caches) -> None:
    stages = (
        MixtureStage(0, {"a": 1.0}),
        MixtureStage(4, {"b": 1.0}, transition_steps=4),
        MixtureStage(20, {"c": 1.0}),
    )
    config = _config(caches, stages, BatchSchedule.constant(20))
    dataset = MixtureDataset(config)
    assert np.allclose(config.weights_at(5), [0.5, 0.5, 0.0]) and np.allclose(config.weights_at(7), [0.0, 1.0, 0.0])
    for step in range(0, 24):
        components, _ = dataset.draws(dataset.sequence_range(step))
        realized = np.bincount(components, minlength=3)
        if 4 <= step < 8:
            assert np.array_equal(realized, block_counts(config.weights_at(step), 20)), step
        else:
            assert realized[int(np.argmax(config.weights_at(step)))] == 20, step


def test_stage_boundaries_hold_under_a_changing_batch_size(caches) -> None:
    schedule = BatchSchedule(((0, 8), (3, 12), (7, 8)))
    stages = (MixtureStage(0, {"a": 1.0, "b": 1.0}), MixtureStage(5, {"c": 1.0}))
    dataset = MixtureDataset(_config(caches, stages, schedule, block_size=5))
    for step in range(12):
        components = dataset.batch(step).component
        assert len(components) == schedule.batch_size(step)
        names = {dataset.component_names[c] for c in components}
        assert names <= ({"a", "b"} if step < 5 else {"c"}), (step, names)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # caches are read-only
@given(step=st.integers(0, 200), workers=st.sampled_from([1, 2, 4, 8]))
def test_worker_slices_concatenate_to_the_global_batch(caches, step: int, workers: int) -> None:
    config = _config(caches, (MixtureStage(0, {"a": 0.3, "b": 0.3}), MixtureStage(50, {"c": 0.4, "a": 0.6}, 10)))
    whole = MixtureDataset(config).batch(step)
    resumed = MixtureDataset(config)  # a fresh object: nothing carried over from earlier steps
    parts = [resumed.batch(step, worker=w, num_workers=workers) for w in range(workers)]
    assert np.array_equal(np.concatenate([p.tokens for p in parts]), whole.tokens)
    assert np.array_equal(np.concatenate([p.component for p in parts]), whole.component)


def test_tokens_come_from_their_component(caches) -> None:
    dataset = MixtureDataset(_config(caches, (MixtureStage(0, {"a": 0.5, "b": 0.5}),)))
    batch = dataset.batch(3)
    for row, component in zip(batch.tokens, batch.component):
        base = BASES[dataset.component_names[component]]
        assert ((row >= base) & (row < base + 7)).all()


def test_epochs_cover_every_sequence_once_and_reshuffle(caches) -> None:
    dataset = MixtureDataset(_config(caches, (MixtureStage(0, {"a": 1.0}),), block_size=1))
    n = dataset.sources["a"].num_sequences
    _, local = dataset.sequence_sources(np.arange(2 * n))
    assert sorted(local[:n].tolist()) == list(range(n)) == sorted(local[n:].tolist())
    assert local[:n].tolist() != local[n:].tolist()


def test_the_permutation_config_and_its_options_reach_the_stream(caches) -> None:
    # Windows of one item shuffle nothing: each epoch reads the component in stored order.
    ordered = MixtureDataset(
        _config(caches, (MixtureStage(0, {"a": 1.0}),), block_size=1, permutation=EraConfig(era_length=1))
    )
    n = ordered.sources["a"].num_sequences
    assert ordered.sequence_sources(np.arange(2 * n))[1].tolist() == list(range(n)) * 2
    streams = {
        name: MixtureDataset(_config(caches, (MixtureStage(0, {"a": 1.0}),), block_size=1, permutation=config))
        .sequence_sources(np.arange(n))[1]
        .tolist()
        for name, config in (
            ("feistel", FeistelConfig()),
            ("feistel-3", FeistelConfig(rounds=3)),
            ("linear", LinearPermutationConfig()),
        )
    }
    assert all(sorted(stream) == list(range(n)) for stream in streams.values())
    assert len({tuple(stream) for stream in streams.values()}) == 3


def test_a_bare_permutation_name_is_refused_with_the_configs(caches) -> None:
    with pytest.raises(ValueError, match=r"permutation='feistel' is a bare name.*'feistel': 'FeistelConfig\(\)'"):
        _config(caches, (MixtureStage(0, {"a": 1.0}),), permutation="feistel")


def test_stage_labels_are_kept_but_not_part_of_the_weights(caches) -> None:
    labeled = _config(caches, (MixtureStage(0, {"a": 1.0}, name="bison", source="retro"),))
    assert from_plain(MixtureConfig, to_plain(labeled), "mixture") == labeled
    plain = MixtureDataset(_config(caches, (MixtureStage(0, {"a": 1.0}),)))
    assert np.array_equal(MixtureDataset(labeled).batch(3).tokens, plain.batch(3).tokens)


def test_exhaustion_stop_names_the_component(caches) -> None:
    dataset = MixtureDataset(_config(caches, (MixtureStage(0, {"b": 1.0}),), block_size=1, exhaustion="stop"))
    n = dataset.sources["b"].num_sequences
    dataset.sequence_sources(np.arange(n))
    with pytest.raises(TootsieError, match="'b' is exhausted"):
        dataset.sequence_sources(np.arange(n, n + 8))


def test_adding_a_component_keeps_the_others_order(caches, make_cache) -> None:
    one = MixtureDataset(_config(caches, (MixtureStage(0, {"a": 1.0}),), block_size=1))
    more = dict(caches, d=make_cache("d", [[30, 31, 32] * 20]))
    two = MixtureDataset(_config(more, (MixtureStage(0, {"a": 1.0}),), block_size=1))
    assert np.array_equal(one.sequence_sources(np.arange(20))[1], two.sequence_sources(np.arange(20))[1])


def test_loss_mask_skips_cross_document_predictions(make_cache) -> None:
    cache = make_cache("docs", [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14, 15, 16]])
    batch = MixtureDataset(
        _config({"d": cache}, (MixtureStage(0, {"d": 1.0}),), BatchSchedule.constant(2), block_size=2)
    ).batch(0)
    for segments, mask in zip(batch.segment_ids, batch.loss_mask):
        assert mask.tolist() == [float(segments[t] == segments[t + 1]) for t in range(7)] + [0.0]


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ((MixtureStage(0, {"a": 0.0, "b": 0.0}),), "sum to a positive"),
        ((MixtureStage(0, {"a": -1.0, "b": 2.0}),), "non-negative"),
        ((MixtureStage(0, {"zz": 1.0}),), "zz"),
        ((MixtureStage(0, {"a": 1.0}), MixtureStage(10, {"b": 1.0}), MixtureStage(5, {"a": 1.0})), "starts before"),
        ((MixtureStage(3, {"a": 1.0}),), "step 0"),
        ((MixtureStage(0, {"a": 1.0}), MixtureStage(10, {"b": 1.0}, 20), MixtureStage(15, {"a": 1.0})), "transition"),
    ],
)
def test_bad_stages_are_rejected_with_the_field(stages: tuple[MixtureStage, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MixtureConfig(caches={"a": "x", "b": "y"}, stages=stages)


def test_a_used_component_with_no_documents_is_an_error(caches, make_cache) -> None:
    empty = dict(caches, e=make_cache("empty", []))
    with pytest.raises(TootsieError, match="has 0 tokens"):
        MixtureDataset(_config(empty, (MixtureStage(0, {"a": 0.5, "e": 0.5}),)))
    MixtureDataset(_config(empty, (MixtureStage(0, {"a": 1.0}),)))  # unused: fine


def test_batch_schedule_offsets_and_validation() -> None:
    schedule = BatchSchedule(((0, 8192), (18_500, 7680), (21_010, 8192)))
    assert schedule.offset(21_010) == 18_500 * 8192 + 2_510 * 7680
    with pytest.raises(ValueError, match="strictly increase"):
        BatchSchedule(((0, 8), (5, 4), (5, 8)))


def test_exposure_counts_epochs_from_the_permutations(make_cache) -> None:
    from tootsie.data.exposure import document_exposure

    cache = make_cache("ten", [[5] * 8 for _ in range(10)])  # ten documents of exactly one sequence each
    dataset = MixtureDataset(
        _config({"d": cache}, (MixtureStage(0, {"d": 1.0}),), BatchSchedule.constant(10), block_size=10)
    )
    assert np.allclose(document_exposure(dataset, 0, 4)["d"], 4.0)


def test_exposure_credits_split_documents_by_tokens(make_cache) -> None:
    from tootsie.data.exposure import document_exposure

    cache = make_cache("split", [[1] * 4, [2] * 12, [3] * 8])  # 24 tokens = 3 sequences of 8, doc 1 spans two
    dataset = MixtureDataset(
        _config({"d": cache}, (MixtureStage(0, {"d": 1.0}),), BatchSchedule.constant(3), block_size=3)
    )
    assert np.allclose(document_exposure(dataset, 0, 1)["d"], [1.0, 1.0, 1.0])
    assert np.allclose(document_exposure(dataset, 0, 5)["d"], [5.0, 5.0, 5.0])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(1, 30), min_size=1, max_size=40), seq_len=st.integers(1, 16))
def test_packed_reads_match_the_per_token_definition(make_cache, lengths: list[int], seq_len: int) -> None:
    from tootsie.data.sequences import PackedSequences
    from tootsie.datakit.token_cache import open_token_cache

    documents, token = [], 0
    for length in lengths:
        documents.append(list(range(token, token + length)))
        token += length
    cache = open_token_cache(
        make_cache(f"p{len(lengths)}-{seq_len}-{sum(lengths)}", [[t % 60000 for t in d] for d in documents], 60000)
    )
    if cache.num_tokens < seq_len:
        return
    sequences = PackedSequences(cache, seq_len)
    indices = np.arange(sequences.num_sequences)[::-1]
    tokens, segments = sequences.read(indices)
    positions = indices[:, None] * seq_len + np.arange(seq_len)[None, :]
    assert np.array_equal(tokens, np.asarray(cache.tokens)[positions])
    assert np.array_equal(segments, np.searchsorted(cache.offsets, positions, side="right") - 1)


def test_document_packing_keeps_documents_whole(make_cache) -> None:
    from tootsie.data.exposure import document_exposure

    cache = make_cache("whole", [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [14]])
    config = _config(
        {"d": cache}, (MixtureStage(0, {"d": 1.0}),), BatchSchedule.constant(3), block_size=3, document_packed=("d",)
    )
    batch = MixtureDataset(config).batch(0)
    rows = {tuple(row[row > 0]) for row in batch.tokens}
    assert rows == {(1, 2, 3), (4, 5, 6, 7, 8, 9, 10, 11), (14,)}  # seq_len 8: the long one is truncated, never split
    for segments, mask in zip(batch.segment_ids, batch.loss_mask):
        length = int((segments >= 0).sum())
        assert mask.tolist() == [1.0] * (length - 1) + [0.0] * (8 - length + 1)
    assert np.allclose(document_exposure(MixtureDataset(config), 0, 2)["d"], [2.0, 1.6, 2.0])


def test_a_cache_in_object_storage_reads_by_byte_range(make_cache) -> None:
    import fsspec

    from tootsie.datakit.token_cache import open_token_cache

    local = make_cache("remote", [[1, 2, 3, 4], [5, 6, 7, 8, 9, 10], [11, 12]])
    fs = fsspec.filesystem("memory")
    for name in ("tokens.bin", "offsets.bin", "ledger.json"):
        fs.pipe(f"/bucket/cache/{name}", Path(local, name).read_bytes())
    remote = open_token_cache("memory://bucket/cache")
    assert remote.num_docs == 3 and remote.document(1).tolist() == [5, 6, 7, 8, 9, 10]
    local_batch = MixtureDataset(
        _config({"d": local}, (MixtureStage(0, {"d": 1.0}),), BatchSchedule.constant(1), block_size=1)
    ).batch(0)
    remote_batch = MixtureDataset(
        _config({"d": "memory://bucket/cache"}, (MixtureStage(0, {"d": 1.0}),), BatchSchedule.constant(1), block_size=1)
    ).batch(0)
    assert np.array_equal(local_batch.tokens, remote_batch.tokens) and np.array_equal(
        local_batch.segment_ids, remote_batch.segment_ids
    )
    fs.pipe("/bucket/cache/tokens.bin", b"\0\0")
    with pytest.raises(TootsieError, match="tokens.bin has 2 bytes"):
        open_token_cache("memory://bucket/cache")
