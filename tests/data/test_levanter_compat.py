"""Levanter-order permutations equal a scalar reimplementation of Levanter's `_prp.py`, index for index.

The reference below is written from Levanter's spec on Python ints (seed from
`jax.random.randint`, PCG64 draws, LCG or Feistel with cycle-walking), sharing
no code with tootsie's vectorized permutations.
"""

import math

import jax
import numpy as np
import pytest

from tootsie.data.levanter_compat import levanter_seed, permutation


def _levanter_parameters(kind: str, length: int, key: jax.Array) -> tuple[int, ...]:
    rng = np.random.Generator(np.random.PCG64(int(jax.random.randint(key, (), 0, 2**30))))
    if kind == "linear":
        if length == 1:
            return (1, 0)
        a = int(rng.integers(1, length))
        while math.gcd(a, length) != 1:
            a = int(rng.integers(1, length))
        return (a, int(rng.integers(0, length)))
    right_bits = (1 << (length - 1).bit_length()).bit_length() - 1
    right_bits -= right_bits // 2
    return tuple(int(k) for k in rng.integers(0, 1 << right_bits, size=5, dtype=np.uint64))


def _reference(kind: str, length: int, params: tuple[int, ...], x: int) -> int:
    if kind == "linear":
        return (params[0] * x + params[1]) % length
    if length == 1:
        return 0
    bits = (1 << (length - 1).bit_length()).bit_length() - 1
    right_bits = bits - bits // 2
    mask = (1 << right_bits) - 1
    value = x
    while True:
        left, right = value >> right_bits, value & mask
        for k in params:
            left, right = right, left ^ (((right & mask) * 2654435761 + k) & mask)
        value = (left << right_bits) | right
        if value < length:
            return value


@pytest.mark.parametrize("kind", ["linear", "feistel"])
@pytest.mark.parametrize("length", [1, 2, 3, 10, 1000, 4097, 2**20 + 3, 10**9, 2**33 + 5])
@pytest.mark.parametrize("key_seed", [0, 7])
def test_matches_the_scalar_reference(kind: str, length: int, key_seed: int) -> None:
    key = jax.random.PRNGKey(key_seed)
    x = np.unique(
        np.concatenate([np.arange(min(length, 300)), np.random.default_rng(key_seed).integers(0, length, size=300)])
    )
    params = _levanter_parameters(kind, length, key)
    expected = [_reference(kind, length, params, int(v)) for v in x]
    assert permutation(kind, length, key)(x).tolist() == expected


def test_pinned_values_for_prng_key_0() -> None:
    """Regression values, each re-derived by the scalar reference (JAX >= 0.5 default: threefry partitionable)."""
    key = jax.random.PRNGKey(0)
    with jax.threefry_partitionable(True):
        assert levanter_seed(key) == int(jax.random.randint(key, (), 0, 2**30)) == 31_327_077
        assert _levanter_parameters("linear", 1000, key) == (283, 462)
        assert _levanter_parameters("feistel", 1000, key) == (9, 14, 5, 22, 29)
        for kind, expected in (("linear", [462, 745, 28, 179]), ("feistel", [908, 612, 860, 393])):
            x = np.array([0, 1, 2, 999])
            assert [_reference(kind, 1000, _levanter_parameters(kind, 1000, key), int(v)) for v in x] == expected
            assert permutation(kind, 1000, key)(x).tolist() == expected


def test_seed_follows_jax_threefry_setting() -> None:
    """The seed is JAX's: switching threefry_partitionable (the pre-0.5 default) changes it, as it does in Levanter."""
    key = jax.random.PRNGKey(0)
    with jax.threefry_partitionable(False):
        legacy = levanter_seed(key)
        assert legacy == int(jax.random.randint(key, (), 0, 2**30))
    with jax.threefry_partitionable(True):
        assert levanter_seed(key) != legacy


def test_typed_and_raw_keys_agree() -> None:
    x = np.arange(1000)
    assert np.array_equal(
        permutation("feistel", 1000, jax.random.key(3))(x), permutation("feistel", 1000, jax.random.PRNGKey(3))(x)
    )


def test_feistel_rounds_are_levanters_keyword() -> None:
    key = jax.random.PRNGKey(1)
    assert len(permutation("feistel", 1000, key, rounds=7).keys) == 7


def test_numpy2_float64_reproduces_levanters_rounding() -> None:
    """Under NumPy >= 2 Levanter's int64 a times a uint64 array is float64: rounded once a*x + b passes 2^53."""
    key, length = jax.random.PRNGKey(0), 10**9
    exact = permutation("linear", length, key)
    rounded = permutation("linear", length, key, numpy2_float64=True)
    x = np.random.default_rng(0).integers(length // 2, length, size=200_000)
    expected = [int(math.fmod(float(exact.a) * float(v) + float(exact.b), float(length))) for v in x[:2000]]
    assert rounded(x[:2000]).tolist() == expected
    assert len(np.unique(rounded(x))) < len(np.unique(x)) == len(np.unique(exact(x)))  # no longer a permutation
    small = np.arange(1000)
    assert np.array_equal(
        permutation("linear", 1000, key, numpy2_float64=True)(small), permutation("linear", 1000, key)(small)
    )


def test_errors_name_the_fix() -> None:
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match=r"only \['linear', 'feistel'\], got kind='era'"):
        permutation("era", 10, key)
    with pytest.raises(ValueError, match="numpy2_float64 applies to kind 'linear' only"):
        permutation("feistel", 10, key, numpy2_float64=True)
    with pytest.raises(ValueError, match=r"\['rounds'\] do not apply to permutation 'linear'"):
        permutation("linear", 10, key, rounds=5)
