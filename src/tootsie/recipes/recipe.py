"""A recipe: a tree of training phases over global steps, each warm-started from its parent.

Design. A long run that changes course mid-flight is a chain of training steps:
each `Phase` trains global steps `[start_step, end_step)` with fixed settings and
starts from its parent's last checkpoint (so `start_step == parent.end_step`).
Branches share a parent (the 8B deep cooldowns branch off Jellyfish, the 32B
Bison and Mantis cooldowns off the phase-3 checkpoint at 160k). A phase lists
only what it *changes* in the data stream: its own mixture stages and batch
sizes. The stream a phase trains on is its lineage's stages concatenated, so a
phase that changes neither continues the same stream (same block layout, same
draws), exactly as one uninterrupted run would.

Settings that `TrainConfig` cannot change mid-run (the 32B gradient clip
tightening at ~56.4k, update clipping from 72,233) become phase boundaries;
`retro_phase` groups such sub-phases under the retrospective's phase name
("phase1"), which is how the plan reports tokens per phase.

Example: 32B `phase1a` (0 → 56,400, grad clip 1.0) → `phase1b` (56,400 →
72,233, clip 0.2) → ... → `phase3` (80,000 → 160,000, QK-norm) → `bison` and
`mantis` (160,000 → 192,000); `final="mantis"` makes the artifact lineage
phase1a..phase1d, phase3, mantis.
"""

from dataclasses import dataclass

from tootsie.configfile import names_literal
from tootsie.data.mixture import MixtureStage
from tootsie.data.permutation import PERMUTATIONS
from tootsie.models.presets import PRESETS, PresetName
from tootsie.train.config import OptimizerChoice, ScheduleChoice
from tootsie.train.ema import EMAConfig
from tootsie.train.stability import StabilityConfig

PermutationKind = names_literal(PERMUTATIONS)
"""A registered permutation kind, used with its default options (Levanter's for `linear` and `feistel`)."""


@dataclass(frozen=True)
class Phase:
    """One training step of a recipe: global steps `[start_step, end_step)` with fixed settings."""

    name: str
    """Step-name segment, e.g. "phase1b" (the step is `<recipe>/<name>`)."""
    retro_phase: str
    """The retrospective's phase this belongs to (sub-phases share it), e.g. "phase1"."""
    start_step: int
    """First global step; equals the parent's end_step (0 for the root)."""
    end_step: int
    """Global step at which the phase stops (its last step is end_step - 1)."""
    model: PresetName
    """Model preset name (`tootsie.models.presets.PRESETS`)."""
    schedule: ScheduleChoice
    """Learning-rate schedule over global steps; only `[start_step, end_step)` of it runs here."""
    optimizer: OptimizerChoice
    """Optimizer and its gradient clipping."""
    stability: StabilityConfig
    """Update clipping and bad-step skipping."""
    ema: EMAConfig | None
    """EMA of the weights; None for none."""
    z_loss_weight: float
    """z-loss weight."""
    permutation: PermutationKind
    """Shuffle of each component's sequences: "linear" (LCG) or "feistel".

    A kind of `tootsie.data.permutation.PERMUTATIONS`.
    """
    mixture: tuple[MixtureStage, ...] = ()
    """Mixture stages this phase starts (global steps in [start_step, end_step), named by `mix_stage`).

    () continues the parent's.
    """
    batch_sizes: tuple[tuple[int, int], ...] = ()
    """`(global step, sequences per step)` changes this phase makes; () continues the parent's."""
    parent: str | None = None
    """Phase whose last checkpoint this one warm-starts from; None trains from scratch."""
    add_qk_norm: bool = False
    """Warm start with the Llama → QK-norm surgery (the 32B phase 3)."""
    note: str = ""
    """One line on what the phase is and why (shown in the plan)."""

    def __post_init__(self) -> None:
        if not 0 <= self.start_step < self.end_step:
            raise ValueError(
                f"phase {self.name!r}: need 0 <= start_step < end_step, got {self.start_step=}, {self.end_step=}"
            )
        if self.model not in PRESETS:
            raise ValueError(
                f"phase {self.name!r}: model {self.model!r} is not a preset; pick one of {sorted(PRESETS)}"
            )
        if self.permutation not in PERMUTATIONS:
            raise ValueError(
                f"phase {self.name!r}: permutation {self.permutation!r} is "
                f"not a registered kind; pick one of {sorted(PERMUTATIONS)}"
            )
        starts = [stage.start_step for stage in self.mixture] + [start for start, _ in self.batch_sizes]
        outside = [start for start in starts if not self.start_step <= start < self.end_step]
        if outside:
            raise ValueError(
                f"phase {self.name!r}: mixture/batch changes at steps {outside} "
                f"lie outside its steps [{self.start_step}, {self.end_step})"
            )
        if (self.parent is None) != (self.start_step == 0):
            raise ValueError(
                f"phase {self.name!r}: a phase starts at step 0 exactly when "
                f"it has no parent, got {self.start_step=}, {self.parent=}"
            )


@dataclass(frozen=True)
class Recipe:
    """Phases (parents first), the sequence length, and which phase is the released artifact."""

    name: str
    """Prefix of every step name, e.g. "marin_32b"."""
    seq_len: int
    """Tokens per sequence."""
    phases: tuple[Phase, ...]
    """Every phase, each after its parent."""
    final: str
    """The phase whose checkpoint is the released model; its lineage counts in `total_tokens`."""
    compute_dtype: str = "bfloat16"
    """Dtype of the forward/backward pass (params and optimizer state stay float32)."""
    checkpoint_every: int = 20_000
    """Permanent checkpoint every this many steps (does not change the weights)."""
    seed: int = 0
    """Seed of the initialization and of every data shuffle."""
    notes: tuple[str, ...] = ()
    """Recipe-level caveats shown in the plan (numbers the seeds do not give, and what was chosen)."""

    def __post_init__(self) -> None:
        seen: dict[str, Phase] = {}
        for phase in self.phases:
            if phase.name in seen:
                raise ValueError(f"recipe {self.name!r}: phase name {phase.name!r} appears twice")
            if phase.parent is not None:
                parent = seen.get(phase.parent)
                if parent is None:
                    raise ValueError(
                        f"recipe {self.name!r}: phase {phase.name!r} names "
                        f"parent {phase.parent!r}, which is not an earlier phase"
                    )
                if parent.end_step != phase.start_step:
                    raise ValueError(
                        f"recipe {self.name!r}: phase {phase.name!r} starts at {phase.start_step} "
                        f"but its parent {parent.name!r} ends at {parent.end_step}"
                    )
            seen[phase.name] = phase
        roots = [phase for phase in self.phases if phase.parent is None]
        if len(roots) != 1 or not roots[0].mixture or not roots[0].batch_sizes:
            raise ValueError(
                f"recipe {self.name!r} needs exactly one root phase with mixture "
                f"and batch sizes from step 0, got roots {[p.name for p in roots]}"
            )
        if roots[0].mixture[0].start_step != 0 or roots[0].batch_sizes[0][0] != 0:
            raise ValueError(
                f"recipe {self.name!r}: the root phase's first mixture stage and batch size must start at step 0"
            )
        if self.final not in seen:
            raise ValueError(f"recipe {self.name!r}: final={self.final!r} is not one of its phases {sorted(seen)}")
        if self.seq_len <= 0 or self.checkpoint_every <= 0:
            raise ValueError(
                f"recipe {self.name!r}: seq_len and checkpoint_every must "
                f"be positive, got {self.seq_len=}, {self.checkpoint_every=}"
            )

    def phase(self, name: str) -> Phase:
        """The phase called `name`."""
        for phase in self.phases:
            if phase.name == name:
                return phase
        raise KeyError(f"recipe {self.name!r} has no phase {name!r}; phases: {[p.name for p in self.phases]}")

    def lineage(self, name: str) -> tuple[Phase, ...]:
        """The phases from the root to `name`, in training order."""
        chain = [self.phase(name)]
        while chain[-1].parent is not None:
            chain.append(self.phase(chain[-1].parent))
        return tuple(reversed(chain))

    def mixture_stages(self, name: str) -> tuple[MixtureStage, ...]:
        """The mixture stages of `name`'s data stream: its lineage's, in order."""
        return tuple(stage for phase in self.lineage(name) for stage in phase.mixture)

    def batch_sizes(self, name: str) -> tuple[tuple[int, int], ...]:
        """The batch-size changes of `name`'s data stream: its lineage's, in order."""
        return tuple(change for phase in self.lineage(name) for change in phase.batch_sizes)

    def artifact_phases(self) -> tuple[Phase, ...]:
        """The lineage of the released model."""
        return self.lineage(self.final)
