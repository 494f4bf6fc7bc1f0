"""Sweep plans spend each budget exactly, list what they skip, round-trip through JSON, and become executor steps."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.errors import TootsieError
from tootsie.executor import load_experiment, run_experiment
from tootsie.scaling.shapes import WidthRule, count_params, flops_per_token
from tootsie.scaling.sweep import SweepConfig, budget_label, load_plan, plan_sweep, plan_to_json
from tootsie.scaling.sweep_steps import train_config

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "isoflop_tiny.py"
TINY = dict(vocab_size=4096, seq_len=128, batch_size=16, rule=WidthRule.tiny(), min_steps=10)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(1e11, 1e13), min_size=1, max_size=3, unique=True), st.sampled_from(["exact", "6nd"]))
def test_every_run_spends_its_budget(budgets: list[float], rule: str) -> None:
    plan = plan_sweep(SweepConfig(budgets=tuple(budgets), widths=(16, 32, 64), flops_rule=rule, **TINY))
    for run in plan.runs:
        assert run.tokens == run.steps * 16 * 128 and run.steps >= 10
        spent = run.flops if rule == "exact" else run.flops_6nd
        # Whole steps: the budget is met to within half a step.
        assert abs(spent - run.budget) <= 0.5 * spent / run.steps * (1 + 1e-9)
        assert run.flops == pytest.approx(flops_per_token(run.model, 128) * run.tokens)
        assert run.params == count_params(run.model) and run.warmup_steps + run.decay_steps <= run.steps
    assert len(plan.runs) + len(plan.skipped) == 3 * len(budgets)


def test_window_picks_consecutive_widths_near_the_target_ratio() -> None:
    widths = (8, 16, 24, 32, 48, 64)
    plan = plan_sweep(SweepConfig(budgets=(1.25e11, 1e12), widths=widths, window=3, tokens_per_param=3.0, **TINY))
    chosen = {budget: [r.width for r in plan.runs if r.budget == budget] for budget in (1.25e11, 1e12)}
    assert chosen == {1.25e11: [8, 16, 24], 1e12: [24, 32, 48]}
    for run in plan.runs:
        assert run.name == f"{budget_label(run.budget)}-d{run.width}"


def test_short_runs_are_listed_not_dropped() -> None:
    plan = plan_sweep(SweepConfig(budgets=(1.25e11,), widths=(16, 64), **TINY | {"min_steps": 50}))
    assert [r.width for r in plan.runs] == [16] and [(s.width, s.reason.split()[0]) for s in plan.skipped] == [
        (64, "25")
    ]


def test_embeddings_count_and_learning_rate() -> None:
    config = SweepConfig(budgets=(1e12,), widths=(32,), include_embeddings=False, **TINY)
    run = plan_sweep(config).runs[0]
    assert run.params == run.params_non_embedding and run.learning_rate == min(0.01, 0.33 * math.sqrt(16) / 32)


def test_labels() -> None:
    assert [budget_label(b) for b in (1e12, 2.5e11, 1.25e11, 3e20)] == ["1e12", "2.5e11", "1.25e11", "3e20"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"budgets": ()}, "budgets"),
        ({"budgets": (1e12, 1e12)}, "duplicates"),
        ({"widths": (31,)}, "width 31"),
        ({"window": 5}, "window=5"),
        ({"flops_rule": "7nd"}, "flops_rule"),
    ],
)
def test_config_validation(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SweepConfig(**({"budgets": (1e12,), "widths": (16, 32)} | fields))


def test_plan_json_round_trip_and_tamper_check(tmp_path) -> None:
    plan = plan_sweep(SweepConfig(budgets=(1e12, 2e12), widths=(16, 32, 48), **TINY))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_to_json(plan)), encoding="utf-8")
    assert load_plan(path) == plan
    payload = json.loads(path.read_text(encoding="utf-8"))
    payload["runs"][0]["steps"] += 1
    path.write_text(json.dumps(payload), encoding="utf-8")
    with pytest.raises(TootsieError, match="its runs differ from what its config plans"):
        load_plan(path)


def test_the_tiny_experiment_is_twelve_train_and_eval_steps_and_a_collect(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("TOOTSIE_SCALING_PLAN", raising=False)
    report = run_experiment(load_experiment(EXPERIMENT), tmp_path, dry_run=True)
    names = [step.name for step in report.steps]
    trains = [n for n in names if n.startswith("isoflop_tiny/train/")]
    evals = [n for n in names if n.startswith("isoflop_tiny/eval/")]
    assert len(trains) == len(evals) == 12 and names[-1] == "isoflop_tiny/runs"
    assert {n.split("/")[-1].split("-d")[0] for n in trains} == {"1.25e11", "2.5e11", "5e11", "1e12"}


def test_seed_repeats_are_separate_runs_with_their_own_seeds() -> None:
    plan = plan_sweep(SweepConfig(budgets=(1e12,), widths=(16,), seeds=(0, 1), **TINY))
    assert [(r.name, r.seed) for r in plan.runs] == [("1e12-d16", 0), ("1e12-d16-s1", 1)]
    first, repeat = (train_config(run, plan, caches={"code": "/c"}, mix={"code": 1.0}) for run in plan.runs)
    assert (first.seed, first.data.seed, repeat.seed, repeat.data.seed) == (0, 0, 1, 1) and first.model == repeat.model
    with pytest.raises(ValueError, match="seeds"):
        SweepConfig(budgets=(1e12,), widths=(16,), seeds=(1, 1))
