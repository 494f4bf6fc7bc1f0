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

Leave-future-out checks (`validation.py`, Marin's check before its 1e23 run):
per held-out budget, for the free-E law and every fixed E, and with `target`
the prediction at that budget from every training-set size.

Several fixed asymptotes fit at once: the first one's law is `laws["fixed"]`
(what `predict` uses by default), each further one's is `laws["fixed=<E>"]`.
Infeasible runs (diverged inside a sweep) are listed, never fitted.

Example: `fit_runs(load_runs(["runs.jsonl"]), FitConfig(fixed_e=(1.6, 1.7),
target=1e23))` on four budgets returns the minima, the free law and two
fixed-E laws with intervals, the power laws, cross-validation at the third
(fixed E only) and fourth budgets, and three stability rows (2, 3 and 4
budgets) of predictions at 1e23.
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
from tootsie.scaling.runs import LoadedRuns, RunRecord, infeasible_list
from tootsie.scaling.validation import MIN_BUDGETS, Minima, cross_validation, interval, law_keys, stability

FIT_FORMAT = "tootsie-scaling-fit/1"


@dataclass(frozen=True)
class FitConfig:
    """Choices of a scaling fit."""

    fixed_e: tuple[float, ...] = ()
    """Also fit L(C) with each of these irreducible losses E held fixed (Marin: 1.6); empty fits only the free-E law."""
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
    target: float | None = None
    """Also predict this budget from every training-set size (the fit's `stability` rows); None skips it."""

    def __post_init__(self) -> None:
        if not isinstance(self.fixed_e, tuple):
            raise ValueError(f"fixed_e must be a tuple of asymptotes, e.g. (1.6,), got {self.fixed_e!r}")
        for value in self.fixed_e:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"every fixed_e must be a finite number >= 0, got {value!r} in {self.fixed_e}")
        if len({f"{value:g}" for value in self.fixed_e}) != len(self.fixed_e):
            raise ValueError(f"fixed_e lists an asymptote twice: {self.fixed_e}; give each value once")
        if self.bootstrap < 50:
            raise ValueError(f"bootstrap must be >= 50 replicates for usable quantiles, got {self.bootstrap}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")
        if self.loss_noise is not None and not (math.isfinite(self.loss_noise) and self.loss_noise >= 0):
            raise ValueError(f"loss_noise must be a finite number >= 0, got {self.loss_noise}")
        if self.max_budget is not None and not self.max_budget > 0:
            raise ValueError(f"max_budget must be positive, got {self.max_budget}")
        if self.target is not None and not (math.isfinite(self.target) and self.target > 0):
            raise ValueError(f"target must be a positive number of FLOPs, got {self.target}")


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


def _check_budgets(groups: Sequence[BudgetGroup], config: FitConfig) -> None:
    """Enough budgets for the laws asked for, or an error saying what to add."""
    if len(groups) < MIN_BUDGETS["fixed"] or (len(groups) < MIN_BUDGETS["free"] and not config.fixed_e):
        fix = (
            "add budgets"
            if config.fixed_e or len(groups) < MIN_BUDGETS["fixed"]
            else "add budgets or pass --fixed-asymptote E"
        )
        raise TootsieError(
            f"{len(groups)} budget(s) ({', '.join(f'{g.compute:.4g}' for g in groups)}): "
            f"a free-E law needs at least 3 budgets and a fixed-E law 2; {fix}"
        )


def _check_asymptotes(fixed_e: Sequence[float], lowest: float) -> None:
    """Every fixed E below the lowest isoflop minimum, or an error naming the first that is not."""
    for value in fixed_e:
        if value >= lowest:
            raise TootsieError(
                f"--fixed-asymptote {value} is not below the lowest isoflop "
                f"minimum {lowest:.4f}; the asymptote must be under every loss"
            )


def fit_runs(loaded: LoadedRuns, config: FitConfig, *, stamp: bool = True) -> dict[str, object]:
    """Fit everything and return the fit file's contents (JSON-ready).

    `stamp=False` leaves out `created_at`, so the file's bytes depend only on
    its inputs (an executor step's output).
    """
    inside = [config.max_budget is None or run["compute"] <= config.max_budget * (1 + 1e-9) for run in loaded.runs]
    used = [run for run, keep in zip(loaded.runs, inside) if keep]
    excluded = [run for run, keep in zip(loaded.runs, inside) if not keep]
    if not used:
        raise TootsieError(f"no run has compute <= --max-budget {config.max_budget:.4g}; raise it")
    groups = group_runs(used)
    _check_budgets(groups, config)
    compute = np.array([g.compute for g in groups])
    point = _minima(groups, [g.losses[None, :] for g in groups])
    point_loss = _stack(point, "loss")[0]
    _check_asymptotes(config.fixed_e, float(point_loss.min()))
    asymptotes = {
        key: fixed
        for key, fixed in law_keys(config.fixed_e).items()
        if fixed is not None or len(groups) >= MIN_BUDGETS["free"]
    }
    laws = {key: fit_law(compute, point_loss[None, :], fixed) for key, fixed in asymptotes.items()}
    noise = _noise(config, groups, laws)
    sigma = float(noise["sigma"])
    rng = np.random.default_rng(config.seed)
    redrawn = [fitted_losses(g)[None, :] + sigma * rng.standard_normal((config.bootstrap, len(g.runs))) for g in groups]
    samples = _minima(groups, redrawn)
    loss_samples = _stack(samples, "loss")
    warnings = [text for group, vertex in zip(groups, point) for text in describe(group, vertex)]
    summaries = {}
    for key, law in laws.items():
        fixed = asymptotes[key]
        summaries[key] = _law_summary(
            law, fit_law(compute, loss_samples, fixed), config.level, point_loss, fixed=fixed is not None
        )
        if at_bound(law):
            warnings.append(
                f"{'free-E law' if fixed is None else f'fixed-E law (E = {fixed:g})'}: alpha={law.alpha[0]:.4g} "
                "is at the edge of "
                "the search range; the budgets do not pin the exponent down"
            )
    log_params, log_tokens = _stack(point, "log_params"), _stack(point, "log_tokens")
    minima = Minima(compute, point_loss, loss_samples, asymptotes, config.level, sigma)
    fit: dict[str, object] = {"format": FIT_FORMAT}
    if stamp:
        fit["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    fit |= {
        "inputs": [
            {"path": str(file), "sha256": hashlib.sha256(file.read_bytes()).hexdigest()} for file in loaded.files
        ],
        "config": {
            "fixed_e": list(config.fixed_e),
            "bootstrap": config.bootstrap,
            "level": config.level,
            "seed": config.seed,
            "max_budget": config.max_budget,
            "target": config.target,
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
        "cross_validation": cross_validation(minima, rng),
    }
    if config.target is not None:
        fit["stability"] = stability(minima, config.target, config.seed)
    return fit | {
        "excluded": _run_list(excluded),
        "dropped": _run_list(loaded.dropped),
        "infeasible": infeasible_list(loaded.infeasible),
        "warnings": warnings,
    }
