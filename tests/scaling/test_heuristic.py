"""The budget → recipe heuristic: the seeds' β rules and 1e23 run, whole steps that spend the budget, the CLI."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.cli.main import main
from tootsie.models.moe import MoeConfig
from tootsie.scaling.heuristic import BatchRule, Beta2Rule, Heuristic, MoeShape, non_embedding_flops_per_token
from tootsie.scaling.shapes import WidthRule
from tootsie.scaling.sweep import SweepConfig, plan_sweep

TOY = Heuristic(rule=WidthRule.tiny_gqa(), vocab_size=1024, seq_len=128, moe=MoeShape(8, 2), batch_size=16)


def test_beta2_rule_at_the_seeds_batches_sits_above_their_swept_optima() -> None:
    # Base 0.998 gives 0.996, 0.992, 0.984, 0.968 at batch 64-512; the seeds' swept optima were 0.995, 0.995, 0.97,
    # 0.95: above them at 64, 256 and 512, below at 128 (the gap is reported, not closed).
    new, old = Beta2Rule(), Beta2Rule(base=0.999)
    assert [round(new(b), 3) for b in (64, 128, 256, 512)] == [0.996, 0.992, 0.984, 0.968]
    assert [round(old(b), 3) for b in (64, 128, 256, 512)] == [0.998, 0.996, 0.992, 0.984]
    assert new(16) == pytest.approx(0.998**0.5) and new(1) == 0.9999 and new(10_000) == 0.95
    with pytest.raises(ValueError, match="low"):
        Beta2Rule(low=0.99, high=0.9)


def test_the_1e23_recipe_is_the_seeds_run() -> None:
    # Weekly update: d5120, 40 heads, GQA 4:1, 64 experts k = 4, "131B total / ~16B active", ~1.02T tokens, batch
    # 2048; the rule gives 49 layers where the run had 48.
    recipe = Heuristic(moe=MoeShape()).recipe(1e23, 5120)
    model = recipe.model
    assert isinstance(model, MoeConfig)
    assert (model.num_layers, model.num_heads, model.num_kv_heads, model.num_experts) == (49, 40, 10, 64)
    assert (model.experts_per_token, model.intermediate_dim, model.num_shared_experts) == (4, 2560, 2)
    assert recipe.batch_size == 2048 and recipe.beta1 == 0.9062 and recipe.beta2 == 0.95
    assert 130e9 < model.num_parameters() < 133e9 and 15.5e9 < model.active_parameters() < 16.5e9
    assert 0.95e12 < recipe.tokens < 1.05e12 and recipe.learning_rate == pytest.approx(0.33 * math.sqrt(2048) / 5120)
    # The seeds' CBS law is in sequences of 4096 tokens: ~15,500 at 1e23; an eighth, rounded to 2^k, is 2048.
    assert BatchRule().critical_tokens(1e23) / 4096 == pytest.approx(1.87e-5 * 1e23**0.388)


@settings(max_examples=40, deadline=None)
@given(
    st.floats(1e11, 1e14),
    st.sampled_from([16, 32, 48, 64]),
    st.sampled_from(["all", "non_embedding"]),
    st.sampled_from(["exact", "6nd"]),
)
def test_every_recipe_spends_its_budget_in_whole_steps(budget: float, width: int, basis: str, rule: str) -> None:
    heuristic = Heuristic(
        rule=WidthRule.tiny_gqa(), vocab_size=1024, seq_len=128, moe=MoeShape(8, 2), flops_basis=basis, flops_rule=rule
    )
    recipe = heuristic.recipe(budget, width)
    per_step = heuristic.flops_per_token(recipe.model) * recipe.batch_size * recipe.seq_len
    assert abs(per_step * recipe.steps - budget) <= per_step / 2 * (1 + 1e-9) or recipe.steps == 1
    assert recipe.tokens == recipe.steps * recipe.batch_size * 128
    assert recipe.batch_size & (recipe.batch_size - 1) == 0 and 0.95 <= recipe.beta2 <= 0.9999
    assert recipe.flops_non_embedding == pytest.approx(non_embedding_flops_per_token(recipe.model, 128) * recipe.tokens)
    if basis == "non_embedding" and rule == "exact":
        assert recipe.flops_non_embedding == pytest.approx(budget, rel=0.5 / recipe.steps + 1e-9)


def test_bigger_batches_get_smaller_beta2_and_a_larger_learning_rate() -> None:
    recipes = [TOY.recipe(1e12, 32, batch) for batch in (8, 32, 128)]
    assert [r.beta2 for r in recipes] == sorted((r.beta2 for r in recipes), reverse=True)
    assert recipes[0].steps == 16 * recipes[2].steps or abs(recipes[0].steps - 16 * recipes[2].steps) <= 16


def test_an_moe_sweep_plans_active_parameters_and_the_heuristics_betas() -> None:
    config = SweepConfig(
        budgets=(4e11,),
        widths=(16, 32),
        vocab_size=1024,
        rule=WidthRule.tiny_gqa(),
        moe=MoeShape(8, 2),
        beta1=0.9062,
        beta2=Beta2Rule(),
        batch_sizes=(8, 32),
        beta2_values=(0.95, 0.99),
    )
    plan = plan_sweep(config)
    assert [r.name for r in plan.runs][:4] == [
        "4e11-d16-b8-beta2-0.95",
        "4e11-d16-b8-beta2-0.99",
        "4e11-d16-b32-beta2-0.95",
        "4e11-d16-b32-beta2-0.99",
    ]
    for run in plan.runs:
        assert isinstance(run.model, MoeConfig) and run.params == run.model.active_parameters() < run.params_total
        assert run.beta1 == 0.9062 and run.beta2 in (0.95, 0.99) and run.batch_size in (8, 32)


def test_heuristic_cli_prints_the_issue_fields(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["scaling", "heuristic", "--budget", "1e12", "--hidden-dim", "32", "--moe", "--experts", "8", "--k", "2"]
    assert main([*argv, "--rule", "tiny-gqa", "--vocab-size", "1024", "--seq-len", "128", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert {"model", "optimizer", "batch_size", "steps", "tokens", "params_total", "params_active"} <= set(result)
    assert {"lr", "beta1", "beta2"} <= set(result["optimizer"]) and result["model"]["kind"] == "moe"
    assert result["model"]["num_experts"] == 8 and result["params_active"] < result["params_total"]
    assert main(["scaling", "heuristic", "--budget", "1e12", "--hidden-dim", "32", "--experts", "8"]) == 2
    assert "add --moe" in capsys.readouterr().err


def test_sweep_cli_with_moe_uses_the_heuristics_betas(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["scaling", "sweep", "--budgets", "4e11", "--widths", "16,32", "--rule", "tiny-gqa", "--vocab-size", "1024"]
    assert main([*argv, "--moe", "--experts", "8", "--k", "2", "--beta2-base", "0.999", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out.splitlines()[-1])["runs"]
    assert {r["beta1"] for r in runs} == {0.9062} and {r["beta2"] for r in runs} == {Beta2Rule(base=0.999)(16)}
    assert main([*argv, "--json"]) == 0
    dense = json.loads(capsys.readouterr().out.splitlines()[-1])["runs"]
    assert {(r["beta1"], r["beta2"]) for r in dense} == {(None, None)}
