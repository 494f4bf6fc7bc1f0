"""How a recipe's full-scale numbers map onto a run: `FULL` is the identity.

A recipe is written in the runs' own numbers (global steps, sequences per
step, model presets). A `Scale` maps every step number (phase boundaries,
mixture stage starts and transitions, batch-size change points, schedule
lengths and cycle ends) by `step_factor`, batch sizes by `batch_factor`, and
may swap the sequence length, the compute dtype and the model of each preset,
so a small run keeps the recipe's phase structure and mixture weights. At
`FULL` nothing changes and the configs are the recipe's own objects.

Example: `Scale("small", step_factor=1e-3)` maps the 32B phase boundaries
56,400 / 72,233 / 80,000 to steps 56 / 72 / 80 and its 1,000-step re-warmup to
1 step.
"""

from dataclasses import dataclass, field, fields, replace
from typing import TypeVar

from tootsie.models.llama import LlamaConfig
from tootsie.models.presets import PRESETS, PresetName

S = TypeVar("S")

SCHEDULE_STEP_FIELDS = ("warmup_steps", "rewarmup_steps", "decay_steps", "total_steps", "cycles")
"""Fields of the schedule configs that count steps (ints, or a tuple of step numbers for `cycles`)."""


@dataclass(frozen=True)
class Scale:
    """A run size for a recipe."""

    name: str = "full"
    """Shown in plans and docs."""
    step_factor: float = 1.0
    """Every step number is multiplied by this and rounded (half up)."""
    batch_factor: float = 1.0
    """Every batch size (sequences per step) is multiplied by this and rounded, at least 1."""
    seq_len: int | None = None
    """Tokens per sequence; None keeps the recipe's."""
    compute_dtype: str | None = None
    """Forward/backward dtype; None keeps the recipe's."""
    models: dict[PresetName, LlamaConfig] = field(default_factory=dict)
    """Preset name → the model used for it at this scale; presets not listed are used as they are."""

    def __post_init__(self) -> None:
        if self.step_factor <= 0 or self.batch_factor <= 0:
            raise ValueError(
                f"scale {self.name!r}: step_factor and batch_factor must be "
                f"positive, got {self.step_factor=}, {self.batch_factor=}"
            )
        if self.seq_len is not None and self.seq_len <= 0:
            raise ValueError(f"scale {self.name!r}: seq_len must be positive or None, got {self.seq_len}")
        unknown = sorted(set(self.models) - set(PRESETS))
        if unknown:
            raise ValueError(
                f"scale {self.name!r}: models maps {unknown}, which are not presets; use names from {sorted(PRESETS)}"
            )

    def step(self, step: int) -> int:
        """A full-scale step number at this scale."""
        return step if self.step_factor == 1.0 else int(step * self.step_factor + 0.5)

    def batch(self, batch_size: int) -> int:
        """A full-scale batch size (sequences) at this scale."""
        return batch_size if self.batch_factor == 1.0 else max(1, int(batch_size * self.batch_factor + 0.5))

    def model(self, preset: PresetName) -> LlamaConfig:
        """The model of a preset at this scale."""
        return self.models.get(preset, PRESETS[preset])

    def schedule(self, schedule: S) -> S:
        """A schedule config with its step fields mapped (the same object at full scale)."""
        if self.step_factor == 1.0:
            return schedule
        values = {f.name: getattr(schedule, f.name) for f in fields(schedule) if f.name in SCHEDULE_STEP_FIELDS}
        return replace(
            schedule,
            **{name: tuple(map(self.step, v)) if isinstance(v, tuple) else self.step(v) for name, v in values.items()},
        )


FULL = Scale()
"""The runs as they were."""
