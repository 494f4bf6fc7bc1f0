"""Stateless pseudo-random permutations of `[0, N)`, vectorized over numpy arrays.

A permutation here is a pure function of `(index, parameters)`: no table of N
entries is ever built, so shuffling a 10^9-sequence corpus costs nothing up
front, and the position of any item can be computed from its index alone. That
is what makes `batch(step)` stateless and a run resumable anywhere.

Four kinds, one registry (`PERMUTATIONS`: name → frozen config whose
`build(length, seed)` returns the permutation). `PermutationChoice`, the
union derived from it, types `MixtureConfig.permutation`, so a config file
picks a kind and its options as `permutation: {kind: era, era_length: 4096}`
and a misspelt kind fails when the file is loaded:

- `linear`: `p(x) = (a*x + b) mod N` with `gcd(a, N) = 1`, `a` then `b` drawn
  from `Generator(PCG64(seed))` (Levanter's LCG). Cheap, but `p(x+1) - p(x) = a`
  (mod N): on an ordered corpus a batch is an arithmetic progression, and an
  unlucky `a` makes consecutive batches look alike. The 32B Bison cooldown's
  loss "phase shift" came from this (see `shuffle_report`).
- `feistel`: a 5-round Feistel network on the bits of the next power of two,
  `F(R, k) = ((R & mask) * 2654435761 + k) & mask`, with cycle-walking back
  into `[0, N)` (Levanter's `FeistelPermutation`; the 32B Mantis fix).
- `era`: a Feistel shuffle inside consecutive windows of `era_length` items,
  each window keyed by (seed, window); the last partial window is shuffled
  within itself. Items never leave their window.
- `block`: shuffle items inside windows of `window_blocks * block_size`
  items, then send every full block of `block_size` items to a Feistel-chosen
  block position. A window reads whole blocks, so I/O stays local; items of a
  partial last block stay in the last window's block slots, so it is still a
  bijection.

Worked example (N = 10, seed 0): `EraConfig(era_length=4).build(10, 0)` (or
`make_permutation("era", 10, 0, era_length=4)`) maps 0..3 onto 0..3, 4..7 onto
4..7 and 8..9 onto 8..9, each window in its own order;
`FeistelConfig().build(10, 0)(np.array([3]))` equals entry 3 of
`FeistelConfig().build(10, 0)(np.arange(10))`.
"""

from dataclasses import dataclass, fields
from math import gcd
from typing import Protocol, runtime_checkable

import numpy as np
from jaxtyping import Int64, Integer, UInt64

from tootsie.configfile import registry_union

FEISTEL_MULTIPLIER = np.uint64(2654435761)  # Knuth's multiplicative hash constant, as in the seeds and Levanter
FEISTEL_ROUNDS = 5  # Levanter's default and the paper outline's r = 5
SPLITMIX_GAMMA = 0x9E3779B97F4A7C15  # splitmix64's increment (Steele, Lea & Flood 2014)
CHUNK = 1 << 15  # items per in-cache Feistel pass: three uint64 buffers of 256 KiB stay in L2
MAX_LINEAR_LENGTH = 1 << 63  # affine_mod keeps every intermediate below 2^64 for N < 2^63

Indices = Integer[np.ndarray, "*shape"]
Positions = Int64[np.ndarray, "*shape"]


@runtime_checkable
class Permutation(Protocol):
    """A bijection on `[0, length)` evaluated elementwise; returns int64 of the input's shape."""

    length: int

    def __call__(self, indices: Indices) -> Positions: ...


def check_indices(indices: Indices, length: int) -> UInt64[np.ndarray, "*shape"]:
    """`indices` as uint64 after checking they are integers in `[0, length)` (IndexError names the range)."""
    values = np.asarray(indices)
    if values.dtype.kind not in "iu":
        raise TypeError(f"permutation indices must be integers, got dtype {values.dtype}")
    if values.size and (int(values.min()) < 0 or int(values.max()) >= length):
        raise IndexError(f"permutation indices must lie in [0, {length}), got min={values.min()} max={values.max()}")
    # Same-width integers are reinterpreted, not copied (all are >= 0); nothing here writes to its input.
    return values.view(np.uint64) if values.dtype.itemsize == 8 else values.astype(np.uint64)


def _as_int64(values: UInt64[np.ndarray, "*shape"]) -> Positions:
    return values.view(np.int64)  # every value is < N < 2^63, so the bits read the same


def splitmix64(values: int | np.integer | Integer[np.ndarray, "*shape"]) -> UInt64[np.ndarray, "*shape"]:
    """The splitmix64 finalizer of `values + gamma`: a well-mixed hash of uint64 values (at least 1-d, wrapping)."""
    z = np.array(values, dtype=np.uint64, ndmin=1) + np.uint64(SPLITMIX_GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def affine_mod(a: int, x: UInt64[np.ndarray, "*shape"], b: int, n: int) -> UInt64[np.ndarray, "*shape"]:
    """`(a*x + b) mod n` for uint64 `x < n < 2^63`, exact: no intermediate ever wraps past 2^64.

    For n ≤ 2^32, `(n-1)^2 + (n-1) < 2^64`, so it is one multiply-add and one
    mod. Above, Horner over chunks of x of `64 - bits(n)` bits keeps both
    `a * chunk` and `residue << chunk` below 2^64 (3 chunks at N ~ 2^44).
    """
    bits = max((n - 1).bit_length(), 1)
    if bits > 63:
        raise ValueError(f"affine_mod needs n < 2^63, got {n=}")
    a64, b64, n64 = np.uint64(a % n), np.uint64(b % n), np.uint64(n)
    if bits <= 32:
        out = np.multiply(x, a64)
        out += b64
        return np.remainder(out, n64, out=out)
    step = 64 - bits
    chunk_mask = np.uint64((1 << step) - 1)
    total = np.zeros_like(x)
    for shift in reversed(range(0, bits, step)):
        term = (a64 * ((x >> np.uint64(shift)) & chunk_mask)) % n64
        total = ((total << np.uint64(step)) % n64 + term) % n64
    return (total + b64) % n64


@dataclass(frozen=True)
class LinearPermutation:
    """`p(x) = (a*x + b) mod N`, a bijection because `gcd(a, N) = 1`; exact for every N < 2^63."""

    length: int
    a: int
    b: int

    def __post_init__(self) -> None:
        if not 1 <= self.length < MAX_LINEAR_LENGTH:
            raise ValueError(f"length must be in [1, 2^63), got {self.length}")
        if self.a < 1 or gcd(self.a, self.length) != 1:
            raise ValueError(
                f"a={self.a} must be positive and coprime with length={self.length}, else the map is not a bijection"
            )
        if not 0 <= self.b < self.length:
            raise ValueError(f"b={self.b} must lie in [0, length={self.length})")

    @classmethod
    def from_rng(cls, length: int, rng: np.random.Generator) -> "LinearPermutation":
        """Draw `a` in [1, N) until coprime with N, then `b` in [0, N).

        Levanter's order of draws; N = 1 draws nothing.
        """
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

    def __call__(self, indices: Indices) -> Positions:
        return _as_int64(affine_mod(self.a, check_indices(indices, self.length), self.b, self.length))


def feistel_bits(length: int) -> int:
    """Right-half width for `length`: with `bits = log2(next power of two)`, `bits - bits // 2`."""
    bits = int(length - 1).bit_length()
    return bits - bits // 2


def _network(
    x: np.ndarray,
    keys: np.ndarray,
    shift: np.uint64,
    mask: np.uint64,
    out: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    spare: np.ndarray,
) -> None:
    """One pass over 1-d `x` into `out`, in place in the three scratch buffers (all of `x`'s size)."""
    np.right_shift(x, shift, out=left)
    np.bitwise_and(x, mask, out=right)
    for key in keys:
        # F(R, k) = ((R & mask) * M + k) & mask; R < 2^right_bits always, so R & mask is R.
        np.multiply(right, FEISTEL_MULTIPLIER, out=spare)
        spare += key
        spare &= mask
        spare ^= left
        left, right, spare = right, spare, left
    np.left_shift(left, shift, out=out)
    out |= right


def feistel_rounds(
    x: UInt64[np.ndarray, " n"], keys: UInt64[np.ndarray, " rounds *n"], right_bits: int
) -> UInt64[np.ndarray, " n"]:
    """One pass of the Feistel network over uint64 `x` (a new array).

    `(L, R) = (x >> right_bits, x & mask)`, then per round key k:
    `(L, R) ← (R, L xor F(R, k))`; output `(L << right_bits) | R`. `keys` is
    `[rounds]` (one network) or `[rounds, n]` (a key column per item).
    """
    shift, mask = np.uint64(right_bits), np.uint64((1 << right_bits) - 1)
    x = np.ascontiguousarray(x, dtype=np.uint64).reshape(-1)
    per_item = keys.ndim == 2 and keys.shape[1] != 1
    shared = keys.reshape(keys.shape[0], -1)[:, 0] if not per_item else keys
    out = np.empty_like(x)
    size = min(CHUNK, x.size)
    left, right, spare = (np.empty(size, dtype=np.uint64) for _ in range(3))
    for start in range(0, x.size, CHUNK):
        stop = min(start + CHUNK, x.size)
        n = stop - start
        chunk_keys = keys[:, start:stop] if per_item else shared
        _network(x[start:stop], chunk_keys, shift, mask, out[start:stop], left[:n], right[:n], spare[:n])
    return out


def cycle_walk(
    x: UInt64[np.ndarray, " n"], keys: UInt64[np.ndarray, " rounds *n"], right_bits: int, length: int
) -> UInt64[np.ndarray, " n"]:
    """Apply the network, re-applying it only to the values still `>= length`; a bijection on `[0, length)`.

    The network permutes `[0, 2^(2*right_bits))`; starting inside `[0, length)`
    the walk must come back inside, at the first in-range point of x's cycle.
    """
    out = feistel_rounds(x, keys, right_bits)
    limit = np.uint64(length)
    pending = np.flatnonzero(out >= limit)
    per_item = keys.ndim == 2 and keys.shape[1] != 1
    pending_keys = keys[:, pending] if per_item else keys
    values = out[pending]
    while pending.size:
        values = feistel_rounds(values, pending_keys, right_bits)
        outside = values >= limit
        out[pending[~outside]] = values[~outside]
        pending, values = pending[outside], values[outside]
        if per_item:
            pending_keys = pending_keys[:, outside]
    return out


@dataclass(frozen=True)
class FeistelPermutation:
    """Feistel network on the next power of two with cycle-walking to `[0, N)`; N = 1 maps to 0."""

    length: int
    keys: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.length < 1:
            raise ValueError(f"length must be >= 1, got {self.length}")
        if not self.keys:
            raise ValueError("keys is empty: a Feistel network needs at least one round")

    @classmethod
    def from_rng(cls, length: int, rng: np.random.Generator, rounds: int = FEISTEL_ROUNDS) -> "FeistelPermutation":
        """Round keys: `rng.integers(0, 2^right_bits, size=rounds, dtype=np.uint64)` (Levanter's draw)."""
        high = 1 << feistel_bits(length)
        return cls(length, tuple(int(k) for k in rng.integers(0, high, size=rounds, dtype=np.uint64)))

    @classmethod
    def from_seed(cls, length: int, seed: int, rounds: int = FEISTEL_ROUNDS) -> "FeistelPermutation":
        """Round keys drawn from `Generator(PCG64(seed))`."""
        return cls.from_rng(length, np.random.Generator(np.random.PCG64(seed)), rounds)

    def __call__(self, indices: Indices) -> Positions:
        x = check_indices(indices, self.length)
        if self.length == 1:
            return np.zeros(x.shape, dtype=np.int64)
        keys = np.asarray(self.keys, dtype=np.uint64)
        return _as_int64(cycle_walk(x.reshape(-1), keys, feistel_bits(self.length), self.length).reshape(x.shape))


def window_keys(
    seed: int, windows: UInt64[np.ndarray, " n"], rounds: int, right_bits: int
) -> UInt64[np.ndarray, "rounds _"]:
    """Round keys of each item's window: splitmix64 of (seed, window, round), masked to right_bits.

    Shape `[rounds, n]`, or `[rounds, 1]` when every item shares one window
    (the usual case: a batch is a contiguous range). Hashed once per run of
    equal consecutive windows, then gathered.
    """
    new_run = np.concatenate(([True], windows[1:] != windows[:-1]))[: windows.size]
    base = splitmix64(seed) + windows[new_run] * np.uint64(rounds)
    mask = np.uint64((1 << right_bits) - 1)
    run_keys = np.stack([splitmix64(base + np.uint64(r)) & mask for r in range(rounds)])
    return run_keys if run_keys.shape[1] == 1 else run_keys[:, np.cumsum(new_run) - 1]


def windowed_feistel(
    x: UInt64[np.ndarray, " n"], window: int, length: int, seed: int, rounds: int
) -> UInt64[np.ndarray, " n"]:
    """Shuffle `x` inside consecutive windows of `window` items of `[0, length)`, each window its own Feistel network.

    The last window, `length mod window` items when that is not 0, is a
    Feistel network of its own size: every window is a bijection onto itself.
    Works a chunk at a time so the per-item keys stay in cache.
    """
    full_windows, tail = divmod(length, window)
    out = np.empty_like(x)
    for start in range(0, x.size, CHUNK):
        windows, offsets = np.divmod(x[start : start + CHUNK], np.uint64(window))
        in_tail = windows >= np.uint64(full_windows)
        regions = ((window, ~in_tail), (tail, in_tail)) if in_tail.any() else ((window, slice(None)),)
        for size, picked in regions:
            if size > 1 and offsets[picked].size:
                right_bits = feistel_bits(size)
                offsets[picked] = cycle_walk(
                    offsets[picked], window_keys(seed, windows[picked], rounds, right_bits), right_bits, size
                )
        windows *= np.uint64(window)
        np.add(windows, offsets, out=out[start : start + CHUNK])
    return out


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {name}={value}")


@dataclass(frozen=True)
class EraPermutation:
    """Items shuffled within consecutive windows of `era_length` (the last partial window within itself)."""

    length: int
    era_length: int
    seed: int
    rounds: int = FEISTEL_ROUNDS

    def __post_init__(self) -> None:
        _check_positive(length=self.length, era_length=self.era_length, rounds=self.rounds)

    def __call__(self, indices: Indices) -> Positions:
        x = check_indices(indices, self.length)
        return _as_int64(
            windowed_feistel(x.reshape(-1), self.era_length, self.length, self.seed, self.rounds).reshape(x.shape)
        )


@dataclass(frozen=True)
class BlockPermutation:
    """Items shuffled within windows of `window_blocks` blocks, then full blocks sent to Feistel-chosen slots.

    Full blocks are `block_size` items long.

    Position x lies in window `x // (block_size * window_blocks)`; the window's
    Feistel picks slot y in that window; slot y belongs to block `y //
    block_size`, which, when full, is replaced by the block a Feistel over the
    `length // block_size` full blocks chooses. The partial last block (length
    mod block_size items) is never moved: its items are shuffled within the
    last window like any other, so the map is a bijection for every length.
    """

    length: int
    block_size: int
    window_blocks: int
    seed: int
    rounds: int = FEISTEL_ROUNDS

    def __post_init__(self) -> None:
        _check_positive(
            length=self.length, block_size=self.block_size, window_blocks=self.window_blocks, rounds=self.rounds
        )

    def __call__(self, indices: Indices) -> Positions:
        x = check_indices(indices, self.length)
        slots = windowed_feistel(
            x.reshape(-1), self.block_size * self.window_blocks, self.length, self.seed, self.rounds
        )
        blocks, within = np.divmod(slots, np.uint64(self.block_size))
        full_blocks = self.length // self.block_size
        if full_blocks > 1:
            order = FeistelPermutation.from_seed(full_blocks, self.seed, self.rounds)
            last_full = np.uint64(full_blocks - 1)
            blocks = np.where(blocks <= last_full, order(np.minimum(blocks, last_full)).view(np.uint64), blocks)
        blocks *= np.uint64(self.block_size)
        blocks += within
        return _as_int64(blocks.reshape(x.shape))


@runtime_checkable
class PermutationConfig(Protocol):
    """A registry entry: a frozen config that builds a permutation of `[0, length)` from an integer seed."""

    def build(self, length: int, seed: int) -> Permutation: ...


@dataclass(frozen=True)
class LinearPermutationConfig:
    """`linear`: Levanter's LCG `p(x) = (a*x + b) mod N`."""

    multiplier: int | None = None
    """Force the stride `a` (to diagnose a known run); None draws it from the seed. `b` is always drawn."""

    def build_from_rng(self, length: int, rng: np.random.Generator) -> LinearPermutation:
        """Draw `(a, b)` from `rng` as Levanter does, then apply the forced multiplier if any."""
        drawn = LinearPermutation.from_rng(length, rng)
        if self.multiplier is None:
            return drawn
        if self.multiplier < 1 or gcd(self.multiplier, length) != 1:
            raise ValueError(
                f"multiplier={self.multiplier} must be positive and coprime with length={length}"
                f" (gcd {gcd(self.multiplier, length)}); pick a prime that does not divide the length"
            )
        return LinearPermutation(length, self.multiplier, drawn.b)

    def build(self, length: int, seed: int) -> LinearPermutation:
        """The permutation with parameters drawn from `Generator(PCG64(seed))`."""
        return self.build_from_rng(length, np.random.Generator(np.random.PCG64(seed)))


@dataclass(frozen=True)
class FeistelConfig:
    """`feistel`: Levanter's Feistel network with cycle-walking."""

    rounds: int = FEISTEL_ROUNDS
    """Feistel rounds (Levanter's default 5)."""

    def __post_init__(self) -> None:
        _check_positive(rounds=self.rounds)

    def build_from_rng(self, length: int, rng: np.random.Generator) -> FeistelPermutation:
        """Round keys drawn from `rng` as Levanter does."""
        return FeistelPermutation.from_rng(length, rng, self.rounds)

    def build(self, length: int, seed: int) -> FeistelPermutation:
        """Round keys drawn from `Generator(PCG64(seed))`."""
        return self.build_from_rng(length, np.random.Generator(np.random.PCG64(seed)))


@dataclass(frozen=True)
class EraConfig:
    """`era`: a Feistel shuffle inside each window of `era_length` items."""

    era_length: int = 1 << 16
    """Items per window (an illustrative default, not from the seeds)."""
    rounds: int = FEISTEL_ROUNDS
    """Feistel rounds per window."""

    def __post_init__(self) -> None:
        _check_positive(era_length=self.era_length, rounds=self.rounds)

    def build(self, length: int, seed: int) -> EraPermutation:
        """Window keys derived from (seed, window) by splitmix64."""
        return EraPermutation(length, self.era_length, seed, self.rounds)


@dataclass(frozen=True)
class BlockConfig:
    """`block`: windows of whole blocks shuffled inside, blocks shuffled across (I/O locality)."""

    block_size: int = 256
    """Items per block, the unit read together (an illustrative default, not from the seeds)."""
    window_blocks: int = 64
    """Blocks per shuffle window."""
    rounds: int = FEISTEL_ROUNDS
    """Feistel rounds of the window and block shuffles."""

    def __post_init__(self) -> None:
        _check_positive(block_size=self.block_size, window_blocks=self.window_blocks, rounds=self.rounds)

    def build(self, length: int, seed: int) -> BlockPermutation:
        """Window keys from (seed, window) by splitmix64; block order from `Generator(PCG64(seed))`."""
        return BlockPermutation(length, self.block_size, self.window_blocks, seed, self.rounds)


PERMUTATIONS: dict[str, type] = {
    "linear": LinearPermutationConfig,
    "feistel": FeistelConfig,
    "era": EraConfig,
    "block": BlockConfig,
}
PermutationChoice = registry_union(PERMUTATIONS)
"""Any registered permutation config (the union of `PERMUTATIONS`' classes).

Written `{kind: NAME, ...options}` in config files.
"""


def permutation_config(kind: str, **options: int | None) -> PermutationConfig:
    """The registered config of `kind` with `options` as its fields; errors name the valid choices."""
    if kind not in PERMUTATIONS:
        raise ValueError(f"unknown permutation {kind!r}; choose one of {sorted(PERMUTATIONS)}")
    config_class = PERMUTATIONS[kind]
    known = [field.name for field in fields(config_class)]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"options {unknown} do not apply to permutation {kind!r}; its options are {known}")
    return config_class(**options)


def make_permutation(kind: str, length: int, seed: int, **options: int | None) -> Permutation:
    """Build a registered permutation of `[0, length)` from an integer seed (options: the kind's config fields)."""
    return permutation_config(kind, **options).build(length, seed)
