"""Learning-rate schedules as pure functions of the step, with a phase name.

Registry (docs/style.md rule 4): `SCHEDULES` maps a name to a frozen config class whose
`build()` returns a `Schedule`: `learning_rate(step)` (jit-friendly for optax's
traced int32 count, also takes Python ints, returns float32; it carries the
schedule's `peak_lr`, which AdamC divides by) and `phase(step)` ("warmup",
"stable", "decay", "cycle-2/rewarmup", "end", ...), logged with every step so a
loss curve can be read against where the schedule was. `ScheduleChoice`, the
type of `TrainConfig.schedule`, is the union derived from the registry. Every
config says where it ends (`end_step`, checked against `TrainConfig.num_steps`)
and its largest learning rate (`peak_lr`).

- `wsd`: warmup → stable → decay (Marin 8B Ocelot/Jellyfish/Starling, 32B).
- `wsd_s`: WSD-S, short decays at the end of every cycle (Marin 8B Kestrel).
- `cosine`, `linear`: warmup, then one decay over the rest of the run
  (`CosineConfig`, `LinearScheduleConfig`).
- `inverse_sqrt`: warmup, then `peak * sqrt(warmup / n)` (n = step + 1).
- `rewarm`: the general cyclic schedule (8B Phoenix reheat, 32B QK-norm switch);
  `wsd`, `wsd_s`, `cosine` and `linear` are built as special cases of it.

The piecewise machinery (segments, decay shapes, the step convention) lives in
`schedule_cycles`. Worked example: `WSDConfig(peak_lr=1e-3, warmup_steps=10,
decay_steps=20, total_steps=100)` trains step 0 at 1e-4, reaches 1e-3 on step 9,
holds through step 79, decays linearly to `0.1 * 1e-3` on step 99 and stays
there ("end"). See docs/schedules.md for each schedule's formula and Marin run.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from tootsie.configfile import registry_union
from tootsie.train.schedule_cycles import (
    Cycle,
    DecayShape,
    check_decay_shape,
    cycle_segments,
    segment_learning_rate,
    segment_phase,
)

MAX_STEP = 2**31 - 1
REWARM_FROM = ("previous", "zero")


@dataclass(frozen=True)
class LearningRate:
    """A schedule's learning rate by step, called like a function, with the largest value it takes.

    The peak travels with the function so an optimizer that needs it (AdamC)
    reads it from the schedule it is given instead of from a second setting.
    """

    function: Callable[[Int[Array, ""] | int], Float[Array, ""]]
    """Float32 LR of a step: jitted, traceable with optax's int32 count, also takes Python ints."""
    peak_lr: float
    """The largest learning rate of the schedule over all steps."""

    def __call__(self, step: Int[Array, ""] | int) -> Float[Array, ""]:
        """The learning rate of `step`."""
        return self.function(step)


@dataclass(frozen=True)
class Schedule:
    """A learning rate and a phase name for every step."""

    learning_rate: LearningRate
    """Float32 LR of a step (with the schedule's peak)."""
    phase: Callable[[int], str]
    """Name of the schedule phase of a (Python int) step, logged with every step."""


@runtime_checkable
class ScheduleConfig(Protocol):
    """A registry entry: a frozen config that builds a `Schedule`."""

    @property
    def peak_lr(self) -> float:
        """The largest learning rate of the schedule."""
        ...

    @property
    def end_step(self) -> int | None:
        """The step from which the schedule holds its final LR for ever (None: it never settles)."""
        ...

    def build(self) -> Schedule: ...


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _check_lr(min_lr_ratio: float, **peaks: float) -> None:
    for name, peak in peaks.items():
        _check(peak > 0, f"{name}={peak} must be > 0; pass the stable-phase learning rate, e.g. 1e-3")
    _check(
        0.0 <= min_lr_ratio <= 1.0,
        f"min_lr_ratio={min_lr_ratio} must be in [0, 1]; it is the final LR as a fraction of the peak",
    )


def _check_steps(**steps: int) -> None:
    for name, value in steps.items():
        _check(0 <= value <= MAX_STEP, f"{name}={value} must be in [0, {MAX_STEP}] (steps are int32)")


@dataclass(frozen=True)
class RewarmConfig:
    """`rewarm`: cycles of (re)warmup → stable → decay, each with its own peak.

    Cycle k runs from the previous cycle end (0 for the first) to `cycles[k]`.
    The 32B QK-norm switch: `cycles=(80_000, 1_000_000_000)`, `rewarmup_steps=1000`.
    """

    cycles: tuple[int, ...] = (600, 1000)
    """Step at which each cycle ends (strictly increasing); the last LR is held after the last one."""
    peak_lrs: tuple[float, ...] = (1e-3,)
    """Peak LR of each cycle, or a single peak shared by all cycles."""
    warmup_steps: int = 100
    """Steps of the linear warmup from 0 at the start of the first cycle."""
    rewarmup_steps: int = 100
    """Steps of the linear re-warmup at the start of every later cycle (0 jumps straight to the peak)."""
    rewarm_from: str = "previous"
    """Where a re-warmup starts: "previous" (the LR the previous cycle ended at) or "zero"."""
    decay_steps: int = 100
    """Steps of the decay that ends every cycle (set this or decay_fraction, not both)."""
    decay_fraction: float = 0.0
    """Decay length as a fraction of each cycle's length, rounded to whole steps."""
    decay_shape: DecayShape = "linear"
    """Curve of each decay: a key of `schedule_cycles.DECAY_SHAPES`."""
    min_lr_ratio: float = 0.1
    """LR at the end of each decay, as a fraction of that cycle's peak."""

    def __post_init__(self) -> None:
        _check(
            len(self.cycles) > 0,
            "cycles=() is empty; give the step at which each cycle ends, e.g. (80_000, 1_000_000_000)",
        )
        increasing = all(a < b for a, b in zip((0, *self.cycles), self.cycles))
        _check(
            increasing, f"cycles={self.cycles} must be strictly increasing and > 0; each entry is the step a cycle ends"
        )
        _check(
            len(self.peak_lrs) in (1, len(self.cycles)),
            f"peak_lrs={self.peak_lrs} needs 1 or len(cycles)={len(self.cycles)} entries",
        )
        _check_lr(self.min_lr_ratio, **{f"peak_lrs[{i}]": peak for i, peak in enumerate(self.peak_lrs)})
        _check_steps(
            **{"cycles[-1]": self.cycles[-1]},
            warmup_steps=self.warmup_steps,
            rewarmup_steps=self.rewarmup_steps,
            decay_steps=self.decay_steps,
        )
        _check(self.rewarm_from in REWARM_FROM, f"rewarm_from={self.rewarm_from!r} must be one of {REWARM_FROM}")
        _check(0.0 <= self.decay_fraction <= 1.0, f"decay_fraction={self.decay_fraction} must be in [0, 1]")
        _check(
            not (self.decay_steps and self.decay_fraction),
            f"set decay_steps={self.decay_steps} or decay_fraction={self.decay_fraction}, not both; zero the other",
        )
        check_decay_shape(self.decay_shape, self.min_lr_ratio)
        start = 0
        for number, cycle in enumerate(self.plan(), start=1):
            length = cycle.end - start
            need = cycle.warmup_steps + cycle.decay_steps
            warmup = "warmup_steps" if number == 1 else "rewarmup_steps"
            _check(
                need <= length,
                f"cycle {number} ({start} to {cycle.end}) has {length} steps, fewer "
                f"than {warmup}={cycle.warmup_steps} plus decay={cycle.decay_steps}; "
                f"lengthen the cycle (cycles={self.cycles}) or shorten the warmup/decay",
            )
            start = cycle.end

    @property
    def peak_lr(self) -> float:
        """The largest of the cycles' peaks."""
        return max(self.peak_lrs)

    @property
    def end_step(self) -> int:
        """The end of the last cycle."""
        return self.cycles[-1]

    def plan(self) -> tuple[Cycle, ...]:
        """The cycles this config lays out, with decay lengths in whole steps."""
        peaks = self.peak_lrs * len(self.cycles) if len(self.peak_lrs) == 1 else self.peak_lrs
        plan, start = [], 0
        for number, (end, peak) in enumerate(zip(self.cycles, peaks), start=1):
            decay = self.decay_steps or round(self.decay_fraction * (end - start))
            first = number == 1
            ramp_from = 0.0 if first or self.rewarm_from == "zero" else None
            plan.append(
                Cycle(
                    end,
                    peak,
                    self.warmup_steps if first else self.rewarmup_steps,
                    ramp_from,
                    decay,
                    peak * self.min_lr_ratio,
                )
            )
            start = end
        return tuple(plan)

    def build(self) -> Schedule:
        """The schedule as jit-friendly functions."""
        segments = cycle_segments(self.plan())
        return Schedule(
            learning_rate=LearningRate(segment_learning_rate(segments, self.decay_shape), self.peak_lr),
            phase=segment_phase(segments),
        )


@dataclass(frozen=True)
class WSDConfig:
    """`wsd`: warmup → stable → decay ending at total_steps (Marin 8B Ocelot onward, 32B)."""

    peak_lr: float = 1e-3
    """Learning rate of the stable phase."""
    warmup_steps: int = 100
    """Steps of the linear rise from 0 to peak_lr."""
    decay_steps: int = 200
    """Steps of the decay that ends at total_steps."""
    total_steps: int = 1000
    """Step at which the schedule ends; its last step (total_steps - 1) is at min_lr_ratio * peak_lr."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of peak_lr."""
    decay_shape: DecayShape = "linear"
    """Curve of the decay: a key of `schedule_cycles.DECAY_SHAPES`."""

    def __post_init__(self) -> None:
        _check_lr(self.min_lr_ratio, peak_lr=self.peak_lr)
        _check_steps(warmup_steps=self.warmup_steps, decay_steps=self.decay_steps, total_steps=self.total_steps)
        fits = 0 < self.total_steps and self.warmup_steps + self.decay_steps <= self.total_steps
        _check(
            fits,
            f"need 0 <= warmup_steps + decay_steps <= total_steps (> 0), got {self.warmup_steps=}, "
            f"{self.decay_steps=}, {self.total_steps=}; shorten warmup/decay or raise total_steps",
        )
        check_decay_shape(self.decay_shape, self.min_lr_ratio)

    @property
    def end_step(self) -> int:
        """total_steps."""
        return self.total_steps

    def as_rewarm(self) -> RewarmConfig:
        """The same schedule as a one-cycle `RewarmConfig`."""
        return RewarmConfig(
            cycles=(self.total_steps,),
            peak_lrs=(self.peak_lr,),
            warmup_steps=self.warmup_steps,
            decay_steps=self.decay_steps,
            decay_shape=self.decay_shape,
            min_lr_ratio=self.min_lr_ratio,
        )

    def build(self) -> Schedule:
        """The schedule as jit-friendly functions."""
        return self.as_rewarm().build()


@dataclass(frozen=True)
class WSDSConfig:
    """`wsd_s`: hold the peak, decay briefly at the end of every cycle, jump (or re-warm) back.

    Kestrel: decays of 1k steps every 10k steps to step 200k, then 2k every 20k:
    `cycles=spaced_cycles((10_000, 200_000), (20_000, total))`, `decay_fraction=0.1`.
    """

    peak_lr: float = 1e-3
    """Learning rate between decays."""
    warmup_steps: int = 100
    """Steps of the linear warmup from 0 at the start of the run."""
    cycles: tuple[int, ...] = (250, 500, 750, 1000)
    """Step at which each cycle (and its decay) ends; spacing may change (see `spaced_cycles`)."""
    decay_fraction: float = 0.1
    """Length of each decay as a fraction of its cycle (0.1: 1k of 10k steps in Kestrel)."""
    rewarmup_steps: int = 0
    """Steps of the linear climb back to peak_lr after a decay (0 jumps straight back)."""
    decay_shape: DecayShape = "linear"
    """Curve of each decay: a key of `schedule_cycles.DECAY_SHAPES`."""
    min_lr_ratio: float = 0.1
    """LR at the end of each decay, as a fraction of peak_lr."""

    def __post_init__(self) -> None:
        _check_lr(self.min_lr_ratio, peak_lr=self.peak_lr)
        _check(
            0.0 < self.decay_fraction <= 1.0,
            f"decay_fraction={self.decay_fraction} must be in (0, 1]; WSD-S decays every cycle (Kestrel used 0.1)",
        )
        self.as_rewarm()

    @property
    def end_step(self) -> int:
        """The end of the last cycle."""
        return self.cycles[-1]

    def as_rewarm(self) -> RewarmConfig:
        """The same schedule as a `RewarmConfig` whose re-warmups start from the decayed LR."""
        return RewarmConfig(
            cycles=self.cycles,
            peak_lrs=(self.peak_lr,),
            warmup_steps=self.warmup_steps,
            rewarmup_steps=self.rewarmup_steps,
            rewarm_from="previous",
            decay_steps=0,
            decay_fraction=self.decay_fraction,
            decay_shape=self.decay_shape,
            min_lr_ratio=self.min_lr_ratio,
        )

    def build(self) -> Schedule:
        """The schedule as jit-friendly functions."""
        return self.as_rewarm().build()


@dataclass(frozen=True)
class _WarmupDecayConfig:
    """Linear warmup, then one decay of shape `decay_shape` over all remaining steps."""

    decay_shape: ClassVar[DecayShape]

    peak_lr: float = 1e-3
    """Learning rate at the end of the warmup."""
    warmup_steps: int = 100
    """Steps of the linear rise from 0 to peak_lr."""
    total_steps: int = 1000
    """Step at which the schedule ends; its last step is at min_lr_ratio * peak_lr."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of peak_lr."""

    def __post_init__(self) -> None:
        _check_lr(self.min_lr_ratio, peak_lr=self.peak_lr)
        _check_steps(warmup_steps=self.warmup_steps, total_steps=self.total_steps)
        _check(
            self.warmup_steps < self.total_steps,
            f"warmup_steps={self.warmup_steps} must be < "
            f"total_steps={self.total_steps}; shorten the warmup or raise total_steps",
        )
        check_decay_shape(self.decay_shape, self.min_lr_ratio)

    @property
    def end_step(self) -> int:
        """total_steps."""
        return self.total_steps

    def as_wsd(self) -> WSDConfig:
        """The same schedule as a `WSDConfig` with no stable phase."""
        return WSDConfig(
            peak_lr=self.peak_lr,
            warmup_steps=self.warmup_steps,
            decay_steps=self.total_steps - self.warmup_steps,
            total_steps=self.total_steps,
            min_lr_ratio=self.min_lr_ratio,
            decay_shape=self.decay_shape,
        )

    def build(self) -> Schedule:
        """The schedule as jit-friendly functions."""
        return self.as_wsd().build()


@dataclass(frozen=True)
class CosineConfig(_WarmupDecayConfig):
    """`cosine`: linear warmup, then a half cosine from peak_lr to min_lr_ratio * peak_lr."""

    decay_shape: ClassVar[DecayShape] = "cosine"


@dataclass(frozen=True)
class LinearScheduleConfig(_WarmupDecayConfig):
    """`linear`: linear warmup, then a straight line from peak_lr to min_lr_ratio * peak_lr."""

    decay_shape: ClassVar[DecayShape] = "linear"


@dataclass(frozen=True)
class InverseSqrtConfig:
    """`inverse_sqrt`: `peak_lr * min(n / warmup_steps, sqrt(warmup_steps / n))` with n = step + 1."""

    peak_lr: float = 1e-3
    """Learning rate at the end of the warmup (step warmup_steps - 1)."""
    warmup_steps: int = 100
    """Steps of the linear rise; also the timescale of the 1/sqrt decay."""
    min_lr_ratio: float = 0.0
    """Floor of the decay as a fraction of peak_lr (0: none)."""

    def __post_init__(self) -> None:
        _check_lr(self.min_lr_ratio, peak_lr=self.peak_lr)
        _check_steps(warmup_steps=self.warmup_steps)
        _check(self.warmup_steps >= 1, f"warmup_steps={self.warmup_steps} must be >= 1: it sets the 1/sqrt timescale")

    @property
    def end_step(self) -> None:
        """None: the LR keeps falling (to its floor) however long the run."""
        return None

    def build(self) -> Schedule:
        """The schedule as jit-friendly functions."""
        warmup = float(self.warmup_steps)

        def learning_rate(step: Int[Array, ""] | int) -> Float[Array, ""]:
            n = (jnp.asarray(step, jnp.int32) + 1).astype(jnp.float32)
            return self.peak_lr * jnp.maximum(jnp.minimum(n / warmup, jnp.sqrt(warmup / n)), self.min_lr_ratio)

        def phase(step: int) -> str:
            if step < 0:
                raise ValueError(f"phase(step) needs step >= 0, got {step=}")
            return "warmup" if step < self.warmup_steps else "decay"

        return Schedule(learning_rate=LearningRate(jax.jit(learning_rate), self.peak_lr), phase=phase)


SCHEDULES: dict[str, type] = {
    "wsd": WSDConfig,
    "wsd_s": WSDSConfig,
    "cosine": CosineConfig,
    "linear": LinearScheduleConfig,
    "inverse_sqrt": InverseSqrtConfig,
    "rewarm": RewarmConfig,
}
ScheduleChoice = registry_union(SCHEDULES)
"""Any registered schedule config (the union of `SCHEDULES`' classes), written `{kind: NAME, ...}` in config files."""
