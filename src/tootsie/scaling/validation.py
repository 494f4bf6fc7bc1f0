"""Leave-future-out checks of a scaling fit, for the free-E law and every fixed E at once.

Marin's check before its 1e23 run (seeds, weekly update): free-asymptote fits
"appeared too optimistic due to systematic underestimation at smaller
scales", while fixing L∞ = 1.6 gave "stable cross-validated predictions
~2.25 across all training-set sizes from 1e18-1e19 onward". Two checks
reproduce that, each for every law of the fit:

- `cross_validation`: for every budget C_k with enough earlier budgets (2 for
  a fixed E, 3 for a free one), fit on the budgets below C_k only and predict
  C_k, with an interval; the error and whether the interval held.
- `stability`: the prediction at one target budget from every prefix of the
  sorted budgets; the last row uses them all and equals `predict` on the fit.

Laws are named by key: `free`, `fixed` (the first fixed E, where `predict`
and `preregister` look by default) and `fixed=<E>` for each further one, e.g.
`--fixed-asymptote 1.6,1.7` gives `{"free": None, "fixed": 1.6, "fixed=1.7": 1.7}`.
Intervals come from the bootstrap replicates of the isoflop minima refitted
on the same budgets, plus one draw of the run noise σ per replicate.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

from tootsie.scaling.law import fit_law

MIN_BUDGETS = {"fixed": 2, "free": 3}
"""Budgets a law needs: a fixed E leaves (A, α), a free one (E, A, α)."""


def law_keys(fixed_e: Sequence[float]) -> dict[str, float | None]:
    """Each law's key and its fixed asymptote (None: free), free first."""
    keys: dict[str, float | None] = {"free": None}
    for index, value in enumerate(fixed_e):
        keys["fixed" if index == 0 else f"fixed={value:g}"] = value
    return keys


def min_budgets(fixed: float | None) -> int:
    """Budgets needed by a law with this asymptote (None: free)."""
    return MIN_BUDGETS["free" if fixed is None else "fixed"]


def interval(samples: np.ndarray, level: float) -> list[float]:
    """The central `level` quantile interval of `samples`."""
    low, high = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return [float(low), float(high)]


@dataclass(frozen=True)
class Minima:
    """The isoflop minima a fit's laws are checked on, and how to refit them."""

    compute: Float[np.ndarray, " n"]
    """The budgets, ascending."""
    point: Float[np.ndarray, " n"]
    """The measured minimum loss per budget."""
    replicates: Float[np.ndarray, "r n"]
    """The bootstrap replicates of the minima."""
    laws: Mapping[str, float | None]
    """Law key → fixed asymptote (None: free), as `law_keys` gives them."""
    level: float
    """Probability mass of every interval."""
    sigma: float
    """One run's loss noise, drawn once per replicate into each prediction."""

    def predicted(self, n: int, fixed: float | None, at: float, noise: Float[np.ndarray, " r"]) -> dict[str, float]:
        """The law fitted on the first `n` budgets at `at`: point prediction and interval (replicates plus noise)."""
        spread = fit_law(self.compute[:n], self.replicates[:, :n], fixed).predict(at) + noise
        low, high = interval(spread, self.level)
        point = fit_law(self.compute[:n], self.point[None, :n], fixed).predict(at)[0]
        return {"predicted": float(point), "low": low, "high": high}

    def sizes(self, stop: int) -> range:
        """Training-set sizes from the fewest budgets any law can use up to `stop` (excluded)."""
        return range(min(map(min_budgets, self.laws.values())), stop)


def cross_validation(minima: Minima, rng: np.random.Generator) -> list[dict[str, object]]:
    """One entry per held-out budget: fit on the budgets below it, predict it, per law with enough budgets."""
    checks = []
    for k in minima.sizes(len(minima.compute)):
        actual = float(minima.point[k])
        entry: dict[str, object] = {
            "compute": float(minima.compute[k]),
            "train_budgets": [float(c) for c in minima.compute[:k]],
            "actual": actual,
        }
        for key, fixed in minima.laws.items():
            if k < min_budgets(fixed):
                continue
            noise = minima.sigma * rng.standard_normal(len(minima.replicates))
            result = minima.predicted(k, fixed, minima.compute[k], noise)
            entry[key] = {
                **result,
                "error": actual - result["predicted"],
                "within": bool(result["low"] <= actual <= result["high"]),
            }
        checks.append(entry)
    return checks


def stability(minima: Minima, target: float, seed: int) -> dict[str, object]:
    """`{"target", "rows"}`: the prediction at `target` from the first n budgets, for every n a law can use.

    Every row draws the same noise as `predict` (seeded by `seed`), so rows differ
    only in their training budgets and the last row is the full fit's prediction.
    """
    noise = minima.sigma * np.random.default_rng(seed).standard_normal(len(minima.replicates))
    rows = []
    for n in minima.sizes(len(minima.compute) + 1):
        row: dict[str, object] = {"train_budgets": [float(c) for c in minima.compute[:n]]}
        for key, fixed in minima.laws.items():
            if n >= min_budgets(fixed):
                row[key] = minima.predicted(n, fixed, target, noise)
        rows.append(row)
    return {"target": target, "rows": rows}


def best_cross_validated(fit: dict[str, object]) -> str:
    """The law key with the smallest mean absolute leave-future-out error (ties: the earlier key, free first).

    How the seeds chose L∞ = 1.6 for their 1e23 preregistration: the asymptote whose held-out predictions held.
    """
    errors: dict[str, list[float]] = {}
    for check in fit["cross_validation"]:
        for key in fit["laws"]:
            if key in check:
                errors.setdefault(key, []).append(abs(check[key]["error"]))
    if not errors:
        raise ValueError("the fit has no leave-future-out checks (too few budgets); name a law instead")
    order = list(law_keys(fit["config"]["fixed_e"]))
    return min(errors, key=lambda key: (float(np.mean(errors[key])), order.index(key)))
