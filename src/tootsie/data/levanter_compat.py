"""Levanter-order permutations: the index order of Levanter's `Permutation.make(kind, length, key)`.

A Marin run's data order is fixed by a JAX key and Levanter's permutation
code. To reproduce or diff such a run, `permutation("linear" | "feistel",
length, key)` rebuilds the same map without Levanter: the same seed
derivation, the same parameter draws, the same arithmetic, evaluated by
tootsie's vectorized `LinearPermutation` / `FeistelPermutation`.

Matched, by reading Levanter's source (marin-community/marin,
`lib/levanter/src/levanter/data/_prp.py`: `Permutation.make`,
`_np_rng_from_jax_key`, `LcgPermutation`, `FeistelPermutation`,
`next_power_of_two`; and the earlier stanford-crfm/levanter
`src/levanter/data/_prp.py`):

- seed: `jax.random.randint(key, (), 0, 2**30)` with JAX's default dtype, then
  `np.random.Generator(np.random.PCG64(seed))`.
- linear: `a = rng.integers(1, N)` repeated until `gcd(a, N) == 1`, then
  `b = rng.integers(0, N)`; N = 1 draws nothing and is `a = 1, b = 0`.
- feistel: `m = 1 << (N - 1).bit_length()`, `bits = log2(m)`, `left_bits =
  bits // 2`, `right_bits = bits - left_bits`; keys
  `rng.integers(0, 1 << right_bits, size=rounds, dtype=np.uint64)` (rounds = 5);
  each round `(L, R) ← (R, L ^ (((R & mask) * 2654435761 + k) & mask))` from
  `R = x & mask`, `L = x >> right_bits`; output `(L << right_bits) | R`;
  cycle-walking re-applies the whole network to the values still `>= N`;
  N = 1 maps to 0.

Caveats, all from the same reading:

- The seed comes from JAX's threefry bits, which depend on JAX's config:
  `jax_threefry_partitionable` (default True since JAX 0.5) and
  `jax_enable_x64` (default dtype int64 instead of int32) each change it. This
  module calls `randint` exactly as Levanter does, so it agrees with Levanter
  run under the same JAX settings; to reproduce an older run, set those flags
  as that run had them.
- Levanter's `LcgPermutation.__call__` multiplies its NumPy int64 `a` by a
  uint64 array. Under NumPy >= 2 (NEP 50) int64 × uint64 is float64, so once
  `a * (N - 1) + b >= 2^53` Levanter's outputs are rounded and are no longer a
  permutation (PRNGKey(0), N = 10^9: only 17 % of [0, N) is ever produced).
  The default here is the exact `(a*x + b) mod N`, which equals Levanter's
  whenever its arithmetic is exact (always for N ≤ 9.4e7);
  `numpy2_float64=True` reproduces the rounded outputs bit for bit. The older stanford-crfm version multiplies in int64,
  exact while `a * (N - 1) + b < 2^63`.
- Levanter gives up with RuntimeError after 1000 cycle-walking passes; the
  network's domain is under 4N, so a walk that long has odds near (3/4)^1000,
  and this module simply walks on.

Example: `permutation("feistel", 1000, jax.random.PRNGKey(0))(np.arange(1000))`
is the order Levanter's `PermutationDataset(…, key=PRNGKey(0), perm_type="feistel")`
reads a 1000-item dataset in.
"""

from dataclasses import dataclass

import jax
import numpy as np
from jaxtyping import PRNGKeyArray

from tootsie.data.permutation import (
    Indices,
    LinearPermutation,
    Permutation,
    Positions,
    check_indices,
    permutation_config,
)

LEVANTER_KINDS = ("linear", "feistel")  # what Levanter's Permutation.make builds from a key
SEED_BOUND = 2**30  # Levanter: jax.random.randint(key, (), 0, 2**30)


def levanter_seed(key: PRNGKeyArray) -> int:
    """The PCG64 seed Levanter derives from `key`: `jax.random.randint(key, (), 0, 2**30)`."""
    return int(jax.random.randint(key, (), 0, SEED_BOUND))


def levanter_rng(key: PRNGKeyArray) -> np.random.Generator:
    """The NumPy generator Levanter draws permutation parameters from."""
    return np.random.Generator(np.random.PCG64(levanter_seed(key)))


@dataclass(frozen=True)
class Float64Linear:
    """Levanter's LCG as NumPy >= 2 evaluates it: `(a*x + b) % N` in float64, then cast back to integers."""

    exact: LinearPermutation
    """The drawn parameters; exact whenever `a * (N - 1) + b < 2^53`."""

    @property
    def length(self) -> int:
        """N."""
        return self.exact.length

    def __call__(self, indices: Indices) -> Positions:
        x = check_indices(indices, self.length).astype(np.float64)
        product = np.float64(self.exact.a) * x + np.float64(self.exact.b)
        return np.remainder(product, np.float64(self.length)).astype(np.int64)


def permutation(
    kind: str, length: int, key: PRNGKeyArray, *, numpy2_float64: bool = False, **options: int
) -> Permutation:
    """Levanter's `Permutation.make(kind, length, key, **options)` as a vectorized tootsie permutation.

    `options` are the kind's config fields (Feistel's `rounds`, as in
    Levanter); `numpy2_float64` reproduces the float64 rounding of Levanter's
    linear map under NumPy >= 2.
    """
    if kind not in LEVANTER_KINDS:
        raise ValueError(f"Levanter's Permutation.make builds only {list(LEVANTER_KINDS)}, got kind={kind!r}")
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length=}")
    built = permutation_config(kind, **options).build_from_rng(length, levanter_rng(key))
    if numpy2_float64:
        if not isinstance(built, LinearPermutation):
            raise ValueError(
                f"numpy2_float64 applies to kind 'linear' only (Feistel uses uint64 arithmetic throughout), got {kind=}"
            )
        return Float64Linear(built)
    return built
