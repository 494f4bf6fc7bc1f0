"""necromancy: the relapse rule and verdict on constructed runs, and the smoke restarts end to end."""

import json
from pathlib import Path

import numpy as np
import pytest

from tootsie.executor import Status, run_experiment
from tootsie.monitor.metrics_log import read_metrics
from tootsie.recipes.phenomena import necromancy as nc
from tootsie.recipes.phenomena.registry import PHENOMENA, results_step_name
from tootsie.recipes.phenomena.results import VERDICTS
from tootsie.recipes.phenomena.spiking import RunSignals
from tootsie.recipes.tiny.data import TinyData

RESTART, END = 30, 90


def _signals(peak: float, spikes: int = 0) -> RunSignals:
    empty = np.zeros(0)
    return RunSignals(
        empty.astype(np.int64), empty, 3.0, False, [{"step": 1}] * spikes, np.array([RESTART]), np.array([peak])
    )


def test_a_restart_relapses_on_a_spike_or_on_attention_logits_grown_back() -> None:
    assert nc.relapsed(_signals(peak=31.0), base_logit=10.0, regrowth=3.0)
    assert not nc.relapsed(_signals(peak=29.0), base_logit=10.0, regrowth=3.0)
    assert nc.relapsed(_signals(peak=5.0, spikes=1), base_logit=10.0, regrowth=3.0)


def test_the_verdict_on_every_branch() -> None:
    story = {"continued": [True] * 3, "necromancy": [True, True, False], "nadamw": [True] * 3, "muon": [True] * 3}
    assert nc.judge({**story, "qk-switch": [False, False, True]}) == "reproduced"
    assert nc.judge({**story, "qk-switch": [True, True, False]}) == "partial"  # the switch relapsed too
    assert nc.judge({**story, "muon": [False, False, True], "qk-switch": [False] * 3}) == "partial"  # Muon held
    assert nc.judge({**story, "muon": [False] * 3, "qk-switch": [True] * 3}) == "not_reproduced"


def _run(directory: Path, steps: range, attn: list[float], jump_at: int | None = None) -> str:
    directory.mkdir(parents=True)
    rng = np.random.default_rng(steps.start)
    records = [
        {
            "step": step,
            "loss": 4.0 - 0.001 * step + 0.01 * rng.standard_normal() + (3.0 if step == jump_at else 0.0),
            "aux/attn_logit_max": [value / 2, value],
            "update_norm": 0.1,
            "grad_norm": 1.0,
        }
        for step, value in zip(steps, attn, strict=True)
    ]
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(directory)


def test_the_analysis_judges_each_restart_against_the_base_at_the_restart(tmp_path: Path) -> None:
    growth = {"continued": 20.0, "necromancy": 8.0, "nadamw": 6.0, "muon": 1.0, "qk-switch": 0.3}
    runs = []
    for seed in (0, 1, 2):
        base_attn = list(np.linspace(1.0, 10.0 * (1 + seed), RESTART))
        runs.append(nc.RestartRun("base", seed, _run(tmp_path / f"base-{seed}", range(RESTART), base_attn)))
        for arm, factor in growth.items():
            attn = list(np.linspace(base_attn[-1], factor * base_attn[-1], END - RESTART))
            jump = RESTART + 40 if arm == "muon" else None  # Muon's logits stay put, but its loss spikes
            directory = tmp_path / f"{arm}-{seed}"
            runs.append(nc.RestartRun(arm, seed, _run(directory, range(RESTART, END), attn, jump_at=jump)))
    config = nc.NecromancyAnalysisConfig(runs=tuple(runs), restart_step=RESTART)
    results = nc.analyze_necromancy(config, str(tmp_path / "out"))
    restarts = results["numbers"]["restarts"]
    assert results["verdict"] == "reproduced"
    assert results["numbers"]["base_attn_logit_at_restart"]["values"] == pytest.approx([10.0, 20.0, 30.0])
    assert restarts["necromancy"]["regrowth_ratio"]["mean"] == pytest.approx(8.0)
    assert restarts["muon"]["relapsed_seeds"] == 3 and restarts["muon"]["spikes"]["spikes_per_run"] == [1, 1, 1]
    assert restarts["qk-switch"]["relapsed_seeds"] == 0 and restarts["qk-switch"]["peak_attn_logit"]["n"] == 3
    assert (tmp_path / "out" / "figure.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="arms"):
        nc.NecromancyAnalysisConfig(runs=tuple(run for run in runs if run.arm != "muon"), restart_step=RESTART)


@pytest.mark.timeout(900)  # about a minute on an idle machine; compiles crawl on a loaded one
def test_the_smoke_restarts_run_end_to_end(synthetic_data: TinyData, tmp_path: Path) -> None:
    scale = nc.SCALES["smoke"]
    steps = nc.phenomenon_steps(synthetic_data, scale)
    assert steps[-1].name == results_step_name(nc.NAME) and len(steps) == 2 + len(nc.RESTARTS)
    report = run_experiment(steps, tmp_path)
    assert {step.status for step in report.steps} == {Status.SUCCESS}
    outputs = {step.name.split("/")[2]: Path(step.output_path) for step in report.steps if step.name.count("/") == 3}
    first = {arm: read_metrics(path / "metrics.jsonl").records[0] for arm, path in outputs.items()}
    assert first["base"]["step"] == 0 and {first[arm]["step"] for arm in nc.RESTARTS} == {scale.restart_step}
    # The base's checkpoint carried the clip's history: every restart's clip has a threshold at its first step
    # (a fresh clip has none until it has seen window // 2 updates); the necromancy clip is the 2σ one.
    assert first["base"]["clip_update/threshold"] == "inf"
    assert all(np.isfinite(first[arm]["clip_update/threshold"]) for arm in nc.RESTARTS)
    assert first["necromancy"]["clip_update/threshold"] < first["continued"]["clip_update/threshold"] / 1000
    # The QK-norm switch normalizes the attention the base had let grow.
    last_base = read_metrics(outputs["base"] / "metrics.jsonl").records[-1]["aux/attn_logit_max"]
    assert max(first["qk-switch"]["aux/attn_logit_max"]) < max(last_base) / 10
    [path] = tmp_path.glob("phenomena/necromancy/results-*/results.json")
    results = json.loads(path.read_text())
    assert results["phenomenon"] == nc.NAME and results["verdict"] in VERDICTS
    assert results["claim"] == PHENOMENA[nc.NAME].claim and set(results["numbers"]["restarts"]) == set(nc.RESTARTS)
    assert (path.parent / "figure.png").stat().st_size > 10_000


def test_every_tiny_restart_starts_from_its_seeds_base_checkpoint() -> None:
    steps = nc.build_steps("tiny")
    scale, runs = nc.SCALES["tiny"], steps[-1].config.runs
    assert len(runs) == len(scale.seeds) * (1 + len(nc.RESTARTS)) and len(scale.seeds) >= 3
    bases = {run.seed: run.run.step for run in runs if run.arm == "base"}
    for run in runs:
        config = run.run.step.config
        if run.arm == "base":
            assert config.num_steps == scale.restart_step and not config.model.qk_norm
            continue
        assert config.warm_start.checkpoint.step is bases[run.seed] and config.num_steps == scale.num_steps
        assert config.schedule == bases[run.seed].config.schedule and config.data == bases[run.seed].config.data
        assert config.model.qk_norm == config.warm_start.add_qk_norm == (run.arm == "qk-switch")
