"""qk-norm-spikes: the criteria on constructed cells and runs, and the smoke grid end to end."""

import json
from pathlib import Path

import numpy as np
import pytest

from tootsie.executor import Status, run_experiment
from tootsie.recipes.phenomena import qk_norm_spikes as qs
from tootsie.recipes.phenomena.registry import PHENOMENA, results_step_name
from tootsie.recipes.phenomena.results import VERDICTS
from tootsie.recipes.tiny.data import TinyData

CRITERIA = qs.SpikeCriteria()


def _cells(losses: list[float], logits: list[float], spikes: float = 0.0) -> dict[float, qs.Cell]:
    lrs = [1e-3, 1e-2, 3e-2, 1e-1]
    return {lr: qs.Cell(loss, spikes, 0.0, logit) for lr, loss, logit in zip(lrs, losses, logits, strict=True)}


def test_the_verdict_on_every_branch() -> None:
    llama = _cells([3.5, 3.4, 4.5, 5.0], [5, 10, 300, 3000])  # fails at 3e-2 (+1.1) and 1e-1 (+1.6)
    verdict, judged = qs.judge(llama, _cells([3.5, 3.4, 3.45, 3.49], [4, 5, 8, 12]), CRITERIA)
    assert verdict == "reproduced" and judged["failing_lrs"] == judged["fixed_lrs"] == [3e-2, 1e-1]
    assert judged["at_failing_lrs"]["0.1"]["attn_logit_ratio"] == pytest.approx(250)
    # qk-norm still 0.2 nat off its best at 1e-1: one fixed LR is not enough
    verdict, judged = qs.judge(llama, _cells([3.5, 3.4, 3.45, 3.6], [4, 5, 8, 12]), CRITERIA)
    assert verdict == "partial" and judged["fixed_lrs"] == [3e-2]
    # the attention logits under qk-norm as large as without: the mechanism is not shown
    verdict, _ = qs.judge(llama, _cells([3.5, 3.4, 4.4, 4.9], [5, 10, 300, 3000]), CRITERIA)
    assert verdict == "not_reproduced"
    # no LR fails without qk-norm
    verdict, judged = qs.judge(_cells([3.5, 3.4, 3.6, 4.3], [5, 10, 30, 60]), llama, CRITERIA)
    assert verdict == "not_reproduced" and judged["failing_lrs"] == []


def test_spikes_or_divergence_also_make_an_lr_fail() -> None:
    assert qs.fails(qs.Cell(3.5, 3.0, 0.0, 1.0), best_loss=3.4, criteria=CRITERIA)
    assert not qs.fails(qs.Cell(3.5, 2.67, 0.0, 1.0), best_loss=3.4, criteria=CRITERIA)
    assert qs.fails(qs.Cell(3.5, 0.0, 2 / 3, 1.0), best_loss=3.4, criteria=CRITERIA)
    assert qs.fails(qs.Cell(float("nan"), 0.0, 0.0, 1.0), best_loss=3.4, criteria=CRITERIA)


def _run(directory: Path, final: float, attn: float, steps: int = 60) -> str:
    directory.mkdir(parents=True)
    rng = np.random.default_rng(len(str(directory)))
    records = [
        {
            "step": step,
            "loss": (6.0 if step < steps - 20 else final) + 0.01 * rng.standard_normal(),
            "aux/attn_logit_max": [attn * step / steps / 2, attn * step / steps],
            "update_norm": 0.1,
            "grad_norm": 1.0,
        }
        for step in range(steps)
    ]
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(directory)


def test_the_analysis_aggregates_seeds_and_reads_the_attention_logits(tmp_path: Path) -> None:
    finals = {
        "llama": {1e-2: (3.4, 10.0), 3e-2: (4.6, 400.0), 1e-1: (5.2, 4000.0)},
        "qk-norm": {1e-2: (3.45, 5.0), 3e-2: (3.4, 8.0), 1e-1: (3.48, 10.0)},
        "update-clip": {3e-2: (4.55, 380.0), 1e-1: (3.5, 50.0)},
    }
    runs = [
        qs.GridRun(arm, lr, seed, _run(tmp_path / f"{arm}-{lr:g}-{seed}", final + 0.02 * seed, attn * (1 + seed)))
        for arm, by_lr in finals.items()
        for lr, (final, attn) in by_lr.items()
        for seed in (0, 1)
    ]
    results = qs.analyze_qk_norm_spikes(qs.QKSpikesAnalysisConfig(runs=tuple(runs)), str(tmp_path / "out"))
    numbers = results["numbers"]
    assert results["verdict"] == "reproduced" and numbers["fixed_lrs"] == [3e-2, 1e-1]
    grid = numbers["grid"]
    assert grid["llama"]["0.1"]["final_loss"]["mean"] == pytest.approx(5.21, abs=0.01)
    assert grid["llama"]["0.1"]["final_loss"]["n"] == 2
    assert grid["llama"]["0.1"]["peak_attn_logit"]["values"] == pytest.approx([4000 * 59 / 60, 8000 * 59 / 60])
    assert grid["llama"]["0.1"]["spikes"]["largest_attn_logit_layer"] == [1, 1]  # the second layer's logits
    assert numbers["update_clip_stops_failure"] == {"0.03": False, "0.1": True}
    assert numbers["criteria"]["seeds_aggregated_by"] == "mean"
    assert (tmp_path / "out" / "figure.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="arms"):
        qs.QKSpikesAnalysisConfig(runs=tuple(run for run in runs if run.arm != "qk-norm"))


@pytest.mark.timeout(900)  # about a minute on an idle machine; compiles crawl on a loaded one
def test_the_smoke_grid_runs_end_to_end(synthetic_data: TinyData, tmp_path: Path) -> None:
    steps = qs.phenomenon_steps(synthetic_data, qs.SCALES["smoke"])
    assert steps[-1].name == results_step_name(qs.NAME) and len(steps) == 6
    report = run_experiment(steps, tmp_path)
    assert {step.status for step in report.steps} == {Status.SUCCESS}
    [path] = tmp_path.glob("phenomena/qk-norm-spikes/results-*/results.json")
    results = json.loads(path.read_text())
    assert results["phenomenon"] == qs.NAME and results["verdict"] in VERDICTS
    assert results["claim"] == PHENOMENA[qs.NAME].claim and results["figures"] == ["figure.png"]
    grid = results["numbers"]["grid"]
    # Without QK-norm the attention logits at LR 0.1 grow far past those with it, and far past those at LR 3e-3.
    llama, qk = grid["llama"]["0.1"]["peak_attn_logit"]["mean"], grid["qk-norm"]["0.1"]["peak_attn_logit"]["mean"]
    assert llama > 10 * qk and llama > 10 * grid["llama"]["0.003"]["peak_attn_logit"]["mean"]
    assert set(grid) == set(qs.ARMS) and set(grid["update-clip"]) == {"0.1"}
    assert (path.parent / "figure.png").stat().st_size > 10_000


def test_the_tiny_grid_covers_every_arm_lr_and_seed() -> None:
    steps = qs.build_steps("tiny")
    scale, runs = qs.SCALES["tiny"], steps[-1].config.runs
    assert len(runs) == len(steps) - 1 == len(scale.seeds) * (2 * len(scale.lrs) + len(scale.clip_lrs))
    assert len(scale.seeds) >= 3 and set(scale.clip_lrs) <= set(scale.lrs)
    for run in runs:
        config = run.run.step.config
        assert config.model.qk_norm == (run.arm == "qk-norm") and config.schedule.peak_lr == run.lr
        assert (config.stability.clip_update_window is not None) == (run.arm == "update-clip")
        assert config.seed == run.seed and config.num_steps == scale.num_steps
