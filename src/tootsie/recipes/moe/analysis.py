"""The MoE experiments' analyses: held-out BPB across seeds, drops and throughput per capacity factor, router load.

Each analysis reads the runs' metrics.jsonl and writes `results.json` and
`figure.png` (`recipes.cases.common.write_results`):

- `analyze_moe_vs_dense`: the final held-out macro BPB of each seed of two
  arms, their means and standard errors, the difference (dense − MoE, positive
  when MoE is better) with its standard error from the two arms' errors
  (unpaired) and from the per-seed differences (paired: seed s of both arms
  reads the same batches), and whether the difference exceeds 2 SE.
- `analyze_capacity`: per capacity factor, the dropped fraction (mean over
  the steps after `skip_steps`), held-out BPB (mean ± SE over seeds) next to
  the seeds' numbers, and tokens/s (median over steps after `skip_steps`).
- `analyze_load_balance`: `moe/max_load` over steps per arm, its mean over the
  last `tail_steps` steps against 1/E (uniform) and 1/k (every token on the
  same k experts), and each arm's held-out BPB.

Example: BPB 2.10, 2.12, 2.11 (MoE) against 2.20, 2.19, 2.21 (dense) give
means 2.110 ± 0.006 and 2.200 ± 0.006, a difference of 0.090 ± 0.008
(unpaired), 11 SE: MoE wins.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json
from tootsie.recipes.cases.common import metric_series, trailing_mean, write_results

BPB = "eval/bpb/macro_avg"
SEEDS_CF = {"1": {"macro": 2.459, "mfu": 0.19}, "4": {"macro": 2.290, "mfu": 0.38}}
"""The seeds' 1e22 run (weekly update): Paloma macro loss and MFU at cf 1.0 and cf 4.0 (TPU, d3200)."""


def final_value(run: str, name: str = BPB) -> float:
    """The last logged value of `name` in a run (its final evaluation)."""
    values = metric_series(run, name)[1]
    if not len(values):
        raise TootsieError(f"{Path(run) / 'metrics.jsonl'} has no {name!r}; train the run with an eval config")
    return float(values[-1])


def mean_and_se(values: list[float]) -> dict[str, float]:
    """Mean and standard error (sample standard deviation / √n; 0 for one value)."""
    n = len(values)
    se = float(np.std(values, ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    return {"mean": float(np.mean(values)), "se": se, "n": n}


def median_tokens_per_s(run: str, skip_steps: int) -> float:
    """Median tokens/s of a run's steps from `skip_steps` on (the first step compiles)."""
    steps, rate = metric_series(run, "tokens_per_s")
    return float(np.median(rate[steps >= skip_steps]))


def _finish(figure: Figure, axes: tuple[Axes, ...], output_path: str, results: dict[str, object]) -> dict[str, object]:
    """Grid the axes, lay the figure out, write it with `results.json`; return the results."""
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.tight_layout()
    return write_results(output_path, results, figure)


def _bpb_by_seed(runs: tuple[str, ...]) -> dict[str, object]:
    values = [final_value(run) for run in runs]
    return {"per_seed": values, **mean_and_se(values)}


@dataclass(frozen=True)
class MoeVsDenseConfig:
    """The seeds of the MoE and dense arms, and their parameter counts."""

    runs: dict[str, tuple[str, ...]]
    """"moe" and "dense" → their runs, seed by seed (seed s of both read the same batches)."""
    parameters: dict[str, dict[str, int]]
    """Arm → {"total": ..., "active": ...} parameter counts (with embeddings)."""
    smooth_steps: int = 20
    """Trailing-mean length of the plotted training loss."""

    def __post_init__(self) -> None:
        if set(self.runs) != {"moe", "dense"} or len(self.runs["moe"]) != len(self.runs["dense"]):
            raise ValueError(f"runs must map 'moe' and 'dense' to as many seeds each, got {self.runs}")


def analyze_moe_vs_dense(config: MoeVsDenseConfig, output_path: str) -> dict[str, object]:
    """Held-out macro BPB of MoE against dense over seeds: means, SEs, the difference and whether it exceeds 2 SE."""
    arms = {arm: _bpb_by_seed(runs) for arm, runs in config.runs.items()}
    paired = [d - m for d, m in zip(arms["dense"]["per_seed"], arms["moe"]["per_seed"], strict=True)]
    difference = arms["dense"]["mean"] - arms["moe"]["mean"]
    se = math.hypot(arms["dense"]["se"], arms["moe"]["se"])
    results = {
        "metric": BPB,
        "arms": {arm: {**arms[arm], "parameters": config.parameters[arm]} for arm in arms},
        "difference_dense_minus_moe": {"mean": difference, "se": se, "z": difference / se if se else None},
        "paired_difference": mean_and_se(paired),
        "moe_beats_dense_by_2se": bool(difference > 2 * se),
    }
    figure = Figure(figsize=(11, 4.5))
    curves, points = figure.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    colors = {"moe": "tab:red", "dense": "tab:blue"}
    for arm, runs in config.runs.items():
        for index, run in enumerate(runs):
            steps, loss = metric_series(run, "loss")
            curves.plot(
                steps,
                trailing_mean(loss, config.smooth_steps),
                color=colors[arm],
                alpha=0.7,
                label=f"{arm} ({config.parameters[arm]['active']:,} active)" if index == 0 else None,
            )
        values = arms[arm]["per_seed"]
        x = 0 if arm == "dense" else 1
        points.scatter([x] * len(values), values, color=colors[arm], alpha=0.6)
        points.errorbar(x + 0.15, arms[arm]["mean"], yerr=2 * arms[arm]["se"], fmt="o", color="black", capsize=4)
    curves.set_xlabel("step")
    curves.set_ylabel(f"train loss, {config.smooth_steps}-step mean")
    curves.set_ylim(top=float(np.percentile(metric_series(config.runs["dense"][0], "loss")[1], 90)))
    curves.legend()
    points.set_xticks([0, 1], ["dense", "MoE 8×k2"])
    points.set_xlim(-0.5, 1.5)
    points.set_ylabel("held-out macro BPB (seeds; mean ± 2 SE)")
    points.set_title(f"dense − MoE = {difference:.4f} ± {se:.4f}")
    return _finish(figure, (curves, points), output_path, results)


@dataclass(frozen=True)
class CapacityConfig:
    """The seeds of each capacity factor's runs."""

    runs: dict[str, tuple[str, ...]]
    """Capacity factor (as written, e.g. "1.25") → its runs, seed by seed."""
    throughput: str | None = None
    """A `throughput.json` of interleaved step timings per factor (`recipes.moe.throughput`), shown beside the runs'."""
    skip_steps: int = 5
    """Steps left out of the dropped-fraction mean and the throughput median (compile, early routing)."""

    def __post_init__(self) -> None:
        if len(self.runs) < 2:
            raise ValueError(f"runs needs at least two capacity factors, got {sorted(self.runs)}")


def analyze_capacity(config: CapacityConfig, output_path: str) -> dict[str, object]:
    """Dropped fraction, held-out BPB and tokens/s per capacity factor; whether drops fall as the factor grows."""
    factors = sorted(config.runs, key=float)
    rows = {}
    for cf in factors:
        dropped = [
            float(values[steps >= config.skip_steps].mean())
            for steps, values in (metric_series(run, "moe/dropped_fraction") for run in config.runs[cf])
        ]
        rate = [median_tokens_per_s(run, config.skip_steps) for run in config.runs[cf]]
        rows[cf] = {
            "dropped_fraction": {"per_seed": dropped, **mean_and_se(dropped)},
            "heldout_macro_bpb": _bpb_by_seed(config.runs[cf]),
            "tokens_per_s": {"per_seed": rate, **mean_and_se(rate)},
        }
    drops = [rows[cf]["dropped_fraction"]["mean"] for cf in factors]
    lo, hi = rows[factors[0]]["heldout_macro_bpb"], rows[factors[-1]]["heldout_macro_bpb"]
    results = {
        "capacity_factors": rows,
        "dropped_fraction_falls_monotonically": bool(all(a > b for a, b in zip(drops, drops[1:]))),
        "bpb_highest_minus_lowest_cf": {
            "mean": hi["mean"] - lo["mean"],
            "se": math.hypot(hi["se"], lo["se"]),
        },
        "seeds_1e22": SEEDS_CF,
        "interleaved_tokens_per_s": None
        if config.throughput is None
        else {cf: row["tokens_per_s"] for cf, row in read_json(config.throughput)["factors"].items()},
    }
    figure = Figure(figsize=(14, 4.5))
    drop_axis, bpb_axis, rate_axis = figure.subplots(1, 3)
    for cf in factors:
        steps, values = metric_series(config.runs[cf][0], "moe/dropped_fraction")
        drop_axis.plot(steps, trailing_mean(values, 10), label=f"cf {cf}")
    x = [float(cf) for cf in factors]
    for axis, key, label in (
        (bpb_axis, "heldout_macro_bpb", "held-out macro BPB (mean ± 2 SE)"),
        (rate_axis, "tokens_per_s", "tokens/s (runs: median step, mean ± 2 SE)"),
    ):
        for cf in factors:
            axis.scatter([float(cf)] * len(rows[cf][key]["per_seed"]), rows[cf][key]["per_seed"], color="gray", s=12)
        axis.errorbar(
            x,
            [rows[cf][key]["mean"] for cf in factors],
            yerr=[2 * rows[cf][key]["se"] for cf in factors],
            fmt="o-",
            label="runs",
        )
        axis.set_ylabel(label)
    if results["interleaved_tokens_per_s"] is not None:
        timed = results["interleaved_tokens_per_s"]
        rate_axis.plot([float(cf) for cf in timed], list(timed.values()), "s--", label="gradient step, interleaved")
        rate_axis.legend(fontsize=8)
    for axis in (bpb_axis, rate_axis):
        axis.set_xscale("log", base=2)
        axis.set_xticks(x, factors)
        axis.set_xlabel("capacity factor")
    drop_axis.set_xlabel("step")
    drop_axis.set_ylabel("moe/dropped_fraction, 10-step mean (seed 0)")
    drop_axis.legend()
    bpb_axis.set_title("seeds (1e22, TPU): cf 1 macro 2.459, cf 4 2.290", fontsize=9)
    rate_axis.set_title("seeds: MFU 19 % at cf 1, 38 % at cf 4", fontsize=9)
    return _finish(figure, (drop_axis, bpb_axis, rate_axis), output_path, results)


@dataclass(frozen=True)
class LoadBalanceConfig:
    """Runs with the load-balancing loss off and on, and the router's shape."""

    runs: dict[str, tuple[str, ...]]
    """Arm label (e.g. "lb 0", "lb 0.01") → its runs, seed by seed."""
    num_experts: int
    """E: uniform load is 1/E."""
    experts_per_token: int
    """k: every token on the same k experts is a load of 1/k."""
    tail_steps: int = 50
    """Steps at the end whose mean max load is reported."""

    def __post_init__(self) -> None:
        if not self.runs or self.tail_steps <= 0:
            raise ValueError(f"need runs and a positive tail_steps, got {sorted(self.runs)}, {self.tail_steps}")


def analyze_load_balance(config: LoadBalanceConfig, output_path: str) -> dict[str, object]:
    """`moe/max_load` and the load-balancing loss over steps per arm; the final max load against 1/E and 1/k."""
    names = ("moe/max_load", "moe/load_balancing_loss", "moe/router_entropy", "moe/dropped_fraction")
    arms = {}
    figure = Figure(figsize=(12, 4.5))
    load_axis, loss_axis = figure.subplots(1, 2)
    for (arm, runs), color in zip(config.runs.items(), ("tab:red", "tab:blue", "tab:green", "tab:purple")):
        tails = {name: [] for name in names}
        for index, run in enumerate(runs):
            for name in names:
                tails[name].append(float(metric_series(run, name)[1][-config.tail_steps :].mean()))
            for axis, name in ((load_axis, "moe/max_load"), (loss_axis, "moe/load_balancing_loss")):
                steps, values = metric_series(run, name)
                axis.plot(steps, trailing_mean(values, 5), color=color, alpha=0.7, label=arm if index == 0 else None)
        arms[arm] = {name.removeprefix("moe/"): {"per_seed": v, **mean_and_se(v)} for name, v in tails.items()}
        arms[arm]["max_load_first_step"] = [float(metric_series(run, "moe/max_load")[1][0]) for run in runs]
        arms[arm]["heldout_macro_bpb"] = _bpb_by_seed(runs)
    uniform, collapsed = 1 / config.num_experts, 1 / config.experts_per_token
    for value, label in ((uniform, f"1/E = {uniform:g} (uniform)"), (collapsed, f"1/k = {collapsed:g}")):
        load_axis.axhline(value, color="gray", linestyle=":", linewidth=1)
        load_axis.annotate(label, (0, value), fontsize=8, va="bottom")
    load_axis.set_ylabel("moe/max_load (layer mean), 5-step mean")
    loss_axis.set_ylabel("moe/load_balancing_loss (1.0 uniform)")
    for axis in (load_axis, loss_axis):
        axis.set_xlabel("step")
        axis.legend()
    results = {
        "uniform_max_load": uniform,
        "collapsed_max_load": collapsed,
        "tail_steps": config.tail_steps,
        "arms": arms,
    }
    return _finish(figure, (load_axis, loss_axis), output_path, results)
