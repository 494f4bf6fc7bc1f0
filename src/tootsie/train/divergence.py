"""When a training run has diverged, and the record it leaves: `diverged.json`.

A sweep trains many configs and some diverge (a learning rate too high for
their width). Raising would fail the sweep's step and everything after it; the
seeds' Vizier sweep marked such trials infeasible instead. With
`TrainConfig.divergence` set, a run that diverges stops, writes
`diverged.json` (`DIVERGED_FILE`) into its output directory and ends normally,
so a sweep's eval step can record it as infeasible (`read_divergence`).

Definition (`DivergenceConfig`, hashed with the run): a run has diverged after
step s when either

- `max_nonfinite_steps` steps up to s (not necessarily consecutive) had a NaN
  or infinite loss, or a non-finite gradient norm (or update, as counted by
  the skip-bad-steps transform); or
- the loss was above `max_loss` on each of the `patience` steps ending at s (a
  non-finite step counts as above).

Example: a vocabulary of 4096 gives `max_loss = 1.5 * ln(4096) = 12.48`; with
`patience=10` and the loss above 12.48 on steps 30 to 39, the run stops after
step 39 and writes `{"step": 39, "reason": "loss above 12.48 for 10 steps
(steps 30-39)", "loss": 13.1, "max_loss": 12.48, "patience": 10,
"max_nonfinite_steps": 1}`. A NaN loss is written null and an infinite one
"inf", as metrics.jsonl writes them. The file holds no clock time, so the same
run writes the same bytes.
"""

import math
from dataclasses import dataclass
from pathlib import Path

from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json

DIVERGED_FILE = "diverged.json"
"""The file a diverged run writes into its output directory."""


@dataclass(frozen=True)
class DivergenceConfig:
    """What counts as a diverged run; hashed, since it decides where a run stops."""

    max_loss: float
    """A loss above this counts toward `patience`; about 1.5 × ln(vocab), well above a uniform guess's ln(vocab)."""
    patience: int
    """This many steps in a row above `max_loss` mean diverged (several, so one bad batch is not a divergence)."""
    max_nonfinite_steps: int = 1
    """This many steps with a NaN/inf loss or gradient norm mean diverged (1: without skipping, one NaN poisons the
    weights for good)."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.max_loss) or self.max_loss <= 0:
            raise ValueError(
                f"divergence.max_loss must be a positive finite loss, got {self.max_loss=}; "
                "about 1.5 * ln(vocab_size) is a loss no learning run stays above"
            )
        if self.patience < 1:
            raise ValueError(f"divergence.patience must be >= 1 steps, got {self.patience=}; e.g. 10")
        if self.max_nonfinite_steps < 1:
            raise ValueError(
                f"divergence.max_nonfinite_steps must be >= 1, got {self.max_nonfinite_steps=}; "
                "1 stops at the first NaN/inf"
            )


class Diverged(TootsieError):
    """The run diverged; `record` is what it wrote to `diverged.json` (`run_training` returns normally on it)."""

    def __init__(self, record: dict[str, object]) -> None:
        super().__init__(f"the run diverged after step {record['step']}: {record['reason']}")
        self.record = record


def _finite(value: object) -> bool:
    """Whether a logged value is a finite number (the metrics log writes NaN as null and inf as "inf")."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def _logged(value: object) -> object:
    """`value` as metrics.jsonl writes it: a finite number as is, NaN as null, inf as "inf" or "-inf"."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return None if isinstance(value, float) and math.isnan(value) else value


class DivergenceWatch:
    """The run's non-finite count and current streak above `max_loss`; `observe` says when the run diverged.

    Built from the run's logged records, so a run resumed midway decides as the uninterrupted run would.
    """

    def __init__(self, config: DivergenceConfig, records: list[dict[str, object]]) -> None:
        self.config = config
        self.nonfinite = 0
        self.streak_start: int | None = None
        """The first step of the current run of steps above `max_loss` (None: the last step was below)."""
        for record in records:
            if isinstance(record.get("step"), int):
                self.observe(record["step"], record)

    def observe(self, step: int, record: dict[str, object]) -> dict[str, object] | None:
        """Add step `step`'s record; return the `diverged.json` record if the run diverged at it, else None."""
        loss, grad_norm = _logged(record.get("loss")), _logged(record.get("grad_norm", 0.0))
        bad = not _finite(loss) or not _finite(grad_norm)
        self.nonfinite += bad
        above = bad or loss > self.config.max_loss
        self.streak_start = (step if self.streak_start is None else self.streak_start) if above else None
        # the skip-bad-steps transform also counts non-finite updates, in the optimizer state (so across resumes)
        nonfinite = max(self.nonfinite, int(record.get("skip/nonfinite_steps") or 0))
        if nonfinite >= self.config.max_nonfinite_steps:
            what = (
                f"loss {'nan' if loss is None else loss}"
                if not _finite(loss)
                else (f"grad_norm {'nan' if grad_norm is None else grad_norm}" if bad else "non-finite update")
            )
            total = f" ({nonfinite} non-finite steps, max_nonfinite_steps={self.config.max_nonfinite_steps})"
            reason = f"{what} at step {step}" + (total if self.config.max_nonfinite_steps > 1 else "")
        elif self.streak_start is not None and step - self.streak_start + 1 >= self.config.patience:
            first = step - self.config.patience + 1
            reason = f"loss above {self.config.max_loss:g} for {self.config.patience} steps (steps {first}-{step})"
        else:
            return None
        return {
            "step": step,
            "reason": reason,
            "loss": loss,
            "max_loss": self.config.max_loss,
            "patience": self.config.patience,
            "max_nonfinite_steps": self.config.max_nonfinite_steps,
        }


def read_divergence(output_dir: str | Path) -> dict[str, object] | None:
    """The `diverged.json` of training output `output_dir`, or None when the run did not diverge."""
    return read_json(Path(output_dir) / DIVERGED_FILE)
