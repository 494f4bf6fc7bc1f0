"""Learning-rate schedules as pure functions of the step, with a phase name.

Registry (STYLE rule 4): a name maps to a frozen config class whose `build()`
returns the schedule; the phase name ("warmup", "stable", "decay") is logged
with every step so a curve can be read against the schedule.

Example: `WSDConfig(peak_lr=1e-3, warmup_steps=10, decay_steps=20, total_steps=100)`
rises linearly to 1e-3 by step 10, holds to step 80, then decays linearly to
`min_lr_ratio * 1e-3` at step 100.
"""

from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp
from jaxtyping import Array, Float, Int


@dataclass(frozen=True)
class Schedule:
    """A learning rate and a phase name for every step."""

    learning_rate: Callable[[Int[Array, ""] | int], Float[Array, ""]]
    phase: Callable[[int], str]


@dataclass(frozen=True)
class WSDConfig:
    """Warmup → stable → linear decay (the schedule of Marin's 8B and 32B runs)."""

    peak_lr: float = 1e-3
    """Learning rate of the stable phase."""
    warmup_steps: int = 100
    """Steps of the linear rise from 0 to peak_lr."""
    decay_steps: int = 200
    """Steps of the linear decay that ends at total_steps."""
    total_steps: int = 1000
    """Step at which the decay reaches min_lr_ratio * peak_lr."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of peak_lr."""

    def __post_init__(self) -> None:
        if self.peak_lr <= 0:
            raise ValueError(f"peak_lr must be positive, got {self.peak_lr}")
        if self.warmup_steps < 0 or self.decay_steps < 0 or self.warmup_steps + self.decay_steps > self.total_steps:
            raise ValueError(f"need 0 <= warmup_steps + decay_steps <= total_steps, got {self.warmup_steps=}, {self.decay_steps=}, {self.total_steps=}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    def build(self) -> Schedule:
        """The schedule as jit-friendly functions."""
        decay_start = self.total_steps - self.decay_steps

        def learning_rate(step: Int[Array, ""] | int) -> Float[Array, ""]:
            s = jnp.asarray(step, jnp.float32)
            warm = jnp.minimum(1.0, (s + 1.0) / max(self.warmup_steps, 1))
            into_decay = jnp.clip((s - decay_start) / max(self.decay_steps, 1), 0.0, 1.0)
            decay = 1.0 - (1.0 - self.min_lr_ratio) * into_decay
            return self.peak_lr * jnp.minimum(warm, decay)

        def phase(step: int) -> str:
            if step < self.warmup_steps:
                return "warmup"
            return "stable" if step < decay_start else "decay"

        return Schedule(learning_rate=learning_rate, phase=phase)


SCHEDULES: dict[str, type[WSDConfig]] = {"wsd": WSDConfig}
