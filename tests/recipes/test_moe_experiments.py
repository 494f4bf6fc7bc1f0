"""The MoE experiments: shared runs between the three files, matched parameters, the analyses on synthetic logs.

Slow: the throughput test compiles a tiny MoE's gradient twice.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from tootsie.executor import StepRef, step_hash
from tootsie.models.moe import MoeConfig
from tootsie.recipes.moe.analysis import (
    CapacityConfig,
    LoadBalanceConfig,
    MoeVsDenseConfig,
    analyze_capacity,
    analyze_load_balance,
    analyze_moe_vs_dense,
    mean_and_se,
)
from tootsie.recipes.moe.runs import RunSettings, arm_name, matched_dense, moe_model
from tootsie.recipes.moe.throughput import THROUGHPUT_FILE, ThroughputConfig, time_capacity_factors

from .helpers import load_experiment_module

SHORT = RunSettings(num_steps=30, warmup_steps=5)


def _names(refs: tuple[StepRef, ...]) -> list[str]:
    return [ref.step.name for ref in refs]


def _hashes(refs: tuple[StepRef, ...]) -> list[str]:
    return [step_hash(ref.step) for ref in refs]


def test_the_three_experiments_share_runs_by_name_and_config() -> None:
    vs_dense = load_experiment_module("moe_vs_dense").build_steps(32, (0, 1), SHORT)[0].config
    capacity = load_experiment_module("moe_capacity").build_steps(32, (1.0, 4.0), (0, 1), SHORT)[0].config
    balance = load_experiment_module("moe_load_balance").build_steps(32, (0, 1), SHORT)[0].config
    assert _names(vs_dense.runs["moe"]) == ["moe_exp/moe-e32-cf4-lb0.01/seed0", "moe_exp/moe-e32-cf4-lb0.01/seed1"]
    # The capacity ablation's cf 4 runs are MoE vs dense's MoE arm; its cf 1 runs are the balanced arm.
    assert _hashes(capacity.runs["4"]) == _hashes(vs_dense.runs["moe"])
    assert _hashes(capacity.runs["1"]) == _hashes(balance.runs["lb 0.01"])
    assert _names(capacity.runs["1"]) == _names(balance.runs["lb 0.01"])
    assert _names(balance.runs["lb 0"]) == ["moe_exp/moe-e32-cf1-lb0/seed0", "moe_exp/moe-e32-cf1-lb0/seed1"]
    moe_run, dense_run = vs_dense.runs["moe"][1].step.config, vs_dense.runs["dense"][1].step.config
    # Seed s of both arms: same data stream, schedule, optimizer and held-out evaluation; only the model differs.
    assert (moe_run.data, moe_run.schedule, moe_run.seed, moe_run.eval) == (
        dense_run.data,
        dense_run.schedule,
        dense_run.seed,
        dense_run.eval,
    )
    assert moe_run.data.seed == 1 and moe_run.num_steps == 30 and moe_run.eval.every_steps == 30


def test_the_dense_baseline_matches_the_moe_active_parameters_but_the_routers() -> None:
    moe = moe_model(96)
    dense = matched_dense(moe)
    assert not isinstance(dense, MoeConfig) and dense.intermediate_dim == 192
    routers = moe.num_layers * moe.hidden_dim * moe.num_experts
    assert moe.active_parameters() - dense.num_parameters() == routers
    assert (arm_name(moe), arm_name(dense), arm_name(moe_model(96, None, 0.0))) == (
        "moe-e96-cf4-lb0.01",
        "dense-f192",
        "moe-e96-cfnone-lb0",
    )


def _run(directory: Path, steps: int, bpb: float, **series: np.ndarray) -> str:
    """A metrics.jsonl of `steps` records with the given per-step series and a final held-out BPB."""
    directory.mkdir(parents=True)
    records = []
    for step in range(steps):
        record = {"step": step, "loss": 5.0 - step / steps, **{k: float(v[step]) for k, v in series.items()}}
        if step == steps - 1:
            record["eval/bpb/macro_avg"] = bpb
        records.append(record)
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(directory)


def test_moe_vs_dense_reports_means_standard_errors_and_the_2se_verdict(tmp_path: Path) -> None:
    moe = tuple(_run(tmp_path / f"moe{i}", 10, v) for i, v in enumerate((2.10, 2.12, 2.11)))
    dense = tuple(_run(tmp_path / f"dense{i}", 10, v) for i, v in enumerate((2.20, 2.19, 2.21)))
    parameters = {"moe": {"total": 4, "active": 2}, "dense": {"total": 2, "active": 2}}
    results = analyze_moe_vs_dense(
        MoeVsDenseConfig(runs={"moe": moe, "dense": dense}, parameters=parameters), str(tmp_path / "out")
    )
    assert results["arms"]["moe"]["mean"] == pytest.approx(2.11)
    assert results["arms"]["moe"]["se"] == pytest.approx(0.01 / np.sqrt(3))
    assert results["difference_dense_minus_moe"]["mean"] == pytest.approx(0.09)
    assert results["difference_dense_minus_moe"]["se"] == pytest.approx(np.sqrt(2) * 0.01 / np.sqrt(3))
    assert results["paired_difference"]["mean"] == pytest.approx(0.09) and results["moe_beats_dense_by_2se"]
    assert (tmp_path / "out" / "figure.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="as many seeds"):
        MoeVsDenseConfig(runs={"moe": moe, "dense": dense[:2]}, parameters=parameters)


def test_capacity_ablation_reads_drops_bpb_and_throughput_per_factor(tmp_path: Path) -> None:
    steps = 20
    runs = {
        cf: tuple(
            _run(
                tmp_path / f"cf{cf}-{seed}",
                steps,
                2.5 - 0.05 * float(cf) + 0.01 * seed,
                **{
                    "moe/dropped_fraction": np.full(steps, drop),
                    "tokens_per_s": np.r_[10.0, np.full(steps - 1, 1000.0 / float(cf))],
                },
            )
            for seed in (0, 1)
        )
        for cf, drop in (("1", 0.2), ("2", 0.05), ("4", 0.0))
    }
    timed = {"factors": {cf: {"tokens_per_s": 100.0 / float(cf)} for cf in runs}}
    (tmp_path / "throughput.json").write_text(json.dumps(timed), encoding="utf-8")
    results = analyze_capacity(
        CapacityConfig(runs=runs, throughput=str(tmp_path / "throughput.json")), str(tmp_path / "out")
    )
    rows = results["capacity_factors"]
    assert [rows[cf]["dropped_fraction"]["mean"] for cf in ("1", "2", "4")] == pytest.approx([0.2, 0.05, 0.0])
    assert results["dropped_fraction_falls_monotonically"]
    assert rows["4"]["tokens_per_s"]["mean"] == pytest.approx(250.0)  # the compile step is left out
    assert rows["1"]["heldout_macro_bpb"]["per_seed"] == pytest.approx([2.45, 2.46])
    assert results["bpb_highest_minus_lowest_cf"]["mean"] == pytest.approx(-0.15)
    assert results["interleaved_tokens_per_s"] == {"1": 100.0, "2": 50.0, "4": 25.0}


@pytest.mark.slow
def test_throughput_times_every_factor_in_each_round(tmp_path: Path) -> None:
    model = MoeConfig(
        vocab_size=64, hidden_dim=16, intermediate_dim=8, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=None
    )
    results = time_capacity_factors(ThroughputConfig(model, (1.0, 4.0), 2, 8, rounds=2), str(tmp_path))
    assert set(results["factors"]) == {"1", "4"} and results["tokens_per_step"] == 16
    assert all(len(row["seconds"]) == 2 and row["tokens_per_s"] > 0 for row in results["factors"].values())
    assert json.loads((tmp_path / THROUGHPUT_FILE).read_text())["rounds"] == 2


def test_load_balance_compares_the_final_max_load_with_uniform_and_collapsed(tmp_path: Path) -> None:
    steps = 100
    rising = np.linspace(0.125, 0.5, steps)
    runs = {
        "lb 0": (_run(tmp_path / "off", steps, 2.5, **{"moe/max_load": rising}),),
        "lb 0.01": (_run(tmp_path / "on", steps, 2.4, **{"moe/max_load": np.full(steps, 0.14)}),),
    }
    for path in runs["lb 0"] + runs["lb 0.01"]:  # the other router series, constant
        records = [json.loads(line) for line in Path(path, "metrics.jsonl").read_text().splitlines()]
        for record in records:
            record.update({"moe/load_balancing_loss": 1.0, "moe/router_entropy": 2.0, "moe/dropped_fraction": 0.1})
        Path(path, "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    results = analyze_load_balance(
        LoadBalanceConfig(runs=runs, num_experts=8, experts_per_token=2, tail_steps=10), str(tmp_path / "out")
    )
    assert results["arms"]["lb 0"]["max_load"]["mean"] == pytest.approx(rising[-10:].mean())
    assert results["arms"]["lb 0.01"]["max_load"]["mean"] == pytest.approx(0.14)
    assert results["arms"]["lb 0"]["max_load_first_step"] == [pytest.approx(0.125)]
    assert results["arms"]["lb 0.01"]["heldout_macro_bpb"]["per_seed"] == [2.4]
    assert (results["uniform_max_load"], results["collapsed_max_load"]) == (0.125, 0.5)


def test_mean_and_se_of_one_value_has_no_spread() -> None:
    assert mean_and_se([2.0]) == {"mean": 2.0, "se": 0.0, "n": 1}
