"""Scaling-law fits: `L(C) = E + A·C^-α` with free or fixed E, and power laws `y = k·C^γ`.

Design: `L(C)` is fitted by least squares in loss units, profiled over α.
For a given α the model is linear in (E, A), so E and A have a closed form;
α is found on a log grid (1e-3 to 2) and refined by golden section between the
grid neighbours of the best point. The free fit keeps the asymptote physical,
`0 <= E <= min observed loss`, and `A >= 0`: Marin's three-point free fit
before the 1e22 run returned an asymptote of -0.1 (seeds, weekly update), the
failure these bounds rule out. Fixing E (Marin: 1.6) leaves (A, α), which is
what gave stable leave-future-out predictions there. Every function takes a
leading axis of replicates, so bootstrap refits run as array operations.

Example: losses [3.2, 3.0, 2.85] at C = [1e18, 1e19, 1e20] with E fixed at 1.6
give α = 0.054 and A = 14.9, and predict 2.70 at 1e21.
"""

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

ALPHA_GRID = np.geomspace(1e-3, 2.0, 400)
GOLDEN = (np.sqrt(5) - 1) / 2
REFINE_ITERATIONS = 30


@dataclass(frozen=True)
class LawFit:
    """`L(C) = E + A·C^-α` per replicate."""

    E: Float[np.ndarray, " r"]
    A: Float[np.ndarray, " r"]
    alpha: Float[np.ndarray, " r"]
    sse: Float[np.ndarray, " r"]

    def predict(self, compute: float) -> Float[np.ndarray, " r"]:
        """The loss at `compute` for every replicate."""
        return self.E + self.A * np.power(compute, -self.alpha)


def _solve(
    z: Float[np.ndarray, "#r g n"], y: Float[np.ndarray, "r 1 n"], fixed_e: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E, A0, SSE) of `y = E + A0·z` for every replicate and candidate α, within the bounds."""
    n = y.shape[-1]
    sz, szz = z.sum(-1), (z * z).sum(-1)
    sy, syy, szy = y.sum(-1), (y * y).sum(-1), (z * y).sum(-1)
    y_min = y.min(-1)
    if fixed_e is None:
        det = n * szz - sz * sz
        with np.errstate(divide="ignore", invalid="ignore"):
            a0 = np.where(det > 0, (n * szy - sz * sy) / det, 0.0)
        e = np.clip((sy - a0 * sz) / n, 0.0, y_min)
    else:
        e = np.full(szy.shape, float(fixed_e))
    a0 = np.maximum((szy - e * sz) / szz, 0.0)
    if fixed_e is None:
        e = np.where(a0 == 0.0, y_min, e)
    sse = syy - 2 * e * sy - 2 * a0 * szy + n * e * e + 2 * e * a0 * sz + a0 * a0 * szz
    return e, a0, np.maximum(sse, 0.0)


def fit_law(compute: Float[np.ndarray, " n"], losses: Float[np.ndarray, "r n"], fixed_e: float | None = None) -> LawFit:
    """Least-squares `L(C) = E + A·C^-α` for every row of `losses` (E free within [0, min loss], or fixed)."""
    compute, losses = np.asarray(compute, float), np.atleast_2d(np.asarray(losses, float))
    log_ref = np.log(compute).mean()
    u = np.log(compute) - log_ref
    y = losses[:, None, :]
    grid_z = np.exp(-ALPHA_GRID[:, None] * u[None, :])[None, :, :]
    _, _, sse = _solve(grid_z, y, fixed_e)
    best = np.argmin(sse, axis=1)
    low = ALPHA_GRID[np.maximum(best - 1, 0)]
    high = ALPHA_GRID[np.minimum(best + 1, len(ALPHA_GRID) - 1)]

    def sse_at(alpha: np.ndarray) -> np.ndarray:
        return _solve(np.exp(-alpha[:, None, None] * u[None, None, :]), y, fixed_e)[2][:, 0]

    for _ in range(REFINE_ITERATIONS):
        left, right = high - GOLDEN * (high - low), low + GOLDEN * (high - low)
        go_left = sse_at(left) < sse_at(right)
        high, low = np.where(go_left, right, high), np.where(go_left, low, left)
    alpha = (low + high) / 2
    e, a0, sse = (part[:, 0] for part in _solve(np.exp(-alpha[:, None, None] * u[None, None, :]), y, fixed_e))
    return LawFit(E=e, A=a0 * np.exp(alpha * log_ref), alpha=alpha, sse=sse)


@dataclass(frozen=True)
class PowerFit:
    """`y = coefficient · C^exponent` per replicate."""

    coefficient: Float[np.ndarray, " r"]
    exponent: Float[np.ndarray, " r"]

    def predict(self, compute: float) -> Float[np.ndarray, " r"]:
        """y at `compute` for every replicate."""
        return self.coefficient * np.power(compute, self.exponent)


def fit_power(compute: Float[np.ndarray, " n"], log_values: Float[np.ndarray, "r n"]) -> PowerFit:
    """Least squares in log-log space of `ln y = ln k + γ ln C`, for every row of `log_values`."""
    u = np.log(np.asarray(compute, float))
    log_values = np.atleast_2d(log_values)
    centred = u - u.mean()
    slope = (log_values - log_values.mean(1, keepdims=True)) @ centred / (centred @ centred)
    intercept = log_values.mean(1) - slope * u.mean()
    return PowerFit(coefficient=np.exp(intercept), exponent=slope)


def at_bound(fit: LawFit) -> bool:
    """Whether the point estimate's α sits at the edge of the search range (the data do not pin it down)."""
    return bool(fit.alpha[0] <= ALPHA_GRID[1] or fit.alpha[0] >= ALPHA_GRID[-2])
