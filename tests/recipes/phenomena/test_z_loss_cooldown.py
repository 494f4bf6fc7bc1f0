"""z-loss-cooldown: the criteria on every branch, the analysis on constructed tails, the schedule, and a smoke run."""

import json
from pathlib import Path

import numpy as np
import pytest

from tootsie.executor import Status, run_experiment
from tootsie.recipes.phenomena import z_loss_cooldown as zl
from tootsie.recipes.phenomena.registry import PHENOMENA, results_step_name
from tootsie.recipes.phenomena.results import VERDICTS
from tootsie.recipes.tiny.data import TinyData

CRITERIA = zl.Criteria(min_growth=0.05, min_log_z_rise=0.2, max_share=0.5, max_loss_cost=0.02)


def _checks(no_z: tuple[float, float], with_z: tuple[float, float], cost: float) -> dict[str, bool]:
    """The checks for (lm_head growth, log Z rise) of each arm; max log Z rises as much as the mean."""
    keys = ("lm_head_growth", "log_z_rise")
    return zl.checks(
        dict(zip(keys, no_z)) | {"log_z_max_rise": no_z[1]},
        dict(zip(keys, with_z)) | {"log_z_max_rise": with_z[1]},
        cost,
        CRITERIA,
    )


def test_criteria_and_verdict_on_every_branch() -> None:
    assert zl.verdict(_checks((0.10, 0.5), (0.02, 0.0), 0.01)) == "reproduced"
    assert zl.verdict(_checks((0.10, 0.5), (0.02, -1.0), 0.01)) == "reproduced"  # log Z may fall under z-loss
    unbounded_norm = _checks((0.10, 0.5), (0.08, 0.0), 0.01)  # z-loss holds log Z, not the norm
    assert not unbounded_norm["lm_head_bounded"] and unbounded_norm["log_z_bounded"]
    assert zl.verdict(unbounded_norm) == "partial"
    assert zl.verdict(_checks((0.10, 0.5), (0.02, 0.3), 0.01)) == "partial"  # log Z rises more than half as much
    assert zl.verdict(_checks((0.10, 0.5), (0.02, 0.0), 0.05)) == "partial"  # bounded, at too high a loss cost
    assert zl.verdict(_checks((0.01, 0.5), (0.0, 0.0), 0.0)) == "partial"  # only log Z grows
    assert zl.verdict(_checks((0.01, 0.1), (0.0, 0.0), 0.0)) == "not_reproduced"  # nothing grows


def _tail(directory: Path, norm: np.ndarray, log_z: np.ndarray, loss: float, start: int) -> str:
    directory.mkdir(parents=True)
    records = [
        {
            "step": start + i,
            "loss": loss,
            "lr": 1e-3,
            "lm_head_norm": float(n),
            "aux/log_z": float(z),
            "aux/log_z_max": float(z) + 2,
            "aux/logit_max": float(z) + 1,
        }
        for i, (n, z) in enumerate(zip(norm, log_z, strict=True))
    ]
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(directory)


def test_analysis_measures_the_hold_only_and_pairs_losses_by_seed(tmp_path: Path) -> None:
    # Steps 40-49 decay (ignored: the norm jumps there), the hold is 50-99: no z-loss grows the norm 20 -> 22 and
    # log Z 8 -> 9, z-loss keeps both flat; windows of 1 step read the hold's first and last values.
    ramp = np.linspace(0.0, 1.0, 50)
    runs: dict[str, list[str]] = {arm: [] for arm in zl.ARMS}
    for seed in (0, 1):
        decay = np.full(10, 5.0)
        runs["no-z-loss"].append(
            _tail(tmp_path / f"n{seed}", np.r_[decay, 20 + 2 * ramp], np.r_[decay, 8 + ramp], 3.0 + seed, 40)
        )
        runs["z-loss"].append(
            _tail(
                tmp_path / f"z{seed}", np.r_[decay, np.full(50, 20.0)], np.r_[decay, np.full(50, 6.0)], 3.01 + seed, 40
            )
        )
    config = zl.ZLossAnalysisConfig(
        runs={arm: tuple(paths) for arm, paths in runs.items()},
        seeds=(0, 1),
        hold_start=50,
        window=1,
        z_loss_weight=0.1,
    )
    results = zl.analyze_z_loss_cooldown(config, str(tmp_path / "out"))
    arms = results["numbers"]["arms"]
    assert arms["no-z-loss"]["lm_head_growth"]["values"] == pytest.approx([0.1, 0.1])
    assert arms["no-z-loss"]["log_z_rise"]["mean"] == pytest.approx(1.0)
    assert arms["no-z-loss"]["logit_max_rise"]["mean"] == pytest.approx(1.0)
    assert arms["z-loss"]["lm_head_growth"]["mean"] == pytest.approx(0.0) and arms["z-loss"]["log_z_end"]["mean"] == 6
    assert results["numbers"]["loss_cost"]["values"] == pytest.approx([0.01, 0.01])
    assert all(results["numbers"]["checks"].values()) and results["verdict"] == "reproduced"
    assert results["claim"] == PHENOMENA[zl.NAME].claim and results["figures"] == ["figure.png"]
    assert (tmp_path / "out" / "figure.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="fewer than"):
        zl.hold_change(runs["z-loss"][0], "lm_head_norm", hold_start=50, window=30)


def test_the_schedule_decays_to_the_tail_lr_and_holds_it() -> None:
    plan = zl.PLANS["tiny"]
    lr = plan.schedule().build().learning_rate
    assert float(lr(plan.stable_steps - 1)) == pytest.approx(plan.peak_lr)
    assert float(lr(plan.stable_steps + plan.decay_steps // 2)) < plan.peak_lr
    for step in (plan.hold_start, (plan.hold_start + plan.total_steps) // 2, plan.total_steps - 1):
        assert float(lr(step)) == pytest.approx(plan.tail_ratio * plan.peak_lr)
    with pytest.raises(ValueError, match="no hold"):
        zl.CooldownPlan(40, 10, 60, 1e-3, 0.1, 1e-3, 0.1, window=10)


def test_the_smoke_experiment_runs_end_to_end(synthetic_data: TinyData, tmp_path: Path) -> None:
    steps = zl.cooldown_steps(zl.PLANS["smoke"], synthetic_data, seeds=(0,))
    assert steps[-1].name == results_step_name(zl.NAME) and len(steps) == 4
    report = run_experiment(steps, tmp_path)
    assert {step.status for step in report.steps} == {Status.SUCCESS}
    [path] = tmp_path.glob("phenomena/z-loss-cooldown/results-*/results.json")
    results = json.loads(path.read_text())
    assert results["phenomenon"] == zl.NAME and results["verdict"] in VERDICTS
    assert set(results["numbers"]["checks"]) == {
        "lm_head_grows",
        "log_z_grows",
        "lm_head_bounded",
        "log_z_bounded",
        "log_z_max_bounded",
        "loss_cost_ok",
    }
    arms = results["numbers"]["arms"]
    # Both tails start from the base's weights; z-loss pulls log Z (mean and max) below the tail without it.
    assert arms["z-loss"]["log_z_end"]["mean"] < arms["no-z-loss"]["log_z_end"]["mean"]
    assert arms["z-loss"]["log_z_max_end"]["mean"] < arms["no-z-loss"]["log_z_max_end"]["mean"]
    assert (path.parent / "figure.png").stat().st_size > 10_000
    # The lm_head of the base and of each tail, split into its shift and centered parts (squares add up).
    parts = results["numbers"]["lm_head_parts"]
    assert set(parts) == {"base", *zl.ARMS}
    for part in parts.values():
        norm, shift, centered = (part[key]["mean"] for key in ("norm", "shift", "centered"))
        assert norm**2 == pytest.approx(shift**2 + centered**2, rel=1e-9) and 0 < shift < norm
    assert parts["no-z-loss"]["norm"]["mean"] != parts["base"]["norm"]["mean"]


def test_head_parts_needs_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no checkpoint"):
        zl.head_parts(str(tmp_path))


def test_the_tiny_tails_warm_start_from_their_seeds_base_and_differ_only_in_z_loss() -> None:
    steps = zl.build_steps("tiny")
    analysis = steps[-1].config
    assert analysis.seeds == (0, 1, 2) and len(steps) == 1 + 3 * 3
    for no_z, with_z in zip(analysis.runs["no-z-loss"], analysis.runs["z-loss"], strict=True):
        a, b = no_z.step.config, with_z.step.config
        assert a.warm_start.checkpoint.step is b.warm_start.checkpoint.step
        base = a.warm_start.checkpoint.step.config
        assert (base.z_loss_weight, a.z_loss_weight, b.z_loss_weight) == (0.0, 0.0, zl.PLANS["tiny"].z_loss_weight)
        assert (a.data, a.schedule, a.optimizer, a.seed) == (b.data, b.schedule, b.optimizer, b.seed)
        assert a.schedule == base.schedule and base.num_steps == zl.PLANS["tiny"].stable_steps
