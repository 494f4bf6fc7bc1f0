"""Batch-size schedules: how many sequences each step takes, and where each step starts.

A schedule is a list of `(start_step, batch_size)` stages. Steps index the
training loop; sequence offsets index the data stream. `offset(step)` is the
number of sequences consumed before `step`, so a data position written as a
step stays exact when the batch size changes mid-run.

Example (the 32B run, seq 4096): `BatchSchedule(((0, 8192), (18_500, 7680), (21_010, 8192)))`
gives `offset(18_500) = 18_500 * 8192` and `offset(21_010) = 18_500 * 8192 + 2_510 * 7680`.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BatchSchedule:
    """Piecewise-constant global batch size by step."""

    stages: tuple[tuple[int, int], ...]
    """`(start_step, batch_size)` pairs; the first must start at step 0, starts strictly increasing."""

    def __post_init__(self) -> None:
        if not self.stages or self.stages[0][0] != 0:
            raise ValueError(f"stages must start at step 0, got {self.stages}")
        starts = [start for start, _ in self.stages]
        if any(b <= a for a, b in zip(starts, starts[1:])):
            raise ValueError(
                f"stage start steps must strictly increase, got {starts}; a stage cannot start before the previous one"
            )
        if any(size <= 0 for _, size in self.stages):
            raise ValueError(f"batch sizes must be positive, got {[size for _, size in self.stages]}")

    @classmethod
    def constant(cls, batch_size: int) -> "BatchSchedule":
        """The same batch size at every step."""
        return cls(((0, batch_size),))

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        starts = np.array([s for s, _ in self.stages], dtype=np.int64)
        sizes = np.array([b for _, b in self.stages], dtype=np.int64)
        base = np.concatenate([[0], np.cumsum(np.diff(starts) * sizes[:-1])])
        return starts, sizes, base

    def batch_size(self, step: int) -> int:
        """Global batch size at `step`."""
        starts, sizes, _ = self._arrays()
        return int(sizes[np.searchsorted(starts, step, side="right") - 1])

    def offset(self, step: int | np.ndarray) -> int | np.ndarray:
        """Sequences consumed before `step` (vectorized)."""
        starts, sizes, base = self._arrays()
        steps = np.asarray(step, dtype=np.int64)
        stage = np.searchsorted(starts, steps, side="right") - 1
        result = base[stage] + (steps - starts[stage]) * sizes[stage]
        return int(result) if np.ndim(step) == 0 else result
