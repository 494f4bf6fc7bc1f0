"""The training configuration: model, data, optimizer, schedule, stability, checkpoints.

Every field that can change the trained weights is hashed by the executor;
checkpoint cadence, trackers and profiling are not (`unhashed`), since when a
run saves or where it logs does not change what it computes (rewinding does,
so `rewind` is hashed). Optimizer and schedule are registry unions, written in
config files with a `kind:` tag (the unions are derived from the registries).

The schedule counts global steps, so `num_steps` may stop short of its end (a
phase that a warm start continues on the same schedule: a cooldown's
`num_steps` is the global step it ends at) but never run past it, where the
LR would sit at its final value: `__post_init__` refuses that, naming both.

The device mesh and the multi-host settings are not hashed either: they change
where arrays live and the order of float sums, not what is computed (the same
global batches, weights and updates; losses agree with one device's to float
tolerance, tests/train/test_sharding.py). Hashing them would give the same run
a new output path on a bigger slice, so a run could not resume on another mesh.
The price: a resume is bit-exact only on the mesh (and hardware) that wrote the
checkpoint; on another it continues within float tolerance.
"""

from dataclasses import dataclass, field

from tootsie.configfile import hashed_when_set, unhashed
from tootsie.data.source import DataChoice
from tootsie.models.registry import ModelChoice
from tootsie.monitor.trackers import TrackerChoice
from tootsie.train.divergence import DivergenceConfig
from tootsie.train.ema import EMAConfig
from tootsie.train.objectives import NextTokenObjective, ObjectiveChoice
from tootsie.train.optimizer import AdamWConfig, OptimizerChoice
from tootsie.train.rewind import DataSkips, RewindConfig
from tootsie.train.schedule import ScheduleChoice, WSDConfig
from tootsie.train.sharding import DistributedConfig, MeshConfig
from tootsie.train.stability import StabilityConfig

COMPUTE_DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class CheckpointConfig:
    """When checkpoints are written and which are kept; none of it changes the trained weights."""

    every_steps: int = unhashed(1000)
    """A permanent checkpoint every this many steps (kept forever, like Marin's released revisions)."""
    every_minutes: float | None = unhashed(30.0)
    """A temporary checkpoint when this much time passed since the last save (only the newest is kept)."""
    temporary_every_steps: int | None = unhashed(None)
    """A temporary checkpoint every this many steps (only the newest is kept): an RL run's after every iteration."""

    def __post_init__(self) -> None:
        if self.every_steps <= 0:
            raise ValueError(f"every_steps must be positive, got {self.every_steps}")
        if self.temporary_every_steps is not None and self.temporary_every_steps <= 0:
            raise ValueError(f"temporary_every_steps must be positive or None, got {self.temporary_every_steps}")
        if self.every_minutes is not None and self.every_minutes <= 0:
            raise ValueError(f"every_minutes must be positive or None, got {self.every_minutes}")


@dataclass(frozen=True)
class WarmStartConfig:
    """Start from another run's checkpoint instead of a fresh initialization."""

    checkpoint: str
    """A checkpoint directory, or a training output directory (its newest checkpoint)."""
    load_optimizer: bool = True
    """Load the optimizer state: tensors match by what they are; new statistics start fresh.

    Adam's moments match by parameter, across optimizers and stability wrappers.
    """
    reset_step: bool = False
    """Start counting steps (and the data position) at 0 instead of at the checkpoint's step."""
    add_qk_norm: bool = False
    """Llama → QK-norm surgery: the new per-head norm scales start at one (Marin 32B phase 3)."""


@dataclass(frozen=True)
class PalomaDomains:
    """Sources of a local Paloma mirror scored in-loop with Paloma's definitions (`tootsie.eval.paloma`)."""

    mirror: str
    """A local clone of the allenai/paloma dataset: `<mirror>/<source>/<split>/*.jsonl.gz`."""
    subsets: tuple[str, ...]
    """Sources to score, e.g. ("c4_en", "m2d2_s2orc_unsplit"); logged as `eval/paloma/<source>/*`."""
    split: str = "val"
    """The split folder: "val" or "test"."""
    max_documents: int | None = 32
    """Documents per subdomain (the first ones); None for all."""
    prefix_token: str = "bos"
    """The token a document's first token is predicted from: "bos" or "eos" (Paloma's code uses EOS)."""

    def __post_init__(self) -> None:
        if not self.subsets:
            raise ValueError("subsets is empty; name at least one Paloma source, e.g. subsets: [c4_en]")
        if self.split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {self.split!r}")
        if self.max_documents is not None and self.max_documents <= 0:
            raise ValueError(f"max_documents must be positive or None, got {self.max_documents}")
        if self.prefix_token not in ("bos", "eos"):
            raise ValueError(f"prefix_token must be 'bos' or 'eos', got {self.prefix_token!r}")


@dataclass(frozen=True)
class InLoopEvalConfig:
    """Held-out bits-per-byte (raw and EMA weights) and lm-eval tasks (raw weights) during training.

    It is logged and never changes the weights.
    """

    heldout: dict[str, str]
    """Domain name → held-out token cache ({} to run only lm-eval tasks)."""
    tokenizer: str
    """The tokenizer.json the caches were made with (for byte counts)."""
    every_steps: int = 100
    """Evaluate after every this many steps (and after the last one)."""
    max_sequences: int | None = 32
    """Sequences per domain; None for all."""
    lm_eval_tasks: tuple[str, ...] = ()
    """lm-eval tasks from local files (built-in `tootsie_*` or under lm_eval_include_paths).

    Logged as `eval/lm/<task>/<metric>`; needs `tootsie[lmeval]`.
    """
    lm_eval_include_paths: tuple[str, ...] = ()
    """Directories of lm-eval task YAMLs with local data_files."""
    lm_eval_limit: int | None = None
    """Documents per lm-eval task (the first ones); None for all."""
    paloma: PalomaDomains | None = hashed_when_set()
    """Paloma sources scored as Paloma defines its figures; None for none (and then left out of the hash)."""

    def __post_init__(self) -> None:
        if not self.heldout and not self.lm_eval_tasks and self.paloma is None:
            raise ValueError(
                "heldout, lm_eval_tasks and paloma are all empty; name a held-out cache, an lm-eval task or paloma"
            )
        if self.every_steps <= 0:
            raise ValueError(f"every_steps must be positive, got {self.every_steps}")
        if self.lm_eval_limit is not None and self.lm_eval_limit <= 0:
            raise ValueError(f"lm_eval_limit must be positive or None, got {self.lm_eval_limit}")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run's outputs (plus unhashed run control)."""

    model: ModelChoice
    """Architecture of the model trained (a registry entry, `{kind: llama, ...}`; without `kind:` a Llama)."""
    data: DataChoice
    """Token caches, mixture stages, batch schedule and shuffles; or `{kind: supplied}` rows (an RL rollout buffer)."""
    num_steps: int
    """Global step at which training stops (a warm start continues counting from its checkpoint)."""
    optimizer: OptimizerChoice = field(default_factory=AdamWConfig)
    """Optimizer (a registry entry) with its gradient clipping."""
    schedule: ScheduleChoice = field(default_factory=WSDConfig)
    """Learning-rate schedule over global steps (a registry entry)."""
    stability: StabilityConfig = field(default_factory=StabilityConfig)
    """Update-norm clipping and bad-step skipping (both off by default, see `StabilityConfig`).

    The 32B recipe turns them on.
    """
    ema: EMAConfig | None = field(default_factory=EMAConfig)
    """EMA of the weights, checkpointed and evaluable; None turns it off."""
    objective: ObjectiveChoice = field(default_factory=NextTokenObjective)
    """What the step minimizes (a registry entry): next-token prediction over the loss mask."""
    z_loss_weight: float = 0.0
    """Weight of the z-loss term (1e-4 in Marin's cooldowns)."""
    compute_dtype: str = "float32"
    """Dtype of the forward and backward pass; parameters and optimizer state stay float32."""
    microbatches: int = 1
    """Gradient accumulation: split every batch into this many sequential microbatches."""
    seed: int = 0
    """Seed of the parameter initialization."""
    warm_start: WarmStartConfig | None = None
    """Start from another run's checkpoint (a cooldown, an architecture switch)."""
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Checkpoint cadence and retention (not hashed)."""
    eval: InLoopEvalConfig | None = None
    """In-loop held-out evaluation, run by `tootsie.eval.training.run_training`.

    Hashed: its caches are inputs of the step.
    """
    rewind: RewindConfig | None = None
    """Rewind to the last good checkpoint and skip the data window when a loss spike becomes a plateau (off: None)."""
    divergence: DivergenceConfig | None = hashed_when_set()
    """Stop a diverging run with `diverged.json` instead of an error (`train.divergence`); None: NaN/inf raises."""
    trackers: tuple[TrackerChoice, ...] = unhashed(())
    """Trackers besides the always-on metrics.jsonl: `{kind: wandb, ...}`, `{kind: tensorboard}` (not hashed)."""
    profile_steps: tuple[int, int] | None = unhashed(None)
    """Capture a JAX profiler trace of steps [a, b) into `<out>/profile/` (not hashed)."""
    mesh: MeshConfig = unhashed(MeshConfig())
    """Device mesh data × expert × fsdp × tensor (default: data parallel over every device).

    Not hashed, see the module docstring.
    """
    distributed: DistributedConfig | None = unhashed(None)
    """Multi-host: join with `jax.distributed.initialize` first (None: one process); not hashed."""

    def __post_init__(self) -> None:
        if self.num_steps <= 0:
            raise ValueError(f"num_steps must be positive, got {self.num_steps}")
        end = self.schedule.end_step
        if end is not None and self.num_steps > end:
            raise ValueError(
                f"num_steps={self.num_steps} runs past the schedule's end at step {end} (schedule.end_step), "
                "where the LR is held at its final value; "
                f"end the schedule at num_steps or later, or lower num_steps to {end} "
                "(stopping before the end is fine: a warm start can continue the same schedule)"
            )
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise ValueError(f"compute_dtype must be one of {COMPUTE_DTYPES}, got {self.compute_dtype!r}")
        if self.z_loss_weight < 0:
            raise ValueError(f"z_loss_weight must be >= 0, got {self.z_loss_weight}")
        if self.microbatches < 1:
            raise ValueError(f"microbatches must be >= 1, got {self.microbatches}")
        if self.warm_start is not None and self.warm_start.add_qk_norm and not self.model.qk_norm:
            raise ValueError(
                "warm_start.add_qk_norm is set but model.qk_norm is False; the surgery needs a QK-norm model"
            )
        kinds = [type(tracker).__name__ for tracker in self.trackers]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"trackers lists a kind twice ({kinds}); give each tracker once")
        if self.profile_steps is not None and not 0 <= self.profile_steps[0] < self.profile_steps[1]:
            raise ValueError(f"profile_steps must be (a, b) with 0 <= a < b, got {self.profile_steps}")

    def tokens_before(self, step: int, skips: DataSkips = DataSkips()) -> int:
        """Tokens trained on by all steps before `step` (batch sizes may change by step; rewinds skip data)."""
        return skips.sequences_before(step, self.data.batch_schedule) * self.data.seq_len
