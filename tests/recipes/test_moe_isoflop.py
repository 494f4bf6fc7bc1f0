"""The MoE isoflop arc: its step graph (the target run waits for its preregistration), and the smoke arc end to end."""

import json
from pathlib import Path

import pytest

from tootsie.executor import StepRef, load_experiment, run_experiment
from tootsie.executor.verify import verify_experiment
from tootsie.recipes.moe.isoflop import ARC_SCALES, arc_steps
from tootsie.recipes.tiny.data import tiny_data_steps
from tootsie.scaling.analysis_steps import BEST_CROSS_VALIDATED

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "moe_isoflop_tiny.py"


def _inputs(step: object) -> set[str]:
    return {value.step.name for value in vars(step.config).values() if isinstance(value, StepRef)}


@pytest.mark.parametrize("scale", sorted(ARC_SCALES))
def test_the_arc_preregisters_before_its_target_run_and_every_anchor_is_an_isoflop(scale: str) -> None:
    arc = ARC_SCALES[scale]
    steps = arc_steps(arc, tiny_data_steps())
    assert _inputs(steps["target"]) >= {"moe_isoflop/preregister"} and _inputs(steps["preregister"]) == {
        "moe_isoflop/fit"
    }
    assert steps["preregister"].config.law == BEST_CROSS_VALIDATED
    assert steps["preregister"].config.compute >= 4 * max(arc.budgets)
    runs = [ref.step.config for ref in steps["isoflop"].config.runs]
    planted = [run for run in runs if run.name.endswith(f"-lr{arc.planted_lr_factor:g}")]
    assert (
        len(planted) == 1 and planted[0].compute == min(arc.budgets) and planted[0].model.hidden_dim == max(arc.widths)
    )
    for budget in arc.budgets:
        assert {run.model.hidden_dim for run in runs if run.compute == budget} == set(arc.widths)
    assert len(arc.budgets) >= 3 and len(arc.widths) >= 3 and len(arc.batch_budgets) >= 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_smoke_arc_runs_end_to_end_and_its_steps_rerun_to_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOTSIE_SCALE", "smoke")
    report = run_experiment(load_experiment(EXPERIMENT), tmp_path)
    assert {step.status for step in report.steps} == {"SUCCESS"}
    [path] = tmp_path.glob("moe_isoflop/results-*/results.json")
    results = json.loads(path.read_text())
    [planted] = results["isoflop"]["infeasible"]
    assert planted["name"].endswith("-lr10000") and planted["loss"] is None and "step" in planted["reason"]
    assert len(results["isoflop"]["runs"]) == 10 and len(results["fit"]["budgets"]) == 3
    assert {"free", "fixed", "fixed=2"} <= set(results["fit"]["laws"])
    assert "fixed (E=1)" in results["tables"]["cross_validation"] and len(results["fit"]["stability"]["rows"]) == 2
    score = results["score"]
    assert score["compute"] == 4 * 8e10 and score["preregistered_before_run"] is True
    assert score["low"] <= score["predicted"] <= score["high"] and "preregistered_at" not in score
    assert results["batch"]["fit"]["critical"]["coefficient"] > 0 and len(results["batch"]["runs"]) == 6
    assert set(results["beta2"]["best_by_batch"]) == {"4", "16"} and len(results["beta2_rule"]) == 4
    assert (path.parent / "figure.png").stat().st_size > 10_000
    # One hash, one content: the analysis steps and the target run (trained again) rerun into scratch to the same
    # bytes, under another prefix.
    steps = load_experiment(EXPERIMENT)
    for name in ("fit", "preregister", "target", "score", "batch-fit", "results"):
        verdict = verify_experiment(steps, tmp_path, steps_glob=f"moe_isoflop/{name}", scratch=tmp_path / "scratch")
        assert verdict.ok and len(verdict.verified) == 1, verdict.to_json()
