"""The scaling workflow's executor steps on synthetic sweeps: fit, preregister the best law, score; infeasible runs."""

import json
from pathlib import Path

import pytest

from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.models.llama import LlamaConfig
from tootsie.scaling.analysis_steps import (
    BEST_CROSS_VALIDATED,
    FIT_FILE,
    RECORD_FILE,
    SCORE_FILE,
    FitStepConfig,
    PreregisterStepConfig,
    ScoreStepConfig,
    TargetRunConfig,
    fit_step,
    preregister_step,
    score_step,
    target_plan,
)
from tootsie.scaling.fit import FitConfig
from tootsie.scaling.heuristic import MoeShape
from tootsie.scaling.runs import RUN_FILE, load_runs
from tootsie.scaling.shapes import WidthRule
from tootsie.scaling.sweep import SweepConfig
from tootsie.scaling.sweep_steps import RunEvalConfig, evaluate_run
from tootsie.scaling.validation import best_cross_validated
from tootsie.train.divergence import DIVERGED_FILE

from .synthetic import ChinchillaLaw, sweep_records, write_jsonl

LAW = ChinchillaLaw()
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]


def _sweep(directory: Path) -> Path:
    directory.mkdir(parents=True)
    write_jsonl(directory / "runs.jsonl", sweep_records(LAW, BUDGETS, 5, 3.0, noise=0.003, seed=1))
    return directory


def test_fit_preregister_and_score_steps_pick_the_true_asymptote(tmp_path: Path) -> None:
    runs = _sweep(tmp_path / "runs")
    fit_config = FitConfig(fixed_e=(1.0, 1.69, 2.2), target=1e21, bootstrap=200)
    fit_step(FitStepConfig(runs=(str(runs),), fit=fit_config), str(tmp_path / "fit"))
    fit = read_json(tmp_path / "fit" / FIT_FILE)
    # Unstamped: the fit's bytes depend only on its inputs.
    assert "created_at" not in fit and (tmp_path / "fit" / "fit-laws.png").is_file()
    assert best_cross_validated(fit) == "fixed=1.69"
    prediction = preregister_step(
        PreregisterStepConfig(fit=str(tmp_path / "fit"), compute=1e21, name="big", law=BEST_CROSS_VALIDATED),
        str(tmp_path / "prereg"),
    )
    record = read_json(tmp_path / "prereg" / RECORD_FILE)
    assert record["law"] == "fixed=1.69" and "created_at" not in record and "leave-future-out" in record["note"]
    assert prediction["loss"] == pytest.approx(LAW.loss_opt(1e21), abs=0.01)
    target = tmp_path / "target"
    write_json_atomic(target / RUN_FILE, {"name": "big", "compute": 1e21, "params": 1e9, "tokens": 1e11, "loss": 2.0})
    result = score_step(ScoreStepConfig(record=str(tmp_path / "prereg"), runs=(str(target),)), str(tmp_path / "score"))
    assert result == read_json(tmp_path / "score" / SCORE_FILE) and "scored_at" not in result
    assert result["actual"] == 2.0 and result["error"] == pytest.approx(2.0 - prediction["loss"])


def test_the_target_run_takes_the_width_nearest_the_predicted_optimum() -> None:
    sweep = SweepConfig(
        budgets=(1e12,), widths=(16, 32), vocab_size=1024, rule=WidthRule.tiny_gqa(), moe=MoeShape(8, 2)
    )
    config = TargetRunConfig(record="r", sweep=sweep, widths=(16, 32, 48), caches={}, mix={}, heldout={}, tokenizer="t")
    params = {w: sweep.heuristic().model(w).active_parameters() for w in (16, 32, 48)}
    plan, why = target_plan(config, 4e12, params[32] * 1.1)
    assert why["width"] == 32 and [(r.budget, r.width) for r in plan.runs] == [(4e12, 32)]
    assert target_plan(config, 4e12, params[48] * 5)[1]["width"] == 48


def test_a_diverged_run_is_recorded_infeasible_and_left_out_of_the_fit(tmp_path: Path) -> None:
    training = tmp_path / "train"
    write_json_atomic(training / DIVERGED_FILE, {"step": 12, "reason": "loss nan at step 12", "loss": None})
    config = RunEvalConfig(
        name="4e11-d48-lr100",
        compute=4e11,
        params=1000,
        tokens=5000,
        flops=4e11,
        model=LlamaConfig(hidden_dim=48),
        checkpoint=str(training),
        heldout={},
        tokenizer="unused: a diverged run is never loaded",
        batch_size=16,
    )
    record = evaluate_run(config, str(tmp_path / "eval"))
    assert record["feasible"] is False and record["reason"] == "loss nan at step 12" and record["loss"] is None
    assert record["batch_size"] == 16 and "loss_by_domain" not in record
    runs = _sweep(tmp_path / "runs")
    lines = (runs / "runs.jsonl").read_text() + json.dumps(record) + "\n"
    (runs / "runs.jsonl").write_text(lines)
    loaded = load_runs([runs])
    assert [r.name for r in loaded.infeasible] == ["4e11-d48-lr100"] and len(loaded.runs) == 25
