"""Block-stratified mixtures of token caches and the stateless `batch(step)`.

Design: the global stream of training sequences is cut into blocks of
`block_size` sequences. Every block holds exactly `floor(w_d * block_size)`
sequences of component d (the remainder goes to the component with the largest
count), so the realized mixture matches the target in every block, not just on
average. Inside block b the slots are shuffled by a Feistel permutation keyed by
(seed, b). The k-th sequence drawn from component d is that component's
sequence `perm_{d,epoch}(k mod n_d)`, a fresh permutation each epoch.

Every quantity above is a function of the config and the global sequence index,
so `batch(step)` needs no state: sequence indices of step s are
`[s*B, (s+1)*B)`, any worker can compute any slice, and a resumed run sees the
same bits.

Example: weights {code: 0.5, prose: 0.5}, block_size 8 → every block of 8
sequences holds 4 code and 4 prose sequences in a seeded order.
"""

from dataclasses import dataclass, field

import numpy as np

from tootsie.data.permutation import feistel_bits, cycle_walk, make_permutation
from tootsie.data.sequences import PackedSequences, next_token_loss_mask
from tootsie.datakit.token_cache import open_token_cache

BLOCK_ROUNDS = 5
SPLITMIX_GAMMA = 0x9E3779B97F4A7C15


@dataclass(frozen=True)
class MixtureConfig:
    """Components, weights, shapes and shuffling of a training data stream."""

    caches: dict[str, str]
    """Component name → token cache directory."""
    weights: dict[str, float]
    """Component name → mixture weight (normalized to sum 1; components left out get 0)."""
    seq_len: int = 128
    """Tokens per sequence."""
    batch_size: int = 16
    """Sequences per step (global batch)."""
    seed: int = 0
    """Seed of every shuffle in the stream."""
    permutation: str = "feistel"
    """How each component's sequences are shuffled: 'feistel' or 'linear'."""
    block_size: int = 256
    """Sequences per stratified block."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(self.caches))
        if unknown:
            raise ValueError(f"weights name components {unknown} that have no entry in caches {sorted(self.caches)}")
        if any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
            raise ValueError(f"weights must be non-negative and sum to a positive number, got {self.weights}")
        for name in ("seq_len", "batch_size", "block_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    def block_counts(self) -> dict[str, int]:
        """Sequences of each component in every block (exact, summing to block_size)."""
        total = sum(self.weights.values())
        names = sorted(self.caches)
        counts = {name: int(np.floor(self.weights.get(name, 0.0) / total * self.block_size)) for name in names}
        largest = max(names, key=lambda name: (counts[name], self.weights.get(name, 0.0)))
        counts[largest] += self.block_size - sum(counts.values())
        return counts


@dataclass(frozen=True)
class Batch:
    """One global (or per-worker) batch, all arrays `[batch, seq_len]` except `component`."""

    tokens: np.ndarray
    segment_ids: np.ndarray
    loss_mask: np.ndarray
    component: np.ndarray
    """Index into `MixtureDataset.component_names` of each sequence."""


def splitmix64(values: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer: a fast, well-mixed hash of uint64 values."""
    z = values.astype(np.uint64) + np.uint64(SPLITMIX_GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass
class MixtureDataset:
    """The stream of a `MixtureConfig` over opened caches."""

    config: MixtureConfig
    sources: dict[str, PackedSequences] = field(init=False)

    def __post_init__(self) -> None:
        self.sources = {name: PackedSequences(open_token_cache(path), self.config.seq_len) for name, path in sorted(self.config.caches.items())}
        counts = self.config.block_counts()
        self.component_names = sorted(self.sources)
        self._counts = np.array([counts[name] for name in self.component_names], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self._counts)[:-1]])

    def _block_slots(self, blocks: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Position in the block's sorted item list of each (block, slot), by a per-block Feistel permutation."""
        right_bits = feistel_bits(self.config.block_size)
        if self.config.block_size == 1:
            return np.zeros_like(slots)
        base = np.uint64(self.config.seed) * np.uint64(1_000_003) + blocks.astype(np.uint64) * np.uint64(BLOCK_ROUNDS)
        keys = np.stack([splitmix64(base + np.uint64(r)) & np.uint64((1 << right_bits) - 1) for r in range(BLOCK_ROUNDS)])
        return cycle_walk(slots.astype(np.uint64), keys, right_bits, self.config.block_size).astype(np.int64)

    def sequence_sources(self, sequence_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Component index and component-local sequence index of global sequences."""
        blocks, slots = np.divmod(np.asarray(sequence_indices, dtype=np.int64), self.config.block_size)
        items = self._block_slots(blocks, slots)
        components = np.searchsorted(self._starts + self._counts, items, side="right")
        draws = blocks * self._counts[components] + (items - self._starts[components])
        local = np.empty_like(draws)
        for c in np.unique(components):
            name = self.component_names[c]
            n = self.sources[name].num_sequences
            picked = components == c
            epochs, within = np.divmod(draws[picked], n)
            result = np.empty_like(within)
            for epoch in np.unique(epochs):
                in_epoch = epochs == epoch
                seed = int(splitmix64(np.array([self.config.seed * 7919 + c * 104729 + int(epoch)]))[0] >> np.uint64(1))
                result[in_epoch] = make_permutation(self.config.permutation, n, seed)(within[in_epoch])
            local[picked] = result
        return components, local

    def batch(self, step: int, worker: int = 0, num_workers: int = 1) -> Batch:
        """The sequences of `step` (this worker's contiguous slice of the global batch)."""
        size = self.config.batch_size
        if size % num_workers:
            raise ValueError(f"batch_size={size} is not divisible by num_workers={num_workers}")
        per_worker = size // num_workers
        start = step * size + worker * per_worker
        components, local = self.sequence_sources(np.arange(start, start + per_worker))
        tokens = np.zeros((per_worker, self.config.seq_len), dtype=np.int32)
        segments = np.zeros_like(tokens)
        for c in np.unique(components):
            rows = components == c
            tokens[rows], segments[rows] = self.sources[self.component_names[c]].read(local[rows])
        return Batch(tokens=tokens, segment_ids=segments, loss_mask=next_token_loss_mask(segments), component=components.astype(np.int32))
