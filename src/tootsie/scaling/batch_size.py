"""Critical batch size from a batch-size sweep at fixed compute budgets, and its power law in C.

At each budget the runs differ only in batch size B (so in steps). Loss
against ln B is fitted with a parabola; its vertex is the optimal batch
`B_opt`, and the critical batch `B_crit` is the largest batch whose fitted
loss is within `tolerance` (relative) of the minimum:

    B_crit = B_opt · exp(sqrt(tolerance · L_min / a))      (a: the curvature)

Beyond it, a bigger batch costs loss at the same compute. Both are fitted as
power laws `B = k · C^γ` over budgets; Marin's batch sweep found
`CBS = 1.87e-5 · C^0.388` (seeds, weekly update), ~15,500 sequences at 1e23.
A budget needs 3 or more distinct batch sizes; a parabola that opens
downwards falls back to the runs themselves and is listed in `warnings`.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tootsie.errors import TootsieError
from tootsie.scaling.isoflop import MIN_SIZES, budget_key
from tootsie.scaling.law import fit_power
from tootsie.scaling.runs import RunRecord


@dataclass(frozen=True)
class BatchSizeConfig:
    """How the critical batch size is read off each budget's curve."""

    tolerance: float = 0.01
    """Relative excess loss over the budget's minimum that still counts as near-optimal."""

    def __post_init__(self) -> None:
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must be in (0, 1), got {self.tolerance}")


def _budget(compute: float, runs: Sequence[RunRecord], tolerance: float) -> tuple[dict[str, object], str | None]:
    log_batch = np.log([run["batch_size"] for run in runs])
    losses = np.array([run["loss"] for run in runs])
    centre = log_batch.mean()
    a, b, c = np.polyfit(log_batch - centre, losses, 2)
    if a > 0:
        vertex = -b / (2 * a)
        loss_min = a * vertex**2 + b * vertex + c
        optimal = math.exp(vertex + centre)
        critical = math.exp(vertex + centre + math.sqrt(tolerance * loss_min / a))
        warning = None
    else:
        best = int(np.argmin(losses))
        loss_min, optimal = float(losses[best]), float(math.exp(log_batch[best]))
        critical = float(max(math.exp(x) for x, loss in zip(log_batch, losses) if loss <= loss_min * (1 + tolerance)))
        warning = (
            f"budget {compute:.4g}: loss against log batch size opens downwards (curvature {a:.3g}); "
            "optimal and critical batch sizes are read off the runs"
        )
    summary = {
        "compute": compute,
        "batch_opt": optimal,
        "batch_critical": critical,
        "loss_min": float(loss_min),
        "curvature": float(a),
        "runs": len(runs),
    }
    return summary, warning


def fit_batch_sizes(runs: Sequence[RunRecord], config: BatchSizeConfig) -> dict[str, object]:
    """Per-budget optimal and critical batch sizes and their power laws in compute."""
    by_budget: dict[float, list[RunRecord]] = {}
    for run in runs:
        by_budget.setdefault(budget_key(run["compute"]), []).append(run)
    summaries, warnings = [], []
    for compute in sorted(by_budget):
        members = by_budget[compute]
        if len({run["batch_size"] for run in members}) < MIN_SIZES:
            raise TootsieError(
                f"budget {compute:.4g} FLOPs has runs at {len({run['batch_size'] for run in members})} "
                f"distinct batch size(s) ({', '.join(r.label() for r in members)}); "
                f"a parabola in log B needs at least {MIN_SIZES}: add batch sizes at this budget or leave its runs out"
            )
        summary, warning = _budget(compute, members, config.tolerance)
        summaries.append(summary)
        warnings.extend([warning] if warning else [])
    if len(summaries) < 2:
        raise TootsieError(
            f"{len(summaries)} budget(s): a power law in compute needs batch sweeps at 2 or more budgets"
        )
    compute = np.array([s["compute"] for s in summaries])
    laws = {}
    for name, key in (("optimal", "batch_opt"), ("critical", "batch_critical")):
        fit = fit_power(compute, np.log([[s[key] for s in summaries]]))
        laws[name] = {"coefficient": float(fit.coefficient[0]), "exponent": float(fit.exponent[0])}
    return {"tolerance": config.tolerance, "budgets": summaries, **laws, "warnings": warnings}


def batch_at(law: dict[str, float], compute: float) -> float:
    """A batch-size power law evaluated at `compute`."""
    return law["coefficient"] * compute ** law["exponent"]
