"""An exponential moving average of the weights, for evaluation (EMA beta 0.995 in Marin's 8B and 32B runs).

`ema = beta * ema + (1 - beta) * params` after every optimizer step averages
out the last ~1/(1-beta) = 200 steps of noise from "hot" weights. Early in a
run a fixed beta would keep the EMA near the random initialization for
hundreds of steps, so by default beta warms up as `min(beta, (1 + t) / (10 + t))`
(TensorFlow's `ExponentialMovingAverage(num_updates=t)`): 0.1 at t=0, 0.5 at
t=8, 0.9 at t=80, and capped at 0.995 from t≈1790. This keeps the EMA weights
directly usable at every step, with no bias-correction division when reading
them (the alternative: Adam-style correction `ema / (1 - beta**t)` needs a
zero-initialized EMA and a division at every read).

Example: for params moving by a constant `c` per step, a fixed-beta EMA that
starts at the params lags them by `c * beta * (1 - beta**t) / (1 - beta)`,
i.e. 199·c in the long run at beta=0.995.
"""

from dataclasses import dataclass
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

Tree = TypeVar("Tree")


def ema_update(ema_params: Tree, params: Tree, beta: float | Float[Array, ""]) -> Tree:
    """`beta * ema + (1 - beta) * params` on float leaves, in the EMA's dtype; other leaves come from `params`."""

    def mix(ema: object, new: object) -> object:
        if not eqx.is_inexact_array(ema):
            return new
        b = jnp.asarray(beta, jnp.float32)
        mixed = b * ema.astype(jnp.float32) + (1.0 - b) * jnp.asarray(new).astype(jnp.float32)
        return mixed.astype(ema.dtype)

    return jax.tree.map(mix, ema_params, params)


def warmup_beta(step: int | Int[Array, ""], beta: float) -> Float[Array, ""]:
    """`min(beta, (1 + step) / (10 + step))`: the decay to use after optimizer step `step` (0-based)."""
    t = jnp.asarray(step, jnp.float32)
    return jnp.minimum(jnp.asarray(beta, jnp.float32), (1.0 + t) / (10.0 + t))


@dataclass(frozen=True)
class EMAConfig:
    """Exponential moving average of the weights kept next to the model."""

    beta: float = 0.995
    """Decay per step (0.995 — EMA beta of the 8B and 32B runs)."""
    warmup: bool = True
    """Use `min(beta, (1 + t) / (10 + t))` so early EMAs are not dominated by the initialization."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.beta < 1.0:
            raise ValueError(f"beta must be in [0, 1), got {self.beta}; 0.995 averages over ~200 steps")

    def beta_at(self, step: int | Int[Array, ""]) -> Float[Array, ""]:
        """The decay applied after optimizer step `step`."""
        return warmup_beta(step, self.beta) if self.warmup else jnp.asarray(self.beta, jnp.float32)

    def update(self, ema_params: Tree, params: Tree, step: int | Int[Array, ""]) -> Tree:
        """The EMA after the optimizer step `step` produced `params` (jit-safe; `step` may be traced)."""
        return ema_update(ema_params, params, self.beta_at(step))
