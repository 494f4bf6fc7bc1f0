"""QK-norm switch: penalty and recovery read off paired control / qk-norm losses (training runs: the case study)."""

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tootsie.recipes.cases.qk_norm import QKNormAnalysisConfig, analyze_qk_norm

from .helpers import load_experiment_module

SWITCH, END, TOKENS_PER_STEP = 100, 200, 1024


def _run(directory: Path, steps: range, loss: np.ndarray, update_norm: float, eval_every: int = 25) -> str:
    directory.mkdir(parents=True)
    records = []
    for step, value in zip(steps, loss, strict=True):
        record = {"step": step, "loss": float(value), "update_norm": update_norm}
        if (step + 1) % eval_every == 0:
            record["eval/bpb/macro_avg"] = float(value) / 1.5
        records.append(record)
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(directory)


def test_penalty_and_recovery_in_steps_and_tokens(tmp_path: Path) -> None:
    base = 4.0 - np.arange(SWITCH) * 0.005  # ends at 3.505
    after = np.arange(SWITCH, END)
    control = 3.5 - (after - SWITCH) * 0.001
    bump = 0.3 * np.exp(
        -(after - SWITCH) / 10.0
    )  # the qk-norm run starts 0.3 above the control and decays with a 10-step scale
    runs = {
        "base": _run(tmp_path / "base", range(SWITCH), base, 0.5),
        "control": _run(tmp_path / "control", range(SWITCH, END), control, 0.5),
        "qk-norm": _run(tmp_path / "qk", range(SWITCH, END), control + bump, 0.5),
    }
    results = analyze_qk_norm(
        QKNormAnalysisConfig(
            runs=runs, switch_step=SWITCH, tokens_per_step=TOKENS_PER_STEP, smooth_steps=1, tolerance=0.02
        ),
        str(tmp_path / "out"),
    )
    assert results["penalty"]["first_step"] == pytest.approx(0.3) and results["penalty"]["max_at_step"] == SWITCH
    assert results["penalty"]["mean_first_10"] == pytest.approx(float(bump[:10].mean()))
    # 0.3·exp(-t/10) <= 0.02 first at t = 28 (10·ln 15 = 27.1).
    assert results["recovered_to_control"] == {"steps": 28, "tokens": 28 * TOKENS_PER_STEP}
    # control + bump <= 3.505 (the base's last step, smooth_steps=1):
    # 0.3·e^(-t/10) <= 0.005 + 0.001·t first holds at t = 24.
    assert results["loss_before_switch"] == pytest.approx(3.505)
    assert results["recovered_to_pre_switch_loss"] == {"steps": 24, "tokens": 24 * TOKENS_PER_STEP}
    assert results["first_update_norm"] == {"control": 0.5, "qk-norm": 0.5}
    assert set(results["eval_macro_bpb_delta"]) == set(range(124, END, 25))
    assert (tmp_path / "out" / "figure.png").stat().st_size > 10_000


def test_a_run_that_never_recovers_says_so(tmp_path: Path) -> None:
    flat = np.full(SWITCH, 3.0)
    runs = {
        "base": _run(tmp_path / "base", range(SWITCH), flat, 0.5),
        "control": _run(tmp_path / "control", range(SWITCH, END), flat, 0.5),
        "qk-norm": _run(tmp_path / "qk", range(SWITCH, END), flat + 0.1, 0.5),
    }
    results = analyze_qk_norm(
        QKNormAnalysisConfig(runs=runs, switch_step=SWITCH, tokens_per_step=TOKENS_PER_STEP), str(tmp_path / "out")
    )
    assert results["recovered_to_control"] is None and results["recovered_to_pre_switch_loss"] is None
    assert results["final_delta_mean_last_20"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="lacks"):
        QKNormAnalysisConfig(runs={"base": "x"}, switch_step=1, tokens_per_step=1)


def test_the_experiment_warm_starts_both_arms_from_the_same_checkpoint() -> None:
    experiment: ModuleType = load_experiment_module("case_qk_norm_switch")
    analysis = experiment.STEPS[0].config
    base, control, qk = (analysis.runs[name].step for name in ("base", "control", "qk-norm"))
    assert control.config.warm_start.checkpoint.step is base and qk.config.warm_start.checkpoint.step is base
    assert (control.config.model.qk_norm, qk.config.model.qk_norm, qk.config.warm_start.add_qk_norm) == (
        False,
        True,
        True,
    )
    # Only the architecture differs after the switch: same data stream, schedule, optimizer and length.
    assert (control.config.data, control.config.schedule, control.config.optimizer, control.config.num_steps) == (
        qk.config.data,
        qk.config.schedule,
        qk.config.optimizer,
        qk.config.num_steps,
    )
    assert analysis.switch_step == base.config.num_steps and control.config.schedule.decay_steps == 0
