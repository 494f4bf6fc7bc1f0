"""The whole scaling fit: isoflop minima → `L(C)` (free and fixed E) → `N_opt(C)`, `D_opt(C)`.

Each comes with bootstrap intervals and leave-future-out checks.


Uncertainty (a parametric bootstrap): every run's loss is redrawn as its
budget's fitted parabola plus Gaussian noise of standard deviation σ, and the
whole pipeline is refitted on each replicate (minima, laws, power laws).
Intervals are the replicates' central quantiles at `level`. σ is, in order:
the user's `loss_noise` (e.g. the std of matched-seed repeats; Marin pinned
~0.0014 BPB that way), else the pooled scatter of runs around their parabolas
(needs a budget with more than 3 sizes), else the scatter of the isoflop
minima around the law (fixed E if given). The file records which.

Leave-future-out cross-validation (Marin's check before its 1e23 run): for
every budget C_k with enough earlier budgets (2 for fixed E, 3 for free),
fit on the budgets below C_k only and predict C_k, with an interval from the
same replicates; the error and whether the interval held are reported.

Example: `fit_runs(load_runs(["runs.jsonl"]), FitConfig(fixed_e=1.6))` on four
budgets returns the minima, both laws with intervals, the power laws and two
fixed-E and one free-E cross-validation points.
"""

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from tootsie.errors import TootsieError
from tootsie.scaling.isoflop import BudgetGroup, Vertices, describe, fitted_losses, group_runs, residual_noise, vertices
from tootsie.scaling.law import LawFit, PowerFit, at_bound, fit_law, fit_power
from tootsie.scaling.runs import LoadedRuns, RunRecord

FIT_FORMAT = "tootsie-scaling-fit/1"
MIN_BUDGETS = {"fixed": 2, "free": 3}


@dataclass(frozen=True)
class FitConfig:
    """Choices of a scaling fit."""

    fixed_e: float | None = None
    """Also fit L(C) with this irreducible loss E held fixed (Marin: 1.6); None fits only the free-E law."""
    bootstrap: int = 1000
    """Bootstrap replicates for the intervals."""
    level: float = 0.9
    """Probability mass of every interval."""
    seed: int = 0
    """Seed of the bootstrap draws."""
    loss_noise: float | None = None
    """Standard deviation of one run's loss (from repeats); None estimates it from the data."""
    max_budget: float | None = None
    """Leave out runs above this budget (listed in the fit as excluded), e.g. to predict them."""

    def __post_init__(self) -> None:
        if self.fixed_e is not None and not (math.isfinite(self.fixed_e) and self.fixed_e >= 0):
            raise ValueError(f"fixed_e must be a finite number >= 0, got {self.fixed_e}")
        if self.bootstrap < 50:
            raise ValueError(f"bootstrap must be >= 50 replicates for usable quantiles, got {self.bootstrap}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")
        if self.loss_noise is not None and not (math.isfinite(self.loss_noise) and self.loss_noise >= 0):
            raise ValueError(f"loss_noise must be a finite number >= 0, got {self.loss_noise}")
        if self.max_budget is not None and not self.max_budget > 0:
            raise ValueError(f"max_budget must be positive, got {self.max_budget}")


def interval(samples: np.ndarray, level: float) -> list[float]:
    """The central `level` quantile interval of `samples`."""
    low, high = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return [float(low), float(high)]


def _minima(groups: Sequence[BudgetGroup], losses: Sequence[np.ndarray]) -> list[Vertices]:
    return [vertices(group, replicate) for group, replicate in zip(groups, losses)]


def _stack(found: Sequence[Vertices], attribute: str) -> np.ndarray:
    return np.stack([getattr(v, attribute) for v in found], axis=1)


def _noise(config: FitConfig, groups: Sequence[BudgetGroup], laws: dict[str, LawFit]) -> dict[str, object]:
    if config.loss_noise is not None:
        return {"sigma": config.loss_noise, "source": "given", "dof": None}
    sigma, dof = residual_noise(groups)
    if dof:
        return {"sigma": sigma, "source": "isoflop_residuals", "dof": dof}
    kind = "fixed" if "fixed" in laws else "free"
    dof = len(groups) - (2 if kind == "fixed" else 3)
    if dof > 0:
        return {"sigma": float(np.sqrt(laws[kind].sse[0] / dof)), "source": f"{kind}_law_residuals", "dof": dof}
    raise TootsieError(
        "cannot estimate the loss noise: every budget has exactly 3 model sizes and "
        f"{len(groups)} budgets leave the {kind}-E law no spare degree of freedom; "
        "pass --loss-noise SIGMA (the std of repeated runs), add a size to a budget, or add a budget"
    )


def _law_summary(point: LawFit, samples: LawFit, level: float, minima: np.ndarray, fixed: bool) -> dict[str, object]:
    names = ("A", "alpha") if fixed else ("E", "A", "alpha")
    return {
        "E": float(point.E[0]),
        "A": float(point.A[0]),
        "alpha": float(point.alpha[0]),
        "fixed_e": fixed,
        "rmse": float(np.sqrt(point.sse[0] / len(minima))),
        "intervals": {name: interval(getattr(samples, name), level) for name in names},
        "samples": {name: getattr(samples, name).tolist() for name in ("E", "A", "alpha")},
    }


def _power_summary(point: PowerFit, samples: PowerFit, level: float) -> dict[str, object]:
    return {
        "coefficient": float(point.coefficient[0]),
        "exponent": float(point.exponent[0]),
        "intervals": {
            "coefficient": interval(samples.coefficient, level),
            "exponent": interval(samples.exponent, level),
        },
        "samples": {"coefficient": samples.coefficient.tolist(), "exponent": samples.exponent.tolist()},
    }


def _cross_validation(
    compute: np.ndarray,
    point: np.ndarray,
    replicates: np.ndarray,
    config: FitConfig,
    sigma: float,
    rng: np.random.Generator,
) -> list[dict[str, object]]:
    laws = {"free": None} | ({"fixed": config.fixed_e} if config.fixed_e is not None else {})
    checks = []
    for k in range(min(MIN_BUDGETS[kind] for kind in laws), len(compute)):
        entry: dict[str, object] = {
            "compute": float(compute[k]),
            "train_budgets": [float(c) for c in compute[:k]],
            "actual": float(point[k]),
        }
        for kind, fixed_e in laws.items():
            if k < MIN_BUDGETS[kind]:
                continue
            predicted = float(fit_law(compute[:k], point[None, :k], fixed_e).predict(compute[k])[0])
            spread = fit_law(compute[:k], replicates[:, :k], fixed_e).predict(compute[k]) + sigma * rng.standard_normal(
                len(replicates)
            )
            low, high = interval(spread, config.level)
            entry[kind] = {
                "predicted": predicted,
                "low": low,
                "high": high,
                "error": float(point[k]) - predicted,
                "within": bool(low <= point[k] <= high),
            }
        checks.append(entry)
    return checks


def _budget_summary(group: BudgetGroup, point: Vertices, samples: Vertices, level: float) -> dict[str, object]:
    return {
        "compute": group.compute,
        "params_opt": float(np.exp(point.log_params[0])),
        "tokens_opt": float(np.exp(point.log_tokens[0])),
        "loss_opt": float(point.loss[0]),
        "curvature": float(point.curvature[0]),
        "method": "quadratic" if point.quadratic[0] else "lowest_run",
        "intervals": {
            "loss_opt": interval(samples.loss, level),
            "params_opt": interval(np.exp(samples.log_params), level),
        },
        "runs": [
            {
                "source": run.source,
                "name": run.name,
                "params": run["params"],
                "tokens": run["tokens"],
                "loss": run["loss"],
            }
            for run in group.runs
        ],
    }


def _run_list(runs: Sequence[RunRecord]) -> list[dict[str, object]]:
    return [{"source": run.source, "name": run.name, "compute": run["compute"], "loss": run["loss"]} for run in runs]


def fit_runs(loaded: LoadedRuns, config: FitConfig) -> dict[str, object]:
    """Fit everything and return the fit file's contents (JSON-ready)."""
    inside = [config.max_budget is None or run["compute"] <= config.max_budget * (1 + 1e-9) for run in loaded.runs]
    used = [run for run, keep in zip(loaded.runs, inside) if keep]
    excluded = [run for run, keep in zip(loaded.runs, inside) if not keep]
    if not used:
        raise TootsieError(f"no run has compute <= --max-budget {config.max_budget:.4g}; raise it")
    groups = group_runs(used)
    if len(groups) < MIN_BUDGETS["fixed"] or (len(groups) < MIN_BUDGETS["free"] and config.fixed_e is None):
        fix = (
            "add budgets"
            if config.fixed_e is not None or len(groups) < MIN_BUDGETS["fixed"]
            else "add budgets or pass --fixed-asymptote E"
        )
        raise TootsieError(
            f"{len(groups)} budget(s) ({', '.join(f'{g.compute:.4g}' for g in groups)}): "
            f"a free-E law needs at least 3 budgets and a fixed-E law 2; {fix}"
        )
    compute = np.array([g.compute for g in groups])
    point = _minima(groups, [g.losses[None, :] for g in groups])
    point_loss = _stack(point, "loss")[0]
    if config.fixed_e is not None and config.fixed_e >= point_loss.min():
        raise TootsieError(
            f"--fixed-asymptote {config.fixed_e} is not below the lowest isoflop "
            f"minimum {point_loss.min():.4f}; the asymptote must be under every loss"
        )
    laws = {}
    if len(groups) >= MIN_BUDGETS["free"]:
        laws["free"] = fit_law(compute, point_loss[None, :])
    if config.fixed_e is not None:
        laws["fixed"] = fit_law(compute, point_loss[None, :], config.fixed_e)
    noise = _noise(config, groups, laws)
    sigma = float(noise["sigma"])
    rng = np.random.default_rng(config.seed)
    redrawn = [fitted_losses(g)[None, :] + sigma * rng.standard_normal((config.bootstrap, len(g.runs))) for g in groups]
    samples = _minima(groups, redrawn)
    loss_samples = _stack(samples, "loss")
    warnings = [text for group, vertex in zip(groups, point) for text in describe(group, vertex)]
    summaries = {}
    for kind, law in laws.items():
        fixed_e = config.fixed_e if kind == "fixed" else None
        summaries[kind] = _law_summary(
            law, fit_law(compute, loss_samples, fixed_e), config.level, point_loss, fixed=kind == "fixed"
        )
        if at_bound(law):
            warnings.append(
                f"{kind}-E law: alpha={law.alpha[0]:.4g} is at the edge of "
                "the search range; the budgets do not pin the exponent down"
            )
    log_params, log_tokens = _stack(point, "log_params"), _stack(point, "log_tokens")
    return {
        "format": FIT_FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "inputs": [
            {"path": str(file), "sha256": hashlib.sha256(file.read_bytes()).hexdigest()} for file in loaded.files
        ],
        "config": {
            "fixed_e": config.fixed_e,
            "bootstrap": config.bootstrap,
            "level": config.level,
            "seed": config.seed,
            "max_budget": config.max_budget,
        },
        "noise": noise,
        "budgets": [_budget_summary(g, p, s, config.level) for g, p, s in zip(groups, point, samples)],
        "laws": summaries,
        "params_opt": _power_summary(
            fit_power(compute, log_params), fit_power(compute, _stack(samples, "log_params")), config.level
        ),
        "tokens_opt": _power_summary(
            fit_power(compute, log_tokens), fit_power(compute, _stack(samples, "log_tokens")), config.level
        ),
        "cross_validation": _cross_validation(compute, point_loss, loss_samples, config, sigma, rng),
        "excluded": _run_list(excluded),
        "dropped": _run_list(loaded.dropped),
        "warnings": warnings,
    }
