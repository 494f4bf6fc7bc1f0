"""The MoE isoflop arc's results: one `results.json` and one figure, with the seeds' numbers beside the toy ones.

`arc_results` gathers the arc's step outputs (`recipes.moe.isoflop`):

- the isoflop runs, infeasible ones with their reason (the planted LR × 100 run);
- the fit: laws, leave-future-out errors per held-out budget for free E and
  every fixed E, and the target prediction from every training-set size
  (markdown tables too, `scaling.tables`);
- the preregistration, the target run (and why its width), and the score;
- the batch sweep and its critical-batch law;
- the β₂ × batch sweep (the best β₂ per batch) and the β₂ rule's values at
  the seeds' batches 64-512 for base 0.998 and 0.999 beside the seeds' swept
  optima. At base 0.998 the rule gives 0.996, 0.992, 0.984 and 0.968 against
  optima of 0.995, 0.995, 0.97 and 0.95: above them at 64, 256 and 512 (by
  0.014 and 0.018 at the two largest), below at 128; the gap is reported, not
  closed.

The figure has four panels: isoflop curves, the law with the preregistered
interval and the outcome, loss against batch per budget, loss against β₂ per
batch.
"""

from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from tootsie.executor.step import StepRef
from tootsie.recipes.cases.common import write_results
from tootsie.scaling.analysis_steps import (
    BATCH_FIT_FILE,
    FIT_FILE,
    RECORD_FILE,
    SCORE_FILE,
    read_output,
    read_runs_jsonl,
)
from tootsie.scaling.heuristic import Beta2Rule
from tootsie.scaling.runs import RUN_FILE
from tootsie.scaling.tables import cross_validation_table, stability_table

SEEDS_BETA2_OPTIMA = {64: 0.995, 128: 0.995, 256: 0.97, 512: 0.95}
"""The seeds' β₂ sweep at d1024: the best β₂ per batch size (weekly update)."""
SEEDS_ARC = {
    "v16_sweep_budgets": [1e18, 3e20],
    "v16_prediction_1e21": 2.598,
    "v16_actual_1e21": 2.599,
    "preregistered_1e22": 2.389,
    "actual_1e22": 2.432,
    "free_fit_asymptote_1e22": -0.1,
    "realistic_asymptote": 1.7,
    "fixed_asymptote_1e23": 1.6,
    "law_1e23": "macro(C) = 1.6 + 95.18 * C^-0.094",
    "prediction_1e23": 2.25,
    "critical_batch_law": "CBS = 1.87e-05 * C^0.388",
}
"""The seeds' arc (weekly update), for the side-by-side table in docs/scaling-moe.md."""


@dataclass(frozen=True)
class ArcResultsConfig:
    """The arc's step outputs."""

    isoflop: str | StepRef
    """The isoflop sweep's collect step."""
    fit: str | StepRef
    """The fit step."""
    record: str | StepRef
    """The preregistration step."""
    target: str | StepRef
    """The target run step."""
    score: str | StepRef
    """The score step."""
    batch: str | StepRef
    """The batch sweep's collect step."""
    batch_fit: str | StepRef
    """The batch fit step."""
    beta2: str | StepRef
    """The β₂ × batch sweep's collect step."""
    beta2_rule: Beta2Rule
    """The rule whose values are tabulated (base 0.998; 0.999 beside it)."""


def beta2_rule_table(rule: Beta2Rule) -> list[dict[str, float]]:
    """The rule at the seeds' batches, at `rule.base` and at the old base 0.999, beside the seeds' optima."""
    old = Beta2Rule(base=0.999, reference_batch=rule.reference_batch, low=rule.low, high=rule.high)
    return [
        {"batch": batch, f"rule_{rule.base:g}": rule(batch), "rule_0.999": old(batch), "seeds_optimum": optimum}
        for batch, optimum in SEEDS_BETA2_OPTIMA.items()
    ]


def _summary(run: dict[str, object]) -> dict[str, object]:
    keys = ("name", "compute", "width", "params", "params_total", "tokens", "batch_size", "beta2", "loss")
    return {key: run.get(key) for key in keys} | (
        {"feasible": False, "reason": run.get("reason")} if run.get("feasible") is False else {}
    )


def best_beta2(runs: list[dict[str, object]]) -> dict[str, dict[str, float]]:
    """Per batch size, the β₂ with the lowest loss among feasible runs, and that loss."""
    best: dict[str, dict[str, float]] = {}
    for run in runs:
        if run.get("loss") is None:
            continue
        key = str(run["batch_size"])
        if key not in best or run["loss"] < best[key]["loss"]:
            best[key] = {"beta2": run["beta2"], "loss": run["loss"]}
    return best


def _law_free(fit: dict[str, object]) -> dict[str, object]:
    return {key: {k: v for k, v in law.items() if k != "samples"} for key, law in fit["laws"].items()}


def arc_results(config: ArcResultsConfig, output_path: str) -> dict[str, object]:
    """Write `results.json` and `figure.png` for the whole arc; return the results."""
    fit = read_output(config.fit, FIT_FILE)
    isoflop = read_runs_jsonl(config.isoflop)
    batch_runs, beta2_runs = read_runs_jsonl(config.batch), read_runs_jsonl(config.beta2)
    target = read_output(config.target, RUN_FILE)
    results = {
        "isoflop": {
            "runs": [_summary(run) for run in isoflop],
            "infeasible": [_summary(run) for run in isoflop if run.get("feasible") is False],
        },
        "fit": {
            "budgets": [
                {k: b[k] for k in ("compute", "params_opt", "tokens_opt", "loss_opt", "method")} for b in fit["budgets"]
            ],
            "laws": _law_free(fit),
            "cross_validation": fit["cross_validation"],
            "stability": fit.get("stability"),
            "noise": fit["noise"],
            "warnings": fit["warnings"],
        },
        "tables": {"cross_validation": cross_validation_table(fit), "stability": stability_table(fit)},
        "preregistration": read_output(config.record, RECORD_FILE),
        "target": _summary(target) | {"selected": target.get("selected")},
        "score": read_output(config.score, SCORE_FILE),
        "batch": {"runs": [_summary(run) for run in batch_runs], "fit": read_output(config.batch_fit, BATCH_FIT_FILE)},
        "beta2": {"runs": [_summary(run) for run in beta2_runs], "best_by_batch": best_beta2(beta2_runs)},
        "beta2_rule": beta2_rule_table(config.beta2_rule),
        "seeds": SEEDS_ARC,
    }
    return write_results(output_path, results, _figure(results))


def _figure(results: dict[str, object]) -> Figure:
    """Isoflop curves, the law and the preregistered outcome, loss by batch, loss by β₂."""
    figure = Figure(figsize=(12, 9))
    (iso, law), (batch, beta2) = figure.subplots(2, 2)
    feasible = [run for run in results["isoflop"]["runs"] if run["loss"] is not None]
    for compute in sorted({run["compute"] for run in feasible}):
        runs = sorted((r for r in feasible if r["compute"] == compute), key=lambda r: r["params"])
        iso.plot([r["params"] for r in runs], [r["loss"] for r in runs], "o-", label=f"C = {compute:.3g}")
    target = results["target"]
    iso.plot([target["params"]], [target["loss"]], "k*", markersize=12, label=f"target C = {target['compute']:.3g}")
    iso.set(xscale="log", xlabel="active parameters (embeddings included)", ylabel="held-out macro loss (nats)")
    iso.set_title("isoflop curves (MoE, 8 experts, k = 2)")
    minima = results["fit"]["budgets"]
    law.plot([b["compute"] for b in minima], [b["loss_opt"] for b in minima], "ko", label="isoflop minima")
    score = results["score"]
    grid = np.geomspace(minima[0]["compute"], score["compute"] * 1.5, 100)
    for key, fitted in results["fit"]["laws"].items():
        law.plot(grid, fitted["E"] + fitted["A"] * grid ** -fitted["alpha"], label=f"{key} (E = {fitted['E']:.3g})")
    law.errorbar(
        [score["compute"]],
        [score["predicted"]],
        yerr=[[score["predicted"] - score["low"]], [score["high"] - score["predicted"]]],
        fmt="bs",
        capsize=4,
        label="preregistered",
    )
    law.plot([score["compute"]], [score["actual"]], "r*", markersize=12, label="actual")
    law.set(xscale="log", xlabel="compute (FLOPs)", ylabel="loss (nats)", title="L(C), preregistered vs actual")
    for compute in sorted({run["compute"] for run in results["batch"]["runs"]}):
        runs = sorted(
            (r for r in results["batch"]["runs"] if r["compute"] == compute and r["loss"] is not None),
            key=lambda r: r["batch_size"],
        )
        batch.plot([r["batch_size"] for r in runs], [r["loss"] for r in runs], "o-", label=f"C = {compute:.3g}")
    batch.set(xscale="log", xlabel="batch (sequences)", ylabel="loss (nats)", title="batch sweep")
    for size in sorted({run["batch_size"] for run in results["beta2"]["runs"]}):
        runs = sorted(
            (r for r in results["beta2"]["runs"] if r["batch_size"] == size and r["loss"] is not None),
            key=lambda r: r["beta2"],
        )
        beta2.plot([1 - r["beta2"] for r in runs], [r["loss"] for r in runs], "o-", label=f"batch {size}")
    beta2.set(xscale="log", xlabel="1 − β₂", ylabel="loss (nats)", title="β₂ × batch")
    for axis in (iso, law, batch, beta2):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return figure
