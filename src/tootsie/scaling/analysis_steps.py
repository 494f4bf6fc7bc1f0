"""The scaling workflow after a sweep as executor steps: fit, preregister, train at the prediction, score.

`tootsie scaling fit/preregister/score/batch-size` are commands a person runs
by hand; an experiment that runs the whole arc (`experiments/moe_isoflop_tiny.py`)
needs them as steps, ordered by their inputs, so the preregistration exists
before the run it predicts starts (the run's step takes the record as an
input). Outputs hold no clock time and no machine path: the fit and the
record are written unstamped (`stamp=False`; when they were made is in each
step's executor metadata, which `score` reads), and recorded paths are
`portable`.

`train_at_prediction` is the one step whose shape is not known when the
experiment is built: it reads the preregistered `params_opt` and trains the
candidate width whose active parameters are closest to it (in log), at the
record's budget, with the sweep's recipe.

Example: `Step("arc/fit", fit_step, FitStepConfig(runs=(sweep.ref(),), fit=FitConfig(fixed_e=(1.0,))))`
writes `fit.json`, `fit-isoflops.png` and `fit-laws.png`.
"""

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.executor.portable import portable
from tootsie.executor.step import StepRef, volatile_outputs
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.scaling.batch_size import BatchSizeConfig, fit_batch_sizes
from tootsie.scaling.fit import FitConfig, fit_runs
from tootsie.scaling.plots import plot_isoflops, plot_laws
from tootsie.scaling.predict import load_fit
from tootsie.scaling.preregister import load_record, outcome_from_runs, preregister, preregistration_time, score
from tootsie.scaling.runs import BATCH_FIELDS, RUN_FILE, RUNS_FILE, infeasible_list, load_runs
from tootsie.scaling.shapes import count_params
from tootsie.scaling.sweep import SweepConfig, SweepPlan, plan_sweep
from tootsie.scaling.sweep_steps import RunEvalConfig, evaluate_run, train_config
from tootsie.scaling.validation import best_cross_validated

FIT_FILE = "fit.json"
RECORD_FILE = "preregistration.json"
SCORE_FILE = "score.json"
BATCH_FIT_FILE = "batch_size.json"
CLOCK_FIELDS = ("scored_at", "preregistered_at", "run_started_at")
"""A score's clock times, left out of `score.json` (`preregistered_before_run` stays)."""
BEST_CROSS_VALIDATED = "best-cross-validated"
"""A preregistration's `law` that picks the fit's law with the smallest leave-future-out error."""


def _runs_files(runs: tuple[str | StepRef, ...]) -> list[str]:
    """The step output directories (holding `runs.jsonl` or `run.json`) as paths for `load_runs`."""
    return [str(path) for path in runs]


@dataclass(frozen=True)
class FitStepConfig:
    """Fit the runs of sweep collect steps."""

    runs: tuple[str | StepRef, ...]
    """Sweep `runs` step outputs (directories holding `runs.jsonl`)."""
    fit: FitConfig
    """The fit's settings (fixed asymptotes, target, bootstrap, ...)."""


def fit_step(config: FitStepConfig, output_path: str) -> dict[str, object]:
    """Write `fit.json` (unstamped, inputs named portably) and its two figures."""
    fit = fit_runs(load_runs(_runs_files(config.runs)), config.fit, stamp=False)
    fit["inputs"] = [entry | {"path": portable(entry["path"])} for entry in fit["inputs"]]
    out = Path(output_path)
    write_json_atomic(out / FIT_FILE, fit)
    plot_isoflops(fit, out / "fit-isoflops.png")
    plot_laws(fit, out / "fit-laws.png")
    return {"budgets": len(fit["budgets"]), "infeasible": len(fit.get("infeasible", []))}


@dataclass(frozen=True)
class PreregisterStepConfig:
    """Preregister the loss at `compute` from a fit step's law."""

    fit: str | StepRef
    """A `fit_step` output."""
    compute: float
    """The budget the prediction is for."""
    name: str
    """The run the prediction is for."""
    law: str | None = None
    """The fit's law key (None: fixed E when the fit has it; `BEST_CROSS_VALIDATED`: the law whose leave-future-out
    predictions erred least)."""
    note: str = ""
    """Free text kept in the record."""


def preregister_step(config: PreregisterStepConfig, output_path: str) -> dict[str, object]:
    """Write `preregistration.json`: the hashed prediction, before the run it predicts can start."""
    fit_path = Path(str(config.fit)) / FIT_FILE
    law, note = config.law, config.note
    if law == BEST_CROSS_VALIDATED:
        law = best_cross_validated(load_fit(fit_path))
        note = f"{note} law {law}: the smallest mean leave-future-out error of the fit's laws".strip()
    record = preregister(
        fit_path, config.compute, config.name, Path(output_path) / RECORD_FILE, law=law, note=note, stamp=False
    )
    return record["prediction"]


@dataclass(frozen=True)
class TargetRunConfig:
    """Train and score one run at a preregistered budget, at the width the prediction's N_opt points to."""

    record: str | StepRef
    """A `preregister_step` output; its budget and `params_opt` choose the run."""
    sweep: SweepConfig
    """The sweep's recipe (shapes, optimizer, batch, divergence rule); its budgets are replaced by the record's."""
    widths: tuple[int, ...]
    """Candidate widths."""
    caches: dict[str, str | StepRef]
    """Training caches by domain."""
    mix: dict[str, float]
    """Mixture weights by domain."""
    heldout: dict[str, str | StepRef]
    """Held-out caches by domain (the macro loss)."""
    tokenizer: str | StepRef
    """The caches' tokenizer.json."""
    max_eval_sequences: int | None = None
    """Held-out sequences per domain; None: all."""


def target_plan(config: TargetRunConfig, compute: float, params_opt: float) -> tuple[SweepPlan, dict[str, object]]:
    """The one-run plan at `compute` whose width's active parameters are closest to `params_opt`, and why."""
    sweep = config.sweep
    heuristic = sweep.heuristic()
    params = {
        width: count_params(heuristic.model(width), sweep.include_embeddings, active=True) for width in config.widths
    }
    width = min(params, key=lambda w: abs(math.log(params[w] / params_opt)))
    chosen = replace(sweep, budgets=(compute,), widths=(width,), window=None, batch_sizes=(), beta2_values=())
    plan = plan_sweep(replace(chosen, seeds=(0,), min_steps=1))
    why = {"params_opt": params_opt, "candidates": {str(w): p for w, p in params.items()}, "width": width}
    return plan, why


@volatile_outputs(METRICS_FILE)  # each record's step_seconds and tokens_per_s are wall-clock (docs/reproducibility.md)
def train_at_prediction(config: TargetRunConfig, output_path: str) -> dict[str, object]:
    """Train the predicted-optimal width at the record's budget in this step's directory, then write `run.json` there.

    Training in the step's own directory lets `score` read when training started from its executor metadata.
    """
    record = load_record(Path(str(config.record)) / RECORD_FILE)
    plan, why = target_plan(config, float(record["compute"]), float(record["prediction"]["params_opt"]))
    run = plan.runs[0]
    run_training(train_config(run, plan, config.caches, config.mix), output_path)
    evaluated = evaluate_run(
        RunEvalConfig(
            name=record["name"],
            compute=run.budget,
            params=run.params,
            tokens=run.tokens,
            flops=run.flops,
            model=run.model,
            checkpoint=output_path,
            heldout=config.heldout,
            tokenizer=config.tokenizer,
            seq_len=plan.config.seq_len,
            max_sequences=config.max_eval_sequences,
            params_total=run.params_total,
            batch_size=run.batch_size,
            beta2=run.beta2,
            flops_non_embedding=run.flops_non_embedding,
        ),
        output_path,
    )
    evaluated["selected"] = why
    write_json_atomic(Path(output_path) / RUN_FILE, evaluated)
    return evaluated


@dataclass(frozen=True)
class ScoreStepConfig:
    """Score a preregistration against the run(s) at its budget."""

    record: str | StepRef
    """A `preregister_step` output."""
    runs: tuple[str | StepRef, ...]
    """Outputs holding `run.json` or `runs.jsonl` with the run(s) at the record's budget."""


def score_step(config: ScoreStepConfig, output_path: str) -> dict[str, object]:
    """Write `score.json`: prediction, outcome, error, interval, and whether the record predates the run.

    The times compared come from the two steps' executor metadata and are not written (one hash, one content).
    """
    path = Path(str(config.record)) / RECORD_FILE
    record = load_record(path)
    outcome = outcome_from_runs(_runs_files(config.runs), float(record["compute"]))
    result = score(record, *outcome, preregistered_at=preregistration_time(record, path))
    # Clock times stay in the executor metadata; the verdict they give is kept.
    result = {key: value for key, value in result.items() if key not in CLOCK_FIELDS}
    write_json_atomic(Path(output_path) / SCORE_FILE, result)
    return result


@dataclass(frozen=True)
class BatchFitStepConfig:
    """Fit optimal and critical batch sizes to batch sweeps."""

    runs: tuple[str | StepRef, ...]
    """Sweep `runs` step outputs whose records have `batch_size`."""
    fit: BatchSizeConfig = BatchSizeConfig()
    """How the critical batch is read off each budget's curve."""


def batch_fit_step(config: BatchFitStepConfig, output_path: str) -> dict[str, object]:
    """Write `batch_size.json`: per-budget optimal and critical batches and their power laws in C."""
    loaded = load_runs(_runs_files(config.runs), fields=BATCH_FIELDS)
    result = fit_batch_sizes(loaded.runs, config.fit) | {"infeasible": infeasible_list(loaded.infeasible)}
    write_json_atomic(Path(output_path) / BATCH_FIT_FILE, result)
    return result


def read_runs_jsonl(path: str | Path) -> list[dict[str, object]]:
    """Every record of a sweep collect step's `runs.jsonl`, feasible or not."""
    lines = (Path(path) / RUNS_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def read_output(path: str | Path, name: str) -> dict[str, object]:
    """A JSON file of a step output, or an error naming the step output that lacks it."""
    payload = read_json(Path(path) / name)
    if payload is None:
        raise TootsieError(f"{path} has no {name}; rerun the step that writes it")
    return payload
