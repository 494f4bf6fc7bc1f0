"""Isoflop minima: at each compute budget, the model size of lowest loss from a quadratic in log N.

At a fixed budget C, loss against x = ln N is close to a parabola near its
minimum (Hoffmann et al. 2022, approach 2; Marin's isoflop analysis), so each
budget's runs are fitted with `loss = a·x² + b·x + c` by least squares and the
vertex gives `N_opt = exp(-b / 2a)` and `L_opt`. Tokens at the optimum come
from a line through the runs' (ln N, ln D), so they follow whatever FLOPs rule
sized the runs. A budget needs runs at 3 or more distinct sizes; a parabola
that opens downwards (a <= 0, noise swamping the curve) falls back to the
lowest run and says so; a vertex outside the sampled sizes is flagged and
clamped to one sampled span beyond them.

Everything is vectorized over a leading axis of loss replicates, so the
bootstrap of `fit.py` refits thousands of perturbed sweeps at once.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Bool, Float

from tootsie.errors import TootsieError
from tootsie.scaling.runs import RunRecord

MIN_SIZES = 3


@dataclass(frozen=True)
class BudgetGroup:
    """The runs of one compute budget, as arrays over runs."""

    compute: float
    runs: list[RunRecord]
    log_params: Float[np.ndarray, " n"]
    log_tokens: Float[np.ndarray, " n"]
    losses: Float[np.ndarray, " n"]


@dataclass(frozen=True)
class Vertices:
    """Isoflop minima of one budget, one per loss replicate."""

    log_params: Float[np.ndarray, " r"]
    log_tokens: Float[np.ndarray, " r"]
    loss: Float[np.ndarray, " r"]
    curvature: Float[np.ndarray, " r"]
    quadratic: Bool[np.ndarray, " r"]
    """True where the vertex came from the parabola, False where it fell back to the lowest run."""
    clamped: Bool[np.ndarray, " r"]
    """True where the vertex lay more than one sampled span outside the sampled sizes."""


def budget_key(compute: float) -> float:
    """Budgets equal to 6 significant digits are the same budget."""
    return float(f"{compute:.6g}")


def group_runs(runs: Sequence[RunRecord]) -> list[BudgetGroup]:
    """Runs grouped by budget in increasing compute.

    A budget with fewer than 3 distinct sizes is an error naming its runs.
    """
    by_budget: dict[float, list[RunRecord]] = {}
    for run in runs:
        by_budget.setdefault(budget_key(run["compute"]), []).append(run)
    groups = []
    for compute in sorted(by_budget):
        members = by_budget[compute]
        sizes = {run["params"] for run in members}
        if len(sizes) < MIN_SIZES:
            listed = ", ".join(run.label() for run in members)
            raise TootsieError(
                f"budget {compute:.4g} FLOPs has {len(members)} run(s) at {len(sizes)} distinct model "
                f"size(s) ({listed}); a quadratic in log N needs at least {MIN_SIZES} sizes per budget: "
                "add runs, or leave the budget out with --max-budget or by not passing its runs"
            )
        groups.append(
            BudgetGroup(
                compute=compute,
                runs=members,
                log_params=np.log([run["params"] for run in members]),
                log_tokens=np.log([run["tokens"] for run in members]),
                losses=np.array([run["loss"] for run in members], dtype=np.float64),
            )
        )
    return groups


def _design(x: Float[np.ndarray, " n"]) -> Float[np.ndarray, "n 3"]:
    return np.stack([x * x, x, np.ones_like(x)], axis=1)


def quadratic_coefficients(group: BudgetGroup, losses: Float[np.ndarray, "r n"]) -> Float[np.ndarray, "r 3"]:
    """Least-squares (a, b, c) of `loss = a·x² + b·x + c`, x = ln N centred on the group's mean, per replicate."""
    x = group.log_params - group.log_params.mean()
    return losses @ np.linalg.pinv(_design(x)).T


def fitted_losses(group: BudgetGroup) -> Float[np.ndarray, " n"]:
    """The parabola's value at every run (the observed losses when there are exactly 3 sizes)."""
    x = group.log_params - group.log_params.mean()
    return _design(x) @ quadratic_coefficients(group, group.losses[None, :])[0]


def vertices(group: BudgetGroup, losses: Float[np.ndarray, "r n"]) -> Vertices:
    """The isoflop minimum of every loss replicate of `group`."""
    centre = group.log_params.mean()
    x = group.log_params - centre
    a, b, c = quadratic_coefficients(group, losses).T
    quadratic = a > 0
    span = x.max() - x.min()
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.where(quadratic, -b / (2 * np.where(quadratic, a, 1.0)), 0.0)
    vertex = np.clip(raw, x.min() - span, x.max() + span)
    lowest = np.argmin(losses, axis=1)
    x_opt = np.where(quadratic, vertex, x[lowest])
    loss_opt = np.where(quadratic, a * vertex**2 + b * vertex + c, losses[np.arange(len(losses)), lowest])
    slope, intercept = np.polyfit(x, group.log_tokens, 1)
    return Vertices(
        log_params=x_opt + centre,
        log_tokens=intercept + slope * x_opt,
        loss=loss_opt,
        curvature=a,
        quadratic=quadratic,
        clamped=quadratic & (raw != vertex),
    )


def residual_noise(groups: Sequence[BudgetGroup]) -> tuple[float, int]:
    """Pooled standard deviation of the runs around their budgets' parabolas, and its degrees of freedom.

    0 degrees of freedom: no estimate.
    """
    squares = sum(float(np.sum((g.losses - fitted_losses(g)) ** 2)) for g in groups)
    dof = sum(len(g.runs) - MIN_SIZES for g in groups)
    return (float(np.sqrt(squares / dof)) if dof else 0.0), dof


def describe(group: BudgetGroup, vertex: Vertices) -> list[str]:
    """Warnings about the point estimate of one budget (a fallback or an extrapolated minimum)."""
    warnings = []
    if not vertex.quadratic[0]:
        warnings.append(
            f"budget {group.compute:.4g}: the parabola opens downwards (curvature {vertex.curvature[0]:.3g}); "
            f"its minimum is the lowest run, {group.runs[int(np.argmin(group.losses))].label()}"
        )
    elif not group.log_params.min() <= vertex.log_params[0] <= group.log_params.max():
        where = "clamped to one sampled span beyond" if vertex.clamped[0] else "outside"
        warnings.append(
            f"budget {group.compute:.4g}: the minimum N={np.exp(vertex.log_params[0]):.4g} is {where} the sampled "
            f"sizes {np.exp(group.log_params.min()):.4g}..{np.exp(group.log_params.max()):.4g}; widen the widths"
        )
    return warnings
