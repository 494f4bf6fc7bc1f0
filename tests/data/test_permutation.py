"""Permutations are bijections for any length and follow the seeds' constructions."""

from math import gcd

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.data.permutation import FeistelPermutation, LinearPermutation, feistel_bits, make_permutation

KINDS = ("linear", "feistel")
SPECIAL_LENGTHS = (1, 2, 3, 7, 16, 17, 97, 1024, 65_537)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("length", SPECIAL_LENGTHS)
def test_bijection_on_special_lengths(kind: str, length: int) -> None:
    values = make_permutation(kind, length, seed=11)(np.arange(length))
    assert np.array_equal(np.sort(values), np.arange(length))


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS), length=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1))
def test_bijection_property(kind: str, length: int, seed: int) -> None:
    values = make_permutation(kind, length, seed)(np.arange(length))
    assert np.array_equal(np.sort(values), np.arange(length))


@pytest.mark.parametrize("kind", KINDS)
def test_huge_length_stays_in_range_and_is_injective_on_a_window(kind: str) -> None:
    length = 2**33 + 5
    window = np.concatenate([np.arange(50_000), np.arange(length - 50_000, length)])
    values = make_permutation(kind, length, seed=3)(window)
    assert values.min() >= 0 and values.max() < length
    assert len(np.unique(values)) == len(window)


@settings(max_examples=40, deadline=None)
@given(length=st.integers(2, 2**40), seed=st.integers(0, 2**31))
def test_linear_matches_python_integers(length: int, seed: int) -> None:
    permutation = LinearPermutation.from_seed(length, seed)
    assert gcd(permutation.a, length) == 1
    x = np.array([0, 1, length // 2, length - 1], dtype=np.int64)
    expected = [(permutation.a * int(v) + permutation.b) % length for v in x]
    assert permutation(x).tolist() == expected


def test_feistel_power_of_two_is_one_pass_of_the_network() -> None:
    """For N = 2^k with k even, no cycle-walking happens: compare with a scalar reimplementation."""
    length, keys = 256, (3, 9, 1, 14, 7)
    right_bits = feistel_bits(length)
    mask = (1 << right_bits) - 1

    def scalar(x: int) -> int:
        left, right = x >> right_bits, x & mask
        for k in keys:
            left, right = right, left ^ (((right & mask) * 2654435761 + k) & mask)
        return (left << right_bits) | right

    permutation = FeistelPermutation(length, keys)
    assert permutation(np.arange(length)).tolist() == [scalar(x) for x in range(length)]


def test_elementwise_evaluation_matches_batch() -> None:
    permutation = make_permutation("feistel", 10_007, seed=5)
    batch = permutation(np.arange(10_007))
    assert all(permutation(np.array([i]))[0] == batch[i] for i in (0, 1, 5000, 10_006))


def test_out_of_range_index_is_rejected() -> None:
    with pytest.raises(IndexError, match="in \\[0, 10\\)"):
        make_permutation("feistel", 10, seed=0)(np.array([10]))


def test_unknown_kind_names_the_choices() -> None:
    with pytest.raises(ValueError, match="feistel"):
        make_permutation("random", 10, seed=0)
