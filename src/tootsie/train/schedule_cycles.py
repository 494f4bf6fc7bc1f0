"""The piecewise machinery under every schedule: segments, decay shapes, cycles.

A schedule is a list of `Segment`s, each covering steps `[start, start + length)`
and moving the learning rate from `lr_from` to `lr_to`: linearly (warmups,
re-warmups, and flat holds where `lr_from == lr_to`) or along one of
`DECAY_SHAPES` (decays). `cycle_segments` lays out one (re)warmup → stable →
decay per `Cycle` and then holds the last rate for ever (phase "end").

Why segments and a gather rather than nested `jnp.where`s: `learning_rate` is one
`searchsorted` over the segment starts plus a few gathers, so it traces for the
int32 step optax passes in, vmaps over a vector of steps, and compiles to the
same small graph for the 3 segments of a WSD run or the ~100 of a WSD-S run. It
is wrapped in `jax.jit` (inlined when optax traces it), so the trainer's eager
per-step call for logging is one dispatch, not a dozen op-by-op ones.

Step convention: step `k` of an `n`-step segment sits at fraction `(k + 1) / n`,
so every segment reaches its target on its own last step. A warmup of `n` steps
trains step 0 at `peak / n` (never a wasted zero-LR step) and step `n - 1` at the
peak; a decay trains its last step at exactly the min LR. Levanter (optax) uses
`k / n`: LR 0 at step 0 and the min reached one step after the decay. The
difference is one step.

Worked example: cycles ending at 10 and 20, peak 1.0, warmup 2, re-warmup 2 from
the previous LR, decay 4, min 0.1 gives
    steps 0-1   warmup     0.5, 1.0
    steps 2-5   stable     1.0
    steps 6-9   decay      0.775, 0.55, 0.325, 0.1
    steps 10-11 rewarmup   0.55, 1.0
    steps 12-15 stable     1.0
    steps 16-19 decay      0.775, 0.55, 0.325, 0.1
    steps 20-   end        0.1
with phases "cycle-1/warmup", ..., "cycle-2/rewarmup", ..., "end".
"""

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import index

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from tootsie.configfile import names_literal

Scalar = Float[Array, ""]


def _linear(lr_from: Scalar, lr_to: Scalar, progress: Scalar) -> Scalar:
    return lr_to + (lr_from - lr_to) * (1.0 - progress)


def _cosine(lr_from: Scalar, lr_to: Scalar, progress: Scalar) -> Scalar:
    return lr_to + (lr_from - lr_to) * 0.5 * (1.0 + jnp.cos(jnp.pi * progress))


def _sqrt(lr_from: Scalar, lr_to: Scalar, progress: Scalar) -> Scalar:
    return lr_to + (lr_from - lr_to) * (1.0 - jnp.sqrt(progress))


def _inv_sqrt(lr_from: Scalar, lr_to: Scalar, progress: Scalar) -> Scalar:
    return lr_from / jnp.sqrt(1.0 + ((lr_from / lr_to) ** 2 - 1.0) * progress)


DECAY_SHAPES: dict[str, Callable[[Scalar, Scalar, Scalar], Scalar]] = {
    "linear": _linear,
    "cosine": _cosine,
    "sqrt": _sqrt,
    "inv_sqrt": _inv_sqrt,
}
"""Decay curves `f(lr_from, lr_to, progress)` with `f(., ., 0) = lr_from` and `f(., ., 1) = lr_to`.

`linear` and `cosine` are the classic shapes; `sqrt` is the "1-sqrt" cooldown of
Hägele et al. 2024 (WSD beyond fixed durations), which drops fastest early;
`inv_sqrt` is `lr_from / sqrt(1 + ((lr_from / lr_to)^2 - 1) * progress)`, an
inverse-square-root decay rescaled to land on `lr_to` (so `lr_to` must be > 0).
"""
DecayShape = names_literal(DECAY_SHAPES)
"""The type of a schedule's `decay_shape` field: a key of DECAY_SHAPES, checked when a config file is loaded.

A `Literal` rather than a `kind:` registry: a shape is a name with no options.
"""


def check_decay_shape(decay_shape: str, min_lr_ratio: float) -> None:
    """Raise ValueError unless `decay_shape` is registered and can reach `min_lr_ratio * peak`."""
    if decay_shape not in DECAY_SHAPES:
        raise ValueError(f"decay_shape={decay_shape!r} is not one of {sorted(DECAY_SHAPES)}; pick one of those")
    if decay_shape == "inv_sqrt" and min_lr_ratio <= 0:
        raise ValueError(
            f"decay_shape='inv_sqrt' never reaches 0, got {min_lr_ratio=}; "
            "set min_lr_ratio > 0 or use decay_shape='sqrt'"
        )


@dataclass(frozen=True)
class Segment:
    """Steps `[start, start + length)` moving the LR from `lr_from` to `lr_to`."""

    start: int
    """First step of the segment."""
    length: int
    """Number of steps (> 0)."""
    lr_from: float
    """Learning rate the segment starts from (reached one step before its first step)."""
    lr_to: float
    """Learning rate on the segment's last step."""
    decays: bool
    """True: follow the schedule's decay shape; False: move linearly (or hold when lr_from == lr_to)."""
    phase: str
    """Name logged for every step of the segment."""


@dataclass(frozen=True)
class Cycle:
    """One (re)warmup → stable → decay cycle ending at step `end`."""

    end: int
    """Step after the cycle's last step (where the next cycle starts)."""
    peak_lr: float
    """Learning rate of the stable part."""
    warmup_steps: int
    """Steps of the linear ramp from `warmup_from` to `peak_lr` at the start of the cycle."""
    warmup_from: float | None
    """Where the ramp starts; None continues from the previous cycle's last LR (0 for the first cycle)."""
    decay_steps: int
    """Steps of the decay from `peak_lr` to `min_lr` that ends the cycle."""
    min_lr: float
    """Learning rate on the cycle's last step when it decays."""


def cycle_segments(cycles: Sequence[Cycle]) -> list[Segment]:
    """The segments of consecutive cycles (the first starts at step 0), then a hold named "end".

    Phase names are bare ("warmup", "stable", "decay") for one cycle and
    "cycle-{k}/..." (1-based, "rewarmup" for k >= 2) for several. Callers
    validate that each cycle fits its warmup plus decay.
    """
    named = len(cycles) > 1
    segments, start, previous = [], 0, 0.0
    for number, cycle in enumerate(cycles, start=1):
        prefix = f"cycle-{number}/" if named else ""
        ramp = "warmup" if number == 1 else "rewarmup"
        ramp_from = previous if cycle.warmup_from is None else cycle.warmup_from
        decay_start = cycle.end - cycle.decay_steps
        stable_start = start + cycle.warmup_steps
        segments += [
            Segment(start, cycle.warmup_steps, ramp_from, cycle.peak_lr, False, prefix + ramp),
            Segment(stable_start, decay_start - stable_start, cycle.peak_lr, cycle.peak_lr, False, prefix + "stable"),
            Segment(decay_start, cycle.decay_steps, cycle.peak_lr, cycle.min_lr, True, prefix + "decay"),
        ]
        previous = cycle.min_lr if cycle.decay_steps else cycle.peak_lr
        start = cycle.end
    segments.append(Segment(start, 1, previous, previous, False, "end"))
    return [segment for segment in segments if segment.length > 0]


def segment_learning_rate(segments: Sequence[Segment], decay_shape: str) -> Callable[[Int[Array, ""] | int], Scalar]:
    """`learning_rate(step)` (float32) over `segments`, sorted by start; jitted once: eager calls cost one dispatch."""
    shape = DECAY_SHAPES[decay_shape]
    starts = jnp.asarray([s.start for s in segments], jnp.int32)
    lengths = jnp.asarray([s.length for s in segments], jnp.float32)
    lr_from = jnp.asarray([s.lr_from for s in segments], jnp.float32)
    lr_to = jnp.asarray([s.lr_to for s in segments], jnp.float32)
    decays = jnp.asarray([s.decays for s in segments], jnp.bool_)

    def learning_rate(step: Int[Array, ""] | int) -> Scalar:
        s = jnp.asarray(step, jnp.int32)
        i = jnp.clip(jnp.searchsorted(starts, s, side="right") - 1, 0, len(segments) - 1)
        progress = jnp.clip((s - starts[i] + 1).astype(jnp.float32) / lengths[i], 0.0, 1.0)
        a, b, decay = lr_from[i], lr_to[i], decays[i]
        ramp = a + (b - a) * progress
        # Non-decay segments feed the shape 1 → 1, so an unused inv_sqrt never divides by 0.
        shaped = shape(jnp.where(decay, a, 1.0), jnp.where(decay, b, 1.0), progress)
        return jnp.where(decay, shaped, ramp)

    return jax.jit(learning_rate)


def segment_phase(segments: Sequence[Segment]) -> Callable[[int], str]:
    """`phase(step)`: the name of the segment holding the (Python int) step."""
    starts = [segment.start for segment in segments]

    def phase(step: int) -> str:
        step = index(step)
        if step < 0:
            raise ValueError(f"phase(step) needs step >= 0, got {step=}")
        return segments[bisect_right(starts, step) - 1].phase

    return phase


def spaced_cycles(*spans: tuple[int, int]) -> tuple[int, ...]:
    """Cycle ends from `(every, until)` spans, e.g. Kestrel's decay spacing change.

    `spaced_cycles((10_000, 200_000), (20_000, 280_000))` is
    `(10_000, 20_000, ..., 200_000, 220_000, 240_000, 260_000, 280_000)`.
    """
    ends: list[int] = []
    for every, until in spans:
        start = ends[-1] if ends else 0
        if every <= 0 or until <= start or (until - start) % every:
            raise ValueError(
                f"span (every={every}, until={until}) must tile ({start}, {until}] "
                f"in whole cycles; make until - {start} a positive multiple of every"
            )
        ends += range(start + every, until + 1, every)
    return tuple(ends)
