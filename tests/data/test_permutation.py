"""Permutations are bijections for any length and follow the seeds' constructions."""

from math import gcd

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.configfile import from_plain, to_plain
from tootsie.data.permutation import (
    PERMUTATIONS,
    BlockPermutation,
    EraPermutation,
    FeistelPermutation,
    LinearPermutation,
    PermutationChoice,
    affine_mod,
    cycle_walk,
    feistel_bits,
    feistel_rounds,
    make_permutation,
    permutation_config,
    window_keys,
)

KINDS = tuple(PERMUTATIONS)
SPECIAL_LENGTHS = (1, 2, 3, 7, 16, 17, 97, 1024, 65_537)
# Small windows so that short lengths still have several windows and partial ones.
SMALL_OPTIONS = {"linear": {}, "feistel": {}, "era": {"era_length": 7}, "block": {"block_size": 3, "window_blocks": 2}}


def _is_bijection(values: np.ndarray, length: int) -> bool:
    return bool(np.array_equal(np.sort(values), np.arange(length)))


def _scalar_feistel(x: int, keys: tuple[int, ...], length: int) -> int:
    """The seeds' network on Python ints: split, rounds, join, cycle-walk."""
    bits = (length - 1).bit_length()
    right_bits = bits - bits // 2
    mask = (1 << right_bits) - 1
    while True:
        left, right = x >> right_bits, x & mask
        for k in keys:
            left, right = right, left ^ (((right & mask) * 2654435761 + k) & mask)
        x = (left << right_bits) | right
        if x < length:
            return x


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("length", SPECIAL_LENGTHS)
def test_bijection_on_special_lengths(kind: str, length: int) -> None:
    assert _is_bijection(make_permutation(kind, length, seed=11)(np.arange(length)), length)
    assert _is_bijection(make_permutation(kind, length, seed=11, **SMALL_OPTIONS[kind])(np.arange(length)), length)


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    length=st.integers(1, 5000),
    seed=st.integers(0, 2**32 - 1),
    window=st.integers(1, 300),
    blocks=st.integers(1, 9),
)
def test_bijection_property(kind: str, length: int, seed: int, window: int, blocks: int) -> None:
    options = {
        "linear": {},
        "feistel": {},
        "era": {"era_length": window},
        "block": {"block_size": window, "window_blocks": blocks},
    }[kind]
    assert _is_bijection(make_permutation(kind, length, seed, **options)(np.arange(length)), length)


@pytest.mark.parametrize("kind", KINDS)
def test_huge_length_stays_in_range_and_is_injective_on_a_window(kind: str) -> None:
    length = 2**33 + 5
    window = np.concatenate([np.arange(50_000), np.arange(length - 50_000, length)])
    values = make_permutation(kind, length, seed=3)(window)
    assert values.dtype == np.int64 and values.min() >= 0 and values.max() < length
    assert len(np.unique(values)) == len(window)


@settings(max_examples=40, deadline=None)
@given(length=st.integers(2, 2**40), seed=st.integers(0, 2**31))
def test_linear_matches_python_integers(length: int, seed: int) -> None:
    permutation = LinearPermutation.from_seed(length, seed)
    assert gcd(permutation.a, length) == 1
    x = np.array([0, 1, length // 2, length - 1], dtype=np.int64)
    assert permutation(x).tolist() == [(permutation.a * int(v) + permutation.b) % length for v in x]


@pytest.mark.parametrize("length", [2**40 - 3, 2**43 + 5, 2**62 - 57])
def test_linear_does_not_overflow_at_large_lengths(length: int) -> None:
    """Near-maximal a and x: a*x is far past 2^64, the result must still be exact (odd length: gcd(N - 2, N) = 1)."""
    permutation = LinearPermutation(length, a=length - 2, b=length - 1)
    x = np.array([0, 1, 2**20 + 7, length // 3, length - 2, length - 1], dtype=np.int64)
    assert permutation(x).tolist() == [(permutation.a * int(v) + permutation.b) % length for v in x]


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 2**63 - 1), data=st.data())
def test_affine_mod_is_exact(n: int, data: st.DataObject) -> None:
    a, b = data.draw(st.integers(0, 2**64)), data.draw(st.integers(0, n - 1))
    x = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
    assert affine_mod(a, np.array(x, dtype=np.uint64), b, n).tolist() == [(a * v + b) % n for v in x]


@pytest.mark.parametrize(
    "length, expected", [(1, 0), (2, 1), (3, 1), (4, 1), (5, 2), (8, 2), (9, 2), (1000, 5), (2**33 + 5, 17)]
)
def test_feistel_bits_split_as_the_seeds_say(length: int, expected: int) -> None:
    """m = next power of two, bits = log2 m, right half = bits - bits // 2."""
    assert feistel_bits(length) == expected


@pytest.mark.parametrize("length", [256, 1000, 5000, 65_537])
def test_feistel_matches_a_scalar_reimplementation(length: int) -> None:
    keys = tuple(int(k) for k in np.random.default_rng(length).integers(0, 1 << feistel_bits(length), size=5))
    x = np.unique(np.random.default_rng(1).integers(0, length, size=300))
    assert FeistelPermutation(length, keys)(x).tolist() == [_scalar_feistel(int(v), keys, length) for v in x]


def test_cycle_walk_with_a_key_column_per_item_matches_one_network_per_item() -> None:
    """The mixture passes keys `[rounds, n]`; each item must see exactly its own column."""
    length, right_bits = 1000, feistel_bits(1000)
    keys = np.random.default_rng(0).integers(0, 1 << right_bits, size=(5, 400), dtype=np.uint64)
    x = np.random.default_rng(1).integers(0, length, size=400).astype(np.uint64)
    out = cycle_walk(x, keys, right_bits, length)
    assert out.tolist() == [_scalar_feistel(int(v), tuple(int(k) for k in keys[:, i]), length) for i, v in enumerate(x)]
    shared = keys[:, 0]
    assert np.array_equal(feistel_rounds(x, shared, right_bits), feistel_rounds(x, shared[:, None], right_bits))


def test_window_keys_are_a_function_of_each_items_window() -> None:
    windows = np.array([5, 5, 5, 2, 2, 9, 5, 0], dtype=np.uint64)
    together = window_keys(7, windows, 5, 11)
    alone = np.concatenate([window_keys(7, windows[i : i + 1], 5, 11) for i in range(windows.size)], axis=1)
    assert np.array_equal(together, alone)
    assert together.max() < 2**11 and not np.array_equal(together[:, 0], together[:, 3])


@pytest.mark.parametrize("length", [10, 64, 1000, 1003])
def test_era_keeps_items_in_their_window_and_shuffles_the_partial_one(length: int) -> None:
    era = EraPermutation(length, era_length=64, seed=4)
    values = era(np.arange(length))
    assert np.array_equal(values // 64, np.arange(length) // 64)
    tail_start = length - length % 64
    assert _is_bijection(values[tail_start:] - tail_start, length - tail_start)
    windows = values[: length - length % 64].reshape(-1, 64) % 64
    assert len({row.tobytes() for row in windows}) == len(windows)  # each window its own order


@pytest.mark.parametrize("length", [4096, 4096 + 100, 3 * 512 + 37])
def test_block_windows_read_whole_blocks(length: int) -> None:
    block = BlockPermutation(length, block_size=32, window_blocks=8, seed=9)
    values = block(np.arange(length))
    full_blocks = length // 32
    for start in range(0, length, 32 * 8):
        sources = values[start : start + 32 * 8] // 32
        blocks, counts = np.unique(sources, return_counts=True)
        full = blocks < full_blocks
        assert np.all(counts[full] == 32)  # a window reads each of its full blocks entirely
        assert np.all(counts[~full] == length % 32)
    assert np.array_equal(np.sort(values[values >= full_blocks * 32]), np.arange(full_blocks * 32, length))
    assert not np.array_equal(np.sort(values[: 32 * 8] // 32), np.repeat(np.arange(8), 32))  # blocks do move


def test_elementwise_evaluation_matches_batch_and_keeps_shape() -> None:
    for kind in KINDS:
        permutation = make_permutation(kind, 10_007, seed=5, **SMALL_OPTIONS[kind])
        batch = permutation(np.arange(10_007))
        assert all(permutation(np.array([i]))[0] == batch[i] for i in (0, 1, 5000, 10_006))
        assert np.array_equal(permutation(np.arange(12).reshape(3, 4)), batch[:12].reshape(3, 4))


@pytest.mark.parametrize("kind", KINDS)
def test_registry_contract(kind: str) -> None:
    """Every member builds from defaults, is deterministic in its seed, and the seed matters."""
    config = PERMUTATIONS[kind]()
    first, again, other = (config.build(50_000, seed)(np.arange(50_000)) for seed in (1, 1, 2))
    assert first.dtype == np.int64 and np.array_equal(first, again) and not np.array_equal(first, other)
    assert permutation_config(kind) == config


@pytest.mark.parametrize("kind", KINDS)
def test_config_files_pick_the_kind_and_its_options(kind: str) -> None:
    config = PERMUTATIONS[kind](**SMALL_OPTIONS[kind])
    plain = to_plain(config)
    assert plain["kind"] == kind
    loaded = from_plain(PermutationChoice, plain, "data.permutation")
    assert loaded == config
    assert np.array_equal(
        loaded.build(1000, 3)(np.arange(1000)), make_permutation(kind, 1000, 3, **SMALL_OPTIONS[kind])(np.arange(1000))
    )


def test_forced_multiplier_keeps_the_drawn_offset() -> None:
    drawn = LinearPermutation.from_seed(1_000_003, 3)
    forced = make_permutation("linear", 1_000_003, 3, multiplier=977)
    assert (forced.a, forced.b) == (977, drawn.b)
    with pytest.raises(ValueError, match="multiplier=4 must be positive and coprime with length=10"):
        make_permutation("linear", 10, 0, multiplier=4)


def test_out_of_range_index_is_rejected() -> None:
    with pytest.raises(IndexError, match="in \\[0, 10\\)"):
        make_permutation("feistel", 10, seed=0)(np.array([10]))
    # The permutation's own check names integers; under the tests' shape check (tests/shape_check.py) the
    # `Integer[ndarray, ...]` hint refuses the floats first. Either way it is a TypeError about integers.
    with pytest.raises(TypeError, match="integers|Integer\\["):
        make_permutation("linear", 10, seed=0)(np.array([1.5]))


def test_unknown_kind_and_option_name_the_choices() -> None:
    with pytest.raises(ValueError, match="feistel"):
        make_permutation("random", 10, seed=0)
    with pytest.raises(
        ValueError, match=r"\['era_length'\] do not apply to permutation 'linear'; its options are \['multiplier'\]"
    ):
        make_permutation("linear", 10, seed=0, era_length=3)
    with pytest.raises(ValueError, match="era_length must be >= 1, got era_length=0"):
        make_permutation("era", 10, seed=0, era_length=0)
