"""Predictions from a fit file: the loss at a new budget with an interval, and the compute-optimal N and D.

The interval is for what one run at that budget will measure: the bootstrap
replicates of the chosen law evaluated at C, each plus one draw of the run
noise σ the fit recorded, cut at the fit's level. Draws are seeded from the
fit's seed, so the same fit and budget always give the same interval.

A fit may hold several laws, by key: `free`, `fixed` (the first fixed E) and
`fixed=<E>` for each further one; `law` picks any key the fit has.

Example: minima lying on Marin's fixed-E law `1.6 + 95.18·C^-0.094` give a
prediction of 2.256 at 1e23 (the weekly update preregistered ~2.25).
"""

import math
from pathlib import Path

import numpy as np

from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json_format
from tootsie.scaling.fit import FIT_FORMAT
from tootsie.scaling.validation import interval


def load_fit(path: str | Path) -> dict[str, object]:
    """A fit file written by `tootsie scaling fit`, checked for its format."""
    return read_json_format(
        path, FIT_FORMAT, "tootsie scaling fit", f"write one with `tootsie scaling fit RUNS... --out {path}`"
    )


def default_law(fit: dict[str, object]) -> str:
    """The fixed-E law when the fit has one (the stable choice in Marin's cross-validation), else the free one."""
    return "fixed" if "fixed" in fit["laws"] else "free"


def predict(fit: dict[str, object], compute: float, law: str | None = None) -> dict[str, float]:
    """`{"compute", "loss", "low", "high", "params_opt", "tokens_opt"}` at `compute` FLOPs."""
    if not (math.isfinite(compute) and compute > 0):
        raise TootsieError(f"--compute must be a positive number of FLOPs, got {compute}")
    kind = law or default_law(fit)
    laws = fit["laws"]
    if kind not in laws:
        if kind == "free":
            fix = "a free-E law needs runs at 3 or more budgets"
        elif kind.startswith("fixed"):
            fix = f"refit with --fixed-asymptote {kind.partition('=')[2] or 'E'}"
        else:
            fix = "law keys are free, fixed and fixed=<E>"
        raise TootsieError(f"the fit has no law {kind!r} (its laws: {', '.join(laws)}); pass one of those, or {fix}")
    chosen = laws[kind]
    samples = {name: np.asarray(chosen["samples"][name]) for name in ("E", "A", "alpha")}
    rng = np.random.default_rng(fit["config"]["seed"])
    spread = (
        samples["E"]
        + samples["A"] * compute ** -samples["alpha"]
        + fit["noise"]["sigma"] * rng.standard_normal(len(samples["E"]))
    )
    low, high = interval(spread, fit["config"]["level"])
    return {
        "compute": compute,
        "loss": chosen["E"] + chosen["A"] * compute ** -chosen["alpha"],
        "low": low,
        "high": high,
        "params_opt": fit["params_opt"]["coefficient"] * compute ** fit["params_opt"]["exponent"],
        "tokens_opt": fit["tokens_opt"]["coefficient"] * compute ** fit["tokens_opt"]["exponent"],
    }
