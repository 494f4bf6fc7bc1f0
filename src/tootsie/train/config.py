"""The training configuration: model, data, optimizer, schedule, and run control."""

from dataclasses import dataclass, field

from tootsie.data.mixture import MixtureConfig
from tootsie.executor.step import unhashed
from tootsie.models.llama import LlamaConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig

COMPUTE_DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run's outputs (plus unhashed run control)."""

    model: LlamaConfig
    """Architecture of the model trained."""
    data: MixtureConfig
    """Token caches, mixture weights, shapes and shuffles."""
    num_steps: int
    """Global step at which training stops (a warm start continues counting from its checkpoint)."""
    optimizer: AdamWConfig = field(default_factory=AdamWConfig)
    """Optimizer and gradient clipping."""
    schedule: WSDConfig = field(default_factory=WSDConfig)
    """Learning-rate schedule over global steps."""
    z_loss_weight: float = 0.0
    """Weight of the z-loss term (1e-4 in Marin's cooldowns)."""
    compute_dtype: str = "float32"
    """Dtype of the forward and backward pass; parameters and optimizer state stay float32."""
    seed: int = 0
    """Seed of the parameter initialization."""
    init_from: str | None = None
    """A training output directory (or checkpoint) to warm-start from: params, optimizer state and step."""
    checkpoint_every: int = unhashed(100)
    """Steps between checkpoints; does not change the trained weights."""
    keep_checkpoints: int = unhashed(2)
    """Newest checkpoints kept besides the final one."""

    def __post_init__(self) -> None:
        if self.num_steps <= 0:
            raise ValueError(f"num_steps must be positive, got {self.num_steps}")
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise ValueError(f"compute_dtype must be one of {COMPUTE_DTYPES}, got {self.compute_dtype!r}")
        if self.z_loss_weight < 0:
            raise ValueError(f"z_loss_weight must be >= 0, got {self.z_loss_weight}")
        if self.checkpoint_every <= 0:
            raise ValueError(f"checkpoint_every must be positive, got {self.checkpoint_every}")

    def tokens_before(self, step: int) -> int:
        """Tokens consumed by all steps before `step` (batch sizes may change by step)."""
        return int(self.data.batch_schedule.offset(step)) * self.data.seq_len
