"""embedding-norm: the verdict on every branch, the analysis on constructed runs, the decay mask, and a smoke run."""

import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.executor import Status, run_experiment
from tootsie.recipes.cases.common import CASE_MODEL
from tootsie.recipes.phenomena import embedding_norm as en
from tootsie.recipes.phenomena.registry import PHENOMENA, results_step_name
from tootsie.recipes.phenomena.results import VERDICTS
from tootsie.recipes.tiny.data import TinyData
from tootsie.train.optimizer import AdamWConfig, decay_mask


def test_verdict_on_every_branch() -> None:
    criteria = en.Criteria(min_growth=2.0, max_growth_share=0.5, max_loss_cost=0.02)
    assert en.verdict(4.0, 2.0, 0.01, criteria) == "reproduced"  # decay keeps 1/3 of the growth, costs 0.01
    assert en.verdict(4.0, 3.0, 0.01, criteria) == "partial"  # 2/3 of the growth is left
    assert en.verdict(4.0, 2.0, 0.05, criteria) == "partial"  # bounded, but too much loss
    assert en.verdict(1.5, 1.0, 0.0, criteria) == "not_reproduced"  # the undecayed norm barely grows


def _run(directory: Path, norms: np.ndarray, loss: float) -> str:
    directory.mkdir(parents=True)
    records = [{"step": step, "loss": loss, "embed_norm": float(norm)} for step, norm in enumerate(norms)]
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(directory)


def test_analysis_reads_growth_factors_and_the_paired_loss_cost(tmp_path: Path) -> None:
    ramp = np.linspace(0.0, 1.0, 100)
    runs: dict[str, list[str]] = {arm: [] for arm in en.ARMS}
    for seed, scale in ((0, 1.0), (1, 2.0)):
        runs["adamw"].append(_run(tmp_path / f"a{seed}", scale * (5 + 15 * ramp), 3.0 + seed))
        runs["embed-decay"].append(_run(tmp_path / f"d{seed}", scale * (5 + 5 * ramp), 3.01 + seed))
    config = en.EmbeddingAnalysisConfig(
        runs={arm: tuple(paths) for arm, paths in runs.items()}, seeds=(0, 1), window=1, weight_decay=0.1
    )
    results = en.analyze_embedding_norm(config, str(tmp_path / "out"))
    arms = results["numbers"]["arms"]
    assert arms["adamw"]["growth"]["values"] == pytest.approx([4.0, 4.0])  # 20 / 5 in both seeds
    assert arms["embed-decay"]["growth"]["values"] == pytest.approx([2.0, 2.0])
    assert results["numbers"]["loss_cost"]["mean"] == pytest.approx(0.01)
    assert results["verdict"] == "reproduced" and results["claim"] == PHENOMENA[en.NAME].claim
    assert (tmp_path / "out" / "figure.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="one run per seed"):
        en.EmbeddingAnalysisConfig(runs={"adamw": ("x",)}, seeds=(0,), window=1, weight_decay=0.1)


def test_the_embed_decay_arm_decays_the_embedding_and_nothing_else_more() -> None:
    model = CASE_MODEL.build(key=jax.random.key(0))
    params = eqx.filter(model, eqx.is_array)
    default, with_embed = decay_mask(params), en.embedding_decay_mask(params)
    assert (default.embed, with_embed.embed) == (False, True)
    assert jax.tree_util.tree_leaves(eqx.tree_at(lambda m: m.embed, default, True)) == jax.tree_util.tree_leaves(
        with_embed
    )
    # A step with zero gradients is the decay alone: lr * weight_decay * p on the embedding in embed-decay only.
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    for config, factor in (
        (AdamWConfig(weight_decay=0.1), 1.0),
        (en.EmbeddingDecayAdamWConfig(weight_decay=0.1), 0.99),
    ):
        optimizer = config.build(lambda _step: 0.1)
        updates, _ = optimizer.update(zeros, optimizer.init(params), params)
        embed = eqx.apply_updates(params, updates).embed
        assert float(jnp.linalg.norm(embed)) == pytest.approx(factor * float(jnp.linalg.norm(params.embed)), rel=1e-5)


def test_the_smoke_experiment_runs_end_to_end(synthetic_data: TinyData, tmp_path: Path) -> None:
    steps = en.embedding_steps(en.PLANS["smoke"], synthetic_data, seeds=(0,))
    assert steps[-1].name == results_step_name(en.NAME) and len(steps) == 3
    report = run_experiment(steps, tmp_path)
    assert {step.status for step in report.steps} == {Status.SUCCESS}
    [path] = tmp_path.glob("phenomena/embedding-norm/results-*/results.json")
    results = json.loads(path.read_text())
    assert results["phenomenon"] == en.NAME and results["verdict"] in VERDICTS and results["figures"] == ["figure.png"]
    arms = results["numbers"]["arms"]
    # Both arms start from the same initialization; the undecayed embedding ends larger.
    assert arms["adamw"]["embed_norm_start"]["mean"] == pytest.approx(
        arms["embed-decay"]["embed_norm_start"]["mean"], rel=1e-3
    )
    assert arms["adamw"]["growth"]["mean"] > arms["embed-decay"]["growth"]["mean"] > 1.0
    assert (path.parent / "figure.png").stat().st_size > 10_000


def test_the_tiny_experiment_pairs_both_arms_on_every_seed() -> None:
    steps = en.build_steps("tiny")
    analysis = steps[-1].config
    assert analysis.seeds == (0, 1, 2) and len(steps) == 1 + 2 * 3
    for adamw, decayed in zip(analysis.runs["adamw"], analysis.runs["embed-decay"], strict=True):
        a, d = adamw.step.config, decayed.step.config
        assert (a.data, a.schedule, a.seed, a.num_steps) == (d.data, d.schedule, d.seed, d.num_steps)
        assert type(a.optimizer) is AdamWConfig and type(d.optimizer) is en.EmbeddingDecayAdamWConfig
        assert a.optimizer.weight_decay == d.optimizer.weight_decay > 0
