"""Stateless pseudo-random permutations of `[0, N)`, vectorized over numpy arrays.

A permutation here is a pure function of `(index, parameters)`: no table of N
entries is ever built, so shuffling a 10^9-sequence corpus costs nothing up
front, and the position of any item can be computed from its index alone. That
is what makes `batch(step)` stateless and a run resumable anywhere.

Two constructions, as the seeds specify (see SYSTEM.md "Facts for Levanter-order
compatibility"):

- `linear`: `p(x) = (a*x + b) mod N` with `gcd(a, N) = 1`. Cheap, but nearby
  indices stay nearby modulo a stride: on an ordered corpus the 32B cooldown
  saw a loss "phase shift" from exactly this.
- `feistel`: a 5-round Feistel network on the bits of the next power of two
  with round function `F(R, k) = ((R & mask) * 2654435761 + k) & mask`, and
  cycle-walking to stay inside `[0, N)`. Mixes well; the 32B Mantis fix.

Example: `FeistelPermutation.from_seed(10, seed=0)(np.arange(10))` is a
reordering of 0..9; calling it on `[3]` alone gives the same value as entry 3.
"""

from dataclasses import dataclass
from math import gcd
from typing import Protocol

import numpy as np

FEISTEL_MULTIPLIER = np.uint64(2654435761)  # Knuth's multiplicative hash constant, as in the seeds
FEISTEL_ROUNDS = 5
MULMOD_SPLIT_BITS = 20  # a*x mod N in two halves keeps every product below 2^64 for N < 2^44


class Permutation(Protocol):
    """A bijection on `[0, length)` evaluated elementwise."""

    length: int

    def __call__(self, indices: np.ndarray) -> np.ndarray: ...


def _check_indices(indices: np.ndarray, length: int) -> np.ndarray:
    values = np.asarray(indices, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() >= length):
        raise IndexError(f"permutation indices must lie in [0, {length}), got min={values.min()} max={values.max()}")
    return values.astype(np.uint64)


def mulmod(a: int, x: np.ndarray, n: int) -> np.ndarray:
    """`(a * x) mod n` for uint64 `x < n < 2^44` without overflow."""
    a_mod, n64 = np.uint64(a % n), np.uint64(n)
    high, low = x >> np.uint64(MULMOD_SPLIT_BITS), x & np.uint64((1 << MULMOD_SPLIT_BITS) - 1)
    high_part = ((a_mod * high) % n64 << np.uint64(MULMOD_SPLIT_BITS)) % n64
    return (high_part + (a_mod * low) % n64) % n64


@dataclass(frozen=True)
class LinearPermutation:
    """`p(x) = (a*x + b) mod N`, a bijection because `gcd(a, N) = 1`."""

    length: int
    a: int
    b: int

    def __post_init__(self) -> None:
        if self.length < 1 or self.length >= 2**44:
            raise ValueError(f"length must be in [1, 2^44), got {self.length}")
        if gcd(self.a, self.length) != 1:
            raise ValueError(f"a={self.a} shares a factor with length={self.length}; the map would not be a bijection")

    @classmethod
    def from_rng(cls, length: int, rng: np.random.Generator) -> "LinearPermutation":
        """Draw `a` in [1, N) until coprime with N, then `b` in [0, N) (Levanter's order of draws)."""
        if length == 1:
            return cls(1, 1, 0)
        a = int(rng.integers(1, length))
        while gcd(a, length) != 1:
            a = int(rng.integers(1, length))
        return cls(length, a, int(rng.integers(0, length)))

    @classmethod
    def from_seed(cls, length: int, seed: int) -> "LinearPermutation":
        """Parameters drawn from `Generator(PCG64(seed))`."""
        return cls.from_rng(length, np.random.Generator(np.random.PCG64(seed)))

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        x = _check_indices(indices, self.length)
        return ((mulmod(self.a, x, self.length) + np.uint64(self.b)) % np.uint64(self.length)).astype(np.int64)


def feistel_rounds(x: np.ndarray, keys: np.ndarray, right_bits: int) -> np.ndarray:
    """One pass of the Feistel network; `keys` is `[rounds, ...]` broadcastable against `x`."""
    mask = np.uint64((1 << right_bits) - 1)
    shift = np.uint64(right_bits)
    left, right = x >> shift, x & mask
    for key in keys:
        left, right = right, left ^ (((right & mask) * FEISTEL_MULTIPLIER + key) & mask)
    return (left << shift) | right


def feistel_bits(length: int) -> int:
    """Right-half width for `length`: half of log2(next power of two), rounded up."""
    bits = max(int(length - 1).bit_length(), 0)
    return bits - bits // 2


def cycle_walk(x: np.ndarray, keys: np.ndarray, right_bits: int, length: int) -> np.ndarray:
    """Apply the network until every value lies in `[0, length)`; a bijection on that range."""
    out = feistel_rounds(x, keys, right_bits)
    outside = out >= np.uint64(length)
    while outside.any():
        row_keys = keys if keys.ndim == 1 or keys.shape[-1] == 1 else keys[:, outside]
        out[outside] = feistel_rounds(out[outside], row_keys, right_bits)
        outside = out >= np.uint64(length)
    return out


@dataclass(frozen=True)
class FeistelPermutation:
    """Feistel network on the next power of two with cycle-walking to `[0, N)`."""

    length: int
    keys: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.length < 1:
            raise ValueError(f"length must be >= 1, got {self.length}")
        if not self.keys:
            raise ValueError("keys is empty: a Feistel network needs at least one round")

    @classmethod
    def from_rng(cls, length: int, rng: np.random.Generator, rounds: int = FEISTEL_ROUNDS) -> "FeistelPermutation":
        """Round keys drawn as `rounds` integers in `[0, 2^right_bits)` (Levanter's draw)."""
        high = 1 << feistel_bits(length)
        return cls(length, tuple(int(k) for k in rng.integers(0, high, size=rounds, dtype=np.uint64)))

    @classmethod
    def from_seed(cls, length: int, seed: int, rounds: int = FEISTEL_ROUNDS) -> "FeistelPermutation":
        """Round keys drawn from `Generator(PCG64(seed))`."""
        return cls.from_rng(length, np.random.Generator(np.random.PCG64(seed)), rounds)

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        x = _check_indices(indices, self.length)
        if self.length == 1:
            return np.zeros_like(x, dtype=np.int64)
        keys = np.asarray(self.keys, dtype=np.uint64)
        return cycle_walk(x.copy(), keys, feistel_bits(self.length), self.length).astype(np.int64)


PERMUTATIONS: dict[str, type[LinearPermutation] | type[FeistelPermutation]] = {
    "linear": LinearPermutation,
    "feistel": FeistelPermutation,
}


def make_permutation(kind: str, length: int, seed: int) -> Permutation:
    """Build a registered permutation of `[0, length)` from an integer seed."""
    if kind not in PERMUTATIONS:
        raise ValueError(f"unknown permutation {kind!r}; choose one of {sorted(PERMUTATIONS)}")
    return PERMUTATIONS[kind].from_seed(length, seed)
