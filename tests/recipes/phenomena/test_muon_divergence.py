"""muon-divergence: the divergence definition and verdict on constructed losses, and the smoke grid end to end."""

import json
from pathlib import Path

import pytest

from tootsie.executor import Status, run_experiment
from tootsie.recipes.phenomena import muon_divergence as md
from tootsie.recipes.phenomena.registry import PHENOMENA, results_step_name
from tootsie.recipes.phenomena.results import VERDICTS
from tootsie.recipes.tiny.data import TinyData

GRID = [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]


def test_divergence_is_the_first_lr_above_the_best_more_than_the_margin_above_it() -> None:
    found = md.divergence(GRID, [4.8, 4.0, 4.3, 4.9, 5.2], margin=1.0)
    assert (found["best_lr"], found["best_loss"]) == (3e-3, 4.0)
    assert found["diverged"] == [1e-1] and found["divergence_lr"] == 1e-1
    assert found["factor"] == pytest.approx(1e-1 / 3e-3) and found["grid_steps"] == 3
    # a run the guard stopped (None) diverged whatever the margin; one below the best never counts
    stopped = md.divergence(GRID, [5.5, 4.0, 4.3, None, None], margin=1.0)
    assert stopped["diverged"] == [1e-3, 3e-2, 1e-1] and stopped["divergence_lr"] == 3e-2
    assert stopped["factor"] == pytest.approx(10.0)
    never = md.divergence(GRID, [4.8, 4.0, 4.3, 4.9, 4.99], margin=1.0)
    assert never["divergence_lr"] is None and never["factor"] is None and never["grid_steps"] is None
    with pytest.raises(ValueError, match="every run"):
        md.divergence(GRID[:2], [None, None], margin=1.0)


def test_verdict_on_every_branch() -> None:
    # grid steps from each seed's best LR to its divergence LR; None: no divergence in the grid
    assert md.verdict([3, 2, 3], [2, 1, 2]) == "reproduced"
    assert md.verdict([None, None], [2, 3]) == "reproduced"  # AdamW never diverged in its grid
    assert md.verdict([3, 3, 3], [3, 4, None]) == "not_reproduced"  # equal is not narrower
    assert md.verdict([None], [None]) == "not_reproduced"
    assert md.verdict([3, 3, 3], [2, 3, 3]) == "partial"


def _run(directory: Path, losses: list[float], attn: float, stopped: bool = False) -> str:
    directory.mkdir(parents=True)
    records = [
        {"step": step, "loss": loss, "aux/attn_logit_max": [attn / 2, attn], "update_norm": 0.1, "grad_norm": 1.0}
        for step, loss in enumerate(losses)
    ]
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if stopped:
        (directory / "diverged.json").write_text(json.dumps({"step": len(losses) - 1, "reason": "nan"}))
    return str(directory)


def test_analysis_reads_final_losses_guard_stops_and_per_layer_signals(tmp_path: Path) -> None:
    # final loss per (arm, lr): AdamW diverges 2 grid steps above its best, Muon 1 step above its own
    finals = {"adamw": {1e-3: 4.5, 1e-2: 4.0, 1e-1: 4.6, 1.0: 5.5}, "muon": {1e-3: 4.4, 1e-2: 3.9, 1e-1: None}}
    runs = []
    for seed in (0, 1):
        for arm, by_lr in finals.items():
            for lr, loss in by_lr.items():
                losses = [7.0, 6.0] + [loss if loss is not None else 20.0] * 3
                directory = tmp_path / f"{arm}-{lr:g}-{seed}"
                run = _run(directory, losses, attn=100 * lr, stopped=loss is None)
                runs.append(md.GridRun(arm=arm, lr=lr, seed=seed, run=run))
    config = md.MuonDivergenceConfig(runs=tuple(runs), final_window=3)
    results = md.analyze_muon_divergence(config, str(tmp_path / "out"))
    assert results["verdict"] == "reproduced" and results["numbers"]["muon_narrower_per_seed"] == [True, True]
    assert results["numbers"]["muon_minus_adamw_grid_steps_per_seed"] == [-1, -1]
    adamw, muon = results["numbers"]["arms"]["adamw"], results["numbers"]["arms"]["muon"]
    assert adamw["per_seed"]["0"]["divergence_lr"] == 1.0 and adamw["divergence_factor"]["mean"] == pytest.approx(100)
    assert muon["per_seed"]["1"]["divergence_lr"] == 1e-1 and muon["divergence_factor"]["mean"] == pytest.approx(10)
    assert muon["by_lr"]["lr0.1"]["stopped"] == [True, True] and muon["by_lr"]["lr0.1"]["final_loss"] == [None, None]
    # the attention logit is the larger layer's; read at the best and the divergence LR
    assert adamw["signals_at_best_lr"]["aux/attn_logit_max/max"]["mean"] == pytest.approx(1.0)
    assert adamw["signals_at_divergence_lr"]["aux/attn_logit_max/max"]["mean"] == pytest.approx(100.0)
    growth = muon["signal_growth_divergence_over_best"]
    assert growth["aux/attn_logit_max/max"]["mean"] == pytest.approx(10.0) and growth["grad_norm/max"]["mean"] == 1.0
    assert adamw["largest_growth"] == muon["largest_growth"] == "aux/attn_logit_max/max"
    assert (tmp_path / "out" / "figure.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="arms"):
        md.MuonDivergenceConfig(runs=tuple(r for r in runs if r.arm == "muon"))
    with pytest.raises(ValueError, match="common ratio"):  # grid steps would mean different factors in the two arms
        md.MuonDivergenceConfig(runs=tuple(r for r in runs if r.lr != 1e-2))


def test_the_smoke_grid_runs_end_to_end(synthetic_data: TinyData, tmp_path: Path) -> None:
    steps = md.grid_steps(md.PLANS["smoke"], synthetic_data, seeds=(0,))
    assert steps[-1].name == results_step_name(md.NAME) and len(steps) == 5
    report = run_experiment(steps, tmp_path)
    assert {step.status for step in report.steps} == {Status.SUCCESS}
    [path] = tmp_path.glob("phenomena/muon-divergence/results-*/results.json")
    results = json.loads(path.read_text())
    assert results["phenomenon"] == md.NAME and results["verdict"] in VERDICTS
    assert results["claim"] == PHENOMENA[md.NAME].claim and results["figures"] == ["figure.png"]
    muon = results["numbers"]["arms"]["muon"]
    # Muon at LR 1 blows up (the guard stops it), its attention logits and update norm far above those at LR 1e-2
    assert muon["per_seed"]["0"]["divergence_lr"] == 1.0 and muon["by_lr"]["lr1"]["stopped"] == [True]
    at_best, at_divergence = muon["signals_at_best_lr"], muon["signals_at_divergence_lr"]
    assert at_divergence["aux/attn_logit_max/max"]["mean"] > 10 * at_best["aux/attn_logit_max/max"]["mean"]
    assert at_divergence["update_norm/max"]["mean"] > 10 * at_best["update_norm/max"]["mean"]
    assert (path.parent / "figure.png").stat().st_size > 10_000


def test_the_tiny_grid_spans_each_arms_best_lr_with_every_seed() -> None:
    steps = md.build_steps("tiny")
    analysis = steps[-1].config
    plan = md.PLANS["tiny"]
    assert len(steps) == 1 + len(analysis.runs) == 1 + 3 * sum(len(plan.grid(arm)) for arm in md.ARMS)
    assert {run.seed for run in analysis.runs} == {0, 1, 2}
    for run in analysis.runs:
        config = run.run.step.config
        assert config.optimizer == md.OPTIMIZERS[run.arm] and config.schedule.peak_lr == run.lr
        assert config.num_steps == plan.num_steps and config.seed == config.data.seed == run.seed
