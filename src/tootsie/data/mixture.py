"""Block-stratified mixtures of token caches, by stage, and the stateless `batch(step)`.

Design. The stream of training sequences is cut into *segments*: one per
constant-weight stretch of a stage, and one per step inside a stage's
transition window (where weights are interpolated step by step). A segment is
cut into blocks of `block_size` sequences (in a transition window, a block is
the whole step's batch), and every block holds exactly
`floor(w_d * size)` sequences of component d, the remainder going to the
component with the largest count, so the realized mixture matches the target
in every block, not just on average. Inside a block the items are listed by
component (all of d = 0, then d = 1, ...) and dealt to the block's slots in the
order of a keyed hash: slot s holds the item whose `splitmix64(key ^ item)` is
the s-th smallest, the key hashed from (seed, segment, block). The k-th
sequence drawn from component d is that component's sequence
`perm_{d,epoch}(k mod n_d)`, a fresh permutation each epoch, keyed by the
component's *name* (adding a component does not reshuffle the others); the
kind of permutation and its options are `permutation`, a registered config
(`{kind: feistel}` by default, `{kind: era, era_length: 65536}`, ...).

Why a hash sort for the slots. Any run of consecutive slots (a batch smaller
than a block, or the edge of a larger one) is then a uniform random subset of
the block: its component counts are hypergeometric and its draws from a
component are random ranks. The earlier slot shuffle was a 5-round Feistel
with Levanter's round function `F(R, k) = R * 2654435761 + k mod 2^m`;
multiplying by an odd constant carries low bits only upward, so low output
bits depended on low input bits only. The 16 slots of a batch in a block of
256 (one value of the high half) got items of a single parity (for seed 0,
a single residue mod 4), with component counts far more even than a random
slice (variance 0.04 of the hypergeometric's); behind an LCG component
permutation with stride near N/2, every batch read one band of the corpus
(docs/case-studies.md, case 1). A Feistel with a well-mixed round function
fixes the low bits but stays measurably non-uniform on blocks of a few items
(2-bit halves); sorting by a bijective hash has no ties and no small-block
bias. It costs O(S log S) for each block of S slots a batch touches (about
0.2 ms for the default S = 256 on a 2-core machine, 6 ms for S = 65,536), so
keep `block_size` near the batch size rather than far above it.

Stage boundaries are steps; the batch schedule turns them into sequence
offsets, so weights written in steps stay right when the batch size changes.
Everything is a function of the config and the global sequence index, so
`batch(step)` needs no state: any worker computes any slice, and a resumed run
sees the same bits.

Example: stages `[(0, {web: 0.7, code: 0.3}), (1000, {web: 0.5, code: 0.5}, transition 200)]`
hold 70/30 to step 999, move linearly over steps 1000–1199 (step 1099 is at
50 % of the way: 60/40), and stay at 50/50 from step 1199 on. With weights
{a: 0.5, b: 0.3, c: 0.2} a block of 256 holds 128 + 1 (the remainder) of a,
76 of b and 51 of c, as items 0–128, 129–204 and 205–255; a batch of 16 at
slots 0–15 gets 16 of them at random: 8.1 a, 4.8 b, 3.2 c on average, with
the spread of a random draw.
"""

from dataclasses import dataclass, field

import numpy as np
import xxhash

from tootsie.configfile import unhashed
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.permutation import PERMUTATIONS, FeistelConfig, Permutation, PermutationChoice, splitmix64
from tootsie.data.sequences import ConcatenateConfig, DocumentConfig, PackingChoice, next_token_loss_mask
from tootsie.datakit.token_cache import open_token_cache
from tootsie.errors import TootsieError

EXHAUSTION_POLICIES = ("restart", "stop")


@dataclass(frozen=True)
class MixtureStage:
    """Mixture weights from `start_step` on, optionally reached by linear interpolation."""

    start_step: int
    """First step of this stage."""
    weights: dict[str, float]
    """Component name → weight (normalized to sum 1; components left out get 0)."""
    transition_steps: int = 0
    """Interpolate from the previous stage's weights over this many steps (0: switch at once)."""
    name: str = unhashed("")
    """Short name of the weights, e.g. a seed table's ("bison"); shown in plans, not hashed."""
    source: str = unhashed("")
    """Where the weights come from (a seed file and section, a derivation); shown in plans, not hashed."""


@dataclass(frozen=True)
class MixtureConfig:
    """Components, weights by stage, shapes and shuffling of a training data stream."""

    caches: dict[str, str]
    """Component name → token cache directory."""
    stages: tuple[MixtureStage, ...]
    """Weight stages; the first starts at step 0, starts strictly increase."""
    seq_len: int = 128
    """Tokens per sequence."""
    batch_schedule: BatchSchedule = field(default_factory=lambda: BatchSchedule.constant(16))
    """Global batch size by step."""
    seed: int = 0
    """Seed of every shuffle in the stream."""
    permutation: PermutationChoice = field(default_factory=FeistelConfig)
    """How each component's sequences are shuffled: a registered permutation config.

    Written `{kind: NAME, ...options}` in a file.
    """
    block_size: int = 256
    """Sequences per stratified block in constant-weight stretches."""
    exhaustion: str = "restart"
    """When a component runs out: 'restart' (a new epoch, reshuffled) or 'stop' (error)."""
    document_packed: tuple[str, ...] = ()
    """Components whose sequences are whole documents (truncated, padded) instead of concatenate-and-chunk."""
    packing: PackingChoice = field(default_factory=ConcatenateConfig)
    """How the components not in `document_packed` become sequences: `{kind: concatenate}` (default),
    `{kind: document}` or `{kind: whole_documents}` (chat data: whole conversations, never split)."""

    def __post_init__(self) -> None:
        if not self.stages or self.stages[0].start_step != 0:
            raise ValueError(
                f"stages must start with a stage at step 0, got starts {[s.start_step for s in self.stages]}"
            )
        for previous, stage in zip(self.stages, self.stages[1:]):
            if stage.start_step <= previous.start_step:
                raise ValueError(
                    f"stage at step {stage.start_step} starts before (or with) the previous one"
                    f" at {previous.start_step}; stages must be in step order"
                )
            if previous.start_step + previous.transition_steps > stage.start_step:
                raise ValueError(
                    f"the transition of the stage at step {previous.start_step}"
                    f" runs past the next stage's start {stage.start_step}"
                )
        for stage in self.stages:
            unknown = sorted(set(stage.weights) - set(self.caches))
            if unknown:
                raise ValueError(
                    f"stage at step {stage.start_step} weights components {unknown}"
                    f" that have no entry in caches {sorted(self.caches)}"
                )
            if any(w < 0 for w in stage.weights.values()) or sum(stage.weights.values()) <= 0:
                raise ValueError(
                    f"stage at step {stage.start_step}: weights must be non-negative and sum to a positive number,"
                    f" got {stage.weights}"
                )
            if stage.transition_steps < 0:
                raise ValueError(
                    f"stage at step {stage.start_step}: transition_steps must be >= 0, got {stage.transition_steps}"
                )
        if self.stages[0].transition_steps:
            raise ValueError("the first stage has nothing to interpolate from; set its transition_steps to 0")
        for name in ("seq_len", "block_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if set(self.document_packed) - set(self.caches):
            raise ValueError(
                f"document_packed names components {sorted(set(self.document_packed) - set(self.caches))}"
                " that have no entry in caches"
            )
        if isinstance(self.permutation, str):
            configs = {kind: f"{cls.__name__}()" for kind, cls in PERMUTATIONS.items()}
            raise ValueError(
                f"permutation={self.permutation!r} is a bare name; pass a registered config instead,"
                f" one of {configs} ({{kind: NAME}} in a config file)"
            )
        if self.exhaustion not in EXHAUSTION_POLICIES:
            raise ValueError(f"exhaustion must be one of {EXHAUSTION_POLICIES}, got {self.exhaustion!r}")

    @property
    def component_names(self) -> list[str]:
        """Components in a fixed (sorted) order; component indices refer to it."""
        return sorted(self.caches)

    def weights_at(self, step: int) -> np.ndarray:
        """Normalized target weights at `step`, in `component_names` order."""
        starts = [s.start_step for s in self.stages]
        index = int(np.searchsorted(starts, step, side="right")) - 1
        current = _normalized(self.stages[index].weights, self.component_names)
        stage = self.stages[index]
        if stage.transition_steps and step < stage.start_step + stage.transition_steps:
            previous = _normalized(self.stages[index - 1].weights, self.component_names)
            progress = (step - stage.start_step + 1) / stage.transition_steps
            return (1 - progress) * previous + progress * current
        return current


def _normalized(weights: dict[str, float], names: list[str]) -> np.ndarray:
    vector = np.array([weights.get(name, 0.0) for name in names], dtype=np.float64)
    return vector / vector.sum()


def block_counts(weights: np.ndarray, size: int) -> np.ndarray:
    """Exact sequences per component in a block of `size`: floors, remainder to the largest count."""
    counts = np.floor(weights * size + 1e-9).astype(np.int64)
    largest = int(np.lexsort((-np.arange(len(weights)), weights, counts))[-1])
    counts[largest] += size - counts.sum()
    return counts


@dataclass(frozen=True)
class Segment:
    """A stretch of the sequence stream with constant block counts."""

    start: int
    end: int | None
    block: int
    counts: np.ndarray
    partial_counts: np.ndarray
    draws_before: np.ndarray

    @property
    def full_blocks(self) -> int | None:
        """Whole blocks in the segment (None when it never ends)."""
        return None if self.end is None else (self.end - self.start) // self.block


def build_segments(config: MixtureConfig, horizon_step: int | None = None) -> list[Segment]:
    """The segments of the stream, in order, with the draws of each component before each."""
    schedule = config.batch_schedule
    step_ranges: list[tuple[int, int | None, np.ndarray, int | None]] = []
    for index, stage in enumerate(config.stages):
        end = config.stages[index + 1].start_step if index + 1 < len(config.stages) else None
        for step in range(stage.start_step, stage.start_step + stage.transition_steps):
            step_ranges.append((step, step + 1, config.weights_at(step), schedule.batch_size(step)))
        constant_start = stage.start_step + stage.transition_steps
        if end is None or constant_start < end:
            step_ranges.append((constant_start, end, config.weights_at(constant_start), None))
    segments, draws = [], np.zeros(len(config.component_names), dtype=np.int64)
    for start_step, end_step, weights, step_block in step_ranges:
        start = schedule.offset(start_step)
        end = None if end_step is None else schedule.offset(end_step)
        block = step_block or config.block_size
        remainder = 0 if end is None else (end - start) % block
        segment = Segment(
            start,
            end,
            block,
            block_counts(weights, block),
            block_counts(weights, remainder) if remainder else np.zeros_like(draws),
            draws.copy(),
        )
        segments.append(segment)
        if end is not None:
            draws = draws + segment.full_blocks * segment.counts + segment.partial_counts
    return segments


@dataclass(frozen=True)
class Batch:
    """One global (or per-worker) batch; arrays are `[batch, seq_len]` except `component`."""

    tokens: np.ndarray
    segment_ids: np.ndarray
    loss_mask: np.ndarray
    component: np.ndarray
    """Index into `MixtureConfig.component_names` of each sequence."""


class MixtureDataset:
    """The stream of a `MixtureConfig` over opened caches."""

    def __init__(self, config: MixtureConfig) -> None:
        self.config = config
        self.component_names = config.component_names
        used = {name for stage in config.stages for name, w in stage.weights.items() if w > 0}
        self.sources = {
            name: (DocumentConfig() if name in config.document_packed else config.packing).build(
                open_token_cache(config.caches[name]), config.seq_len
            )
            for name in self.component_names
            if name in used
        }
        self.segments = build_segments(config)
        self._segment_starts = np.array([s.start for s in self.segments], dtype=np.int64)
        self._name_keys = [xxhash.xxh64_intdigest(name.encode("utf-8")) for name in self.component_names]
        self._permutations: dict[tuple[int, int], Permutation] = {}

    def _slots(self, segment_index: int, blocks: np.ndarray, slots: np.ndarray, length: int) -> np.ndarray:
        """Item (position in the block's component-sorted item list) at each slot: the items ranked by a keyed hash."""
        if length == 1:
            return np.zeros_like(slots)
        unique, row = np.unique(blocks, return_inverse=True)
        segment_key = splitmix64(splitmix64(self.config.seed) + np.uint64(segment_index))
        block_keys = splitmix64(segment_key + unique.astype(np.uint64))
        # splitmix64 is a bijection, so the hashes of one block's items are distinct:
        # no ties, one uniform shuffle per block.
        order = np.argsort(splitmix64(block_keys[:, None] ^ np.arange(length, dtype=np.uint64)[None, :]), axis=1)
        return order[row, slots]

    def draws(self, sequence_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Component index of each global sequence and how many of that component were drawn before it."""
        indices = np.asarray(sequence_indices, dtype=np.int64)
        components = np.empty_like(indices)
        draws = np.empty_like(indices)
        segment_of = np.searchsorted(self._segment_starts, indices, side="right") - 1
        for s in np.unique(segment_of):
            segment = self.segments[s]
            picked = segment_of == s
            blocks, slots = np.divmod(indices[picked] - segment.start, segment.block)
            partial = (
                np.zeros_like(blocks, dtype=bool) if segment.full_blocks is None else blocks >= segment.full_blocks
            )
            items = np.empty_like(slots)
            for is_partial, counts in ((False, segment.counts), (True, segment.partial_counts)):
                rows = partial == is_partial
                if rows.any():
                    items[rows] = self._slots(int(s), blocks[rows], slots[rows], int(counts.sum()))
            counts = np.where(partial[:, None], segment.partial_counts[None, :], segment.counts[None, :])
            ends = np.cumsum(counts, axis=1)
            component = (items[:, None] >= ends).sum(axis=1)
            rank = items - (ends[np.arange(len(items)), component] - counts[np.arange(len(items)), component])
            components[picked] = component
            draws[picked] = segment.draws_before[component] + blocks * segment.counts[component] + rank
        return components, draws

    def sequence_sources(self, sequence_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Component index and component-local sequence index of global sequences."""
        components, draws = self.draws(sequence_indices)
        local = np.empty_like(draws)
        for c in np.unique(components):
            name = self.component_names[c]
            n = self.sources[name].num_sequences
            picked = components == c
            epochs, within = np.divmod(draws[picked], n)
            if self.config.exhaustion == "stop" and epochs.max() > 0:
                raise TootsieError(
                    f"component {name!r} is exhausted: it has {n} sequences and the mixture draws more;"
                    " add data, lower its weight, or use exhaustion='restart'"
                )
            result = np.empty_like(within)
            for epoch in np.unique(epochs):
                in_epoch = epochs == epoch
                result[in_epoch] = self._epoch_permutation(int(c), int(epoch))(within[in_epoch])
            local[picked] = result
        return components, local

    def _epoch_permutation(self, component: int, epoch: int) -> Permutation:
        """The shuffle of one component's sequences in one epoch (built once, reused by every batch)."""
        if (component, epoch) in self._permutations:
            return self._permutations[component, epoch]
        mixed = splitmix64(
            np.uint64(self._name_keys[component])
            ^ splitmix64(np.array([self.config.seed, epoch], dtype=np.uint64)).sum(dtype=np.uint64)
        )
        length = self.sources[self.component_names[component]].num_sequences
        permutation = self.config.permutation.build(length, int(mixed[0] >> np.uint64(1)))
        self._permutations[component, epoch] = permutation
        return permutation

    def sequence_range(self, step: int, worker: int = 0, num_workers: int = 1) -> np.ndarray:
        """Global sequence indices of `step` (this worker's contiguous slice of the global batch)."""
        size = self.config.batch_schedule.batch_size(step)
        if size % num_workers:
            raise ValueError(f"batch size {size} at step {step} is not divisible by num_workers={num_workers}")
        per_worker = size // num_workers
        start = self.config.batch_schedule.offset(step) + worker * per_worker
        return np.arange(start, start + per_worker, dtype=np.int64)

    def batch(self, step: int, worker: int = 0, num_workers: int = 1) -> Batch:
        """The sequences of `step` (this worker's contiguous slice of the global batch)."""
        components, local = self.sequence_sources(self.sequence_range(step, worker, num_workers))
        tokens = np.zeros((len(local), self.config.seq_len), dtype=np.int32)
        segments = np.zeros_like(tokens)
        token_mask = np.zeros(tokens.shape, dtype=np.float32)
        for c in np.unique(components):
            rows = components == c
            source = self.sources[self.component_names[c]]
            tokens[rows], segments[rows] = source.read(local[rows])
            token_mask[rows] = source.token_mask(local[rows])
        return Batch(
            tokens=tokens,
            segment_ids=segments,
            loss_mask=next_token_loss_mask(segments, token_mask),
            component=components.astype(np.int32),
        )
