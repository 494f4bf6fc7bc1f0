"""Phenomenon `muon-divergence`: Muon against AdamW over a learning-rate grid, and the LR at which each diverges.

The 32B retrospective's Phase 2 restarted the spiking Llama run with Muon at a
higher effective LR (2e-3, against AdamW's 7e-4 peak) on the Adam-style
schedule; it made short-term progress, then the spikes came back (the paper
outline's figure `32b-muon-can-into-space.png`). At toy scale the question is
whether Muon's stable LR range is narrower than AdamW's: per seed, each arm
trains the case Llama (no QK-norm) at every LR of its grid, on the same batches,
with a 10 % warmup and then the peak LR held (`phenomenon_train_config`).

Comparable units: `MuonConfig` scales each Muon update to AdamW's RMS
(`consistent_rms=0.2`) and gives its AdamW branch (embeddings, norms, lm_head)
the same schedule (`muon_lr_ratio=1`), so one LR means one update size in both
arms. Even so, each arm is read against its own best LR: both grids step by the
same ratio (√10), each spans its arm's best LR (tuned on seed 0), and a
divergence LR is reported as a multiple of that seed's best LR and as grid steps.

Definitions (`analyze_muon_divergence`), per arm and seed:

    final loss     mean train loss of the last `final_window` steps
    best LR        the grid LR with the lowest final loss
    diverged       `train.divergence` stopped the run (diverged.json), or its final
                   loss is more than `margin` nats above the best LR's
    divergence LR  the smallest grid LR above the best one that diverged (None: none
                   in the grid, so the arm's range reaches past it)
    factor, steps  divergence LR / best LR, and the grid steps between them

Verdict (`verdict`): Muon's range is narrower in a seed when it diverges fewer
grid steps above its best LR than AdamW above its own (`narrower`; a missing
divergence LR counts as infinitely many). Reproduced when it is narrower in
every seed, not reproduced when in none, partial otherwise. The signals at each
arm's divergence LR (largest pre-softmax attention logit, largest output logit,
lm_head and embedding norms, update and gradient norms) are reported beside the
same signals at its best LR, with their growth between the two, so the cause
can be read off.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from jaxtyping import Float, Int64
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.trackers import METRICS_FILE
from tootsie.recipes.phenomena.common import SEEDS, GridRun, phenomenon_train_config
from tootsie.recipes.phenomena.registry import results_step_name
from tootsie.recipes.phenomena.results import over_seeds, write_phenomenon
from tootsie.recipes.tiny.data import TinyData, tiny_data_steps
from tootsie.train.divergence import read_divergence
from tootsie.train.optimizer import AdamWConfig, MuonConfig

NAME = "muon-divergence"
ARMS = ("adamw", "muon")
OPTIMIZERS = {"adamw": AdamWConfig(weight_decay=0.1), "muon": MuonConfig(weight_decay=0.1)}
"""Both arms: weight decay 0.1 on matrices, gradient clipping at 1.0; Muon's update RMS matched to AdamW's (0.2)."""
SIGNALS = ("aux/attn_logit_max", "aux/logit_max", "lm_head_norm", "embed_norm", "update_norm", "grad_norm")
"""Per-step metrics reported at the best and the divergence LR (the attention logit's max is over layers)."""
COLORS = {"adamw": "tab:red", "muon": "tab:blue"}


@dataclass(frozen=True)
class GridPlan:
    """Run length and LR grid per arm of one scale."""

    num_steps: int
    """Steps of each run (10 % warmup, then the peak LR held)."""
    exponents: dict[str, tuple[float, ...]]
    """Arm → the base-10 exponents of its peak LRs, increasing by one step (the same in both arms)."""
    final_window: int
    """Steps averaged for the final loss."""

    def grid(self, arm: str) -> tuple[float, ...]:
        """The peak LRs of `arm`, increasing."""
        return tuple(10.0**exponent for exponent in self.exponents[arm])


PLANS = {
    # half-decade grids tuned on seed 0 at 100 steps (best: AdamW 3e-3, Muon 1e-2; first 1-nat divergence: AdamW
    # 1e-1, Muon 3e-1), each from a step below its best to one past its divergence LR
    "tiny": GridPlan(
        num_steps=100,
        exponents={"adamw": (-3.0, -2.5, -2.0, -1.5, -1.0), "muon": (-2.5, -2.0, -1.5, -1.0, -0.5, 0.0)},
        final_window=10,
    ),
    # both arms at 1e-2 and 1 (on the tiny data the guard stops both at 1 within 30 steps)
    "smoke": GridPlan(num_steps=30, exponents={"adamw": (-2.0, 0.0), "muon": (-2.0, 0.0)}, final_window=5),
}
"""Per scale: `tiny` is the documented grid (3 seeds), `smoke` two LRs per arm and one seed (the tests)."""


@dataclass(frozen=True)
class MuonDivergenceConfig:
    """The grid's runs and how divergence is read off them."""

    runs: tuple[GridRun, ...]
    """Every run of every arm, LR and seed."""
    final_window: int = 10
    """Steps averaged for the final loss."""
    margin: float = 1.0
    """A run whose final loss is more than this above its arm's best (same seed) has diverged (nats/token)."""

    def __post_init__(self) -> None:
        arms = {run.arm for run in self.runs}
        if arms != set(ARMS):
            raise ValueError(f"runs has arms {sorted(arms)}; give runs of {list(ARMS)}")
        seeds = {arm: {run.seed for run in self.runs if run.arm == arm} for arm in ARMS}
        if seeds["adamw"] != seeds["muon"]:
            raise ValueError(f"the arms have different seeds, {seeds}; run every seed in both")
        if self.final_window < 1 or self.margin <= 0:
            raise ValueError(f"need final_window >= 1 and margin > 0, got {self.final_window=}, {self.margin=}")
        steps = {arm: np.diff(np.log10(self.grid(arm))) for arm in ARMS}
        every = np.concatenate(list(steps.values()))
        if len(steps["adamw"]) == 0 or len(steps["muon"]) == 0 or not np.allclose(every, every[0], atol=1e-9):
            raise ValueError(
                f"each arm's LRs must be a grid of one common ratio, of at least two LRs; got "
                f"{ {arm: self.grid(arm) for arm in ARMS} } (use 10 ** exponent in equal steps)"
            )

    def grid(self, arm: str) -> list[float]:
        """The LRs of `arm`'s runs, increasing."""
        return sorted({run.lr for run in self.runs if run.arm == arm})

    @property
    def grid_ratio(self) -> float:
        """The ratio of consecutive LRs, shared by both arms' grids."""
        lrs = self.grid("adamw")
        return lrs[1] / lrs[0]


def signal_series(run: str | Path, name: str) -> tuple[Int64[np.ndarray, " n"], Float[np.ndarray, " n"]]:
    """Steps and finite values of metric `name` of a run; a per-layer list becomes its maximum over layers."""
    points = []
    for record in read_metrics(Path(run) / METRICS_FILE).records:
        value = record.get(name)
        if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
            value = max(value)
        if isinstance(value, (int, float)) and np.isfinite(value):
            points.append((record["step"], float(value)))
    steps, values = zip(*points) if points else ((), ())
    return np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)


def final_loss(run: str | Path, window: int) -> float | None:
    """Mean loss of the run's last `window` logged steps; None when `train.divergence` stopped it."""
    if read_divergence(run) is not None:
        return None
    _, losses = signal_series(run, "loss")
    return float(losses[-window:].mean()) if len(losses) else None


def divergence(lrs: Sequence[float], losses: Sequence[float | None], margin: float) -> dict[str, object]:
    """One arm and seed: best LR, which LRs diverged, the divergence LR above the best, its factor and grid steps.

    `losses[i]` is the final loss at `lrs[i]` (increasing), None for a run the divergence guard stopped.
    """
    finite = [loss for loss in losses if loss is not None]
    if not finite:
        raise ValueError(f"every run of the grid {list(lrs)} was stopped as diverged; lower the grid")
    best_index = int(np.argmin([np.inf if loss is None else loss for loss in losses]))
    diverged = [loss is None or loss > min(finite) + margin for loss in losses]
    above = [index for index in range(best_index + 1, len(lrs)) if diverged[index]]
    return {
        "best_lr": lrs[best_index],
        "best_loss": min(finite),
        "diverged": [lr for lr, bad in zip(lrs, diverged, strict=True) if bad],
        "divergence_lr": lrs[above[0]] if above else None,
        "factor": lrs[above[0]] / lrs[best_index] if above else None,
        "grid_steps": above[0] - best_index if above else None,
    }


def narrower(adamw_steps: int | None, muon_steps: int | None) -> bool:
    """Whether Muon diverges fewer grid steps above its best LR than AdamW above its own (None: not in the grid)."""
    return muon_steps is not None and (adamw_steps is None or muon_steps < adamw_steps)


def verdict(adamw_steps: Sequence[int | None], muon_steps: Sequence[int | None]) -> str:
    """reproduced: Muon's range above its best LR is `narrower` in every seed; not_reproduced: in none; partial: in
    some."""
    per_seed = [narrower(a, m) for a, m in zip(adamw_steps, muon_steps, strict=True)]
    return "reproduced" if all(per_seed) else ("not_reproduced" if not any(per_seed) else "partial")


def _signal_summary(run: str, window: int) -> dict[str, float]:
    """A run's signals: the largest value over the run, and the mean of its last `window` logged steps."""
    summary = {}
    for name in SIGNALS:
        _, values = signal_series(run, name)
        if len(values):
            summary[f"{name}/max"] = float(values.max())
            summary[f"{name}/final"] = float(values[-window:].mean())
    return summary


def _common(summaries: Sequence[Mapping[str, float]]) -> list[str]:
    """The signal names every summary has, sorted."""
    return sorted(set.intersection(*(set(s) for s in summaries))) if summaries else []


def _over_runs(summaries: Sequence[Mapping[str, float]]) -> dict[str, object]:
    """`_signal_summary`s of one run per seed, as `over_seeds` per signal (those every run logged)."""
    return {name: over_seeds([s[name] for s in summaries]) for name in _common(summaries)}


def analyze_muon_divergence(config: MuonDivergenceConfig, output_path: str) -> dict[str, object]:
    """Final loss per arm, LR and seed; each arm's best and divergence LR per seed; signals; the verdict."""
    seeds = sorted({run.seed for run in config.runs})
    grids = {arm: config.grid(arm) for arm in ARMS}
    paths = {(run.arm, run.lr, run.seed): str(run.run) for run in config.runs}
    losses = {key: final_loss(path, config.final_window) for key, path in paths.items()}
    per_seed = {
        arm: [divergence(grids[arm], [losses[arm, lr, seed] for lr in grids[arm]], config.margin) for seed in seeds]
        for arm in ARMS
    }
    arms = {arm: _arm_numbers(grids[arm], seeds, losses, paths, per_seed, arm, config.final_window) for arm in ARMS}
    steps = {arm: [s["grid_steps"] for s in per_seed[arm]] for arm in ARMS}
    numbers = {
        "seeds": seeds,
        "final_window": config.final_window,
        "margin_nats": config.margin,
        "grid_ratio": config.grid_ratio,
        "arms": arms,
        "muon_minus_adamw_best_loss": over_seeds(
            [m["best_loss"] - a["best_loss"] for a, m in zip(per_seed["adamw"], per_seed["muon"], strict=True)]
        ),
        "muon_narrower_per_seed": [narrower(a, m) for a, m in zip(steps["adamw"], steps["muon"], strict=True)],
        "muon_minus_adamw_grid_steps_per_seed": [
            None if a is None or m is None else m - a for a, m in zip(steps["adamw"], steps["muon"], strict=True)
        ],
    }
    figure = _figure(grids, seeds, losses, per_seed, paths, config.margin)
    return write_phenomenon(output_path, NAME, verdict(steps["adamw"], steps["muon"]), numbers, figure)


def _arm_numbers(
    grid: list[float],
    seeds: list[int],
    losses: Mapping[tuple[str, float, int], float | None],
    paths: Mapping[tuple[str, float, int], str],
    per_seed: Mapping[str, list[dict[str, object]]],
    arm: str,
    window: int,
) -> dict[str, object]:
    """One arm's numbers: per seed and per LR, over seeds, and the signals at its best and divergence LRs."""
    summaries = per_seed[arm]
    found = [s for s in summaries if s["grid_steps"] is not None]
    by_lr = {}
    for lr in grid:
        finals = [losses[arm, lr, seed] for seed in seeds]
        excess = [loss - s["best_loss"] for loss, s in zip(finals, summaries, strict=True) if loss is not None]
        by_lr[f"lr{lr:g}"] = {
            "final_loss": finals,
            "stopped": [loss is None for loss in finals],
            "diverged": [lr in s["diverged"] for s in summaries],
            "above_best": over_seeds(excess) if excess else None,
        }
    best = {
        seed: _signal_summary(paths[arm, s["best_lr"], seed], window) for s, seed in zip(summaries, seeds, strict=True)
    }
    diverging = {
        seed: _signal_summary(paths[arm, s["divergence_lr"], seed], window)
        for s, seed in zip(summaries, seeds, strict=True)
        if s["divergence_lr"] is not None
    }
    growth = {
        name: over_seeds([diverging[seed][name] / best[seed][name] for seed in diverging])
        for name in _common(list(diverging.values()) + [best[seed] for seed in diverging])
        if name.endswith("/max")
    }
    return {
        "grid": grid,
        "per_seed": dict(zip(map(str, seeds), summaries, strict=True)),
        "best_lr": over_seeds([s["best_lr"] for s in summaries]),
        "best_loss": over_seeds([s["best_loss"] for s in summaries]),
        "divergence_lr": over_seeds([s["divergence_lr"] for s in found]) if found else None,
        "divergence_factor": over_seeds([s["factor"] for s in found]) if found else None,
        "divergence_grid_steps": over_seeds([s["grid_steps"] for s in found]) if found else None,
        "seeds_without_divergence": len(seeds) - len(found),
        "by_lr": by_lr,
        "signals_at_best_lr": _over_runs(list(best.values())),
        "signals_at_divergence_lr": _over_runs(list(diverging.values())) if diverging else None,
        "signal_growth_divergence_over_best": growth or None,
        "largest_growth": max(growth, key=lambda name: growth[name]["mean"]) if growth else None,
    }


def _loss_panel(
    axis: Axes,
    grids: Mapping[str, list[float]],
    seeds: list[int],
    losses: Mapping[tuple[str, float, int], float | None],
    per_seed: Mapping[str, list[dict[str, object]]],
    margin: float,
) -> None:
    """Final loss against LR per arm: seed mean ± sd of the finished runs, each seed's point, diverged runs as x."""
    ceiling = max(loss for loss in losses.values() if loss is not None) + 0.5
    for arm in ARMS:
        color = COLORS[arm]
        means, sds = [], []
        for lr in grids[arm]:
            values = [losses[arm, lr, seed] for seed in seeds if losses[arm, lr, seed] is not None]
            means.append(np.mean(values) if values else np.nan)
            sds.append(np.std(values, ddof=1) if len(values) > 1 else 0.0)
        axis.errorbar(grids[arm], means, yerr=sds, color=color, marker="o", capsize=3, label=f"{arm} (mean ± sd)")
        for seed, summary in zip(seeds, per_seed[arm], strict=True):
            for lr in grids[arm]:
                loss, bad = losses[arm, lr, seed], lr in summary["diverged"]
                y = ceiling if loss is None else loss
                axis.scatter(lr, y, color=color, marker="x" if bad else ".", s=50 if bad else 15, zorder=3)
        best = np.mean([s["best_loss"] for s in per_seed[arm]])
        axis.axhline(best + margin, color=color, linestyle=":", linewidth=0.8, label=f"{arm} best + {margin:g} nat")
    axis.set_xscale("log")
    axis.set_xlabel("peak LR (Muon: update RMS matched to AdamW's)")
    axis.set_ylabel("final train loss")
    axis.set_title(f"Final loss vs LR, seeds {seeds} (x: diverged; top row: stopped by the guard)", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)


def _figure(
    grids: Mapping[str, list[float]],
    seeds: list[int],
    losses: Mapping[tuple[str, float, int], float | None],
    per_seed: Mapping[str, list[dict[str, object]]],
    paths: Mapping[tuple[str, float, int], str],
    margin: float,
) -> Figure:
    """Left: final loss vs LR per arm. Right: signals over steps at each arm's divergence LR (first seed)."""
    figure = Figure(figsize=(15, 10))
    grid = figure.add_gridspec(4, 3)
    _loss_panel(figure.add_subplot(grid[:, 0]), grids, seeds, losses, per_seed, margin)
    panels = (("loss", "train loss"), *((name, name) for name in SIGNALS), ("aux/log_z", "mean log Z"))
    axes = [figure.add_subplot(grid[i // 2, 1 + i % 2]) for i in range(len(panels))]
    for arm in ARMS:
        first = per_seed[arm][0]
        for lr, style in ((first["best_lr"], "-"), (first["divergence_lr"], "--")):
            if lr is None:
                continue
            run = paths[arm, lr, seeds[0]]
            for axis, (name, _) in zip(axes, panels, strict=True):
                steps, values = signal_series(run, name)
                axis.plot(steps, values, color=COLORS[arm], linestyle=style, linewidth=1, label=f"{arm} lr {lr:.3g}")
    for axis, (_, label) in zip(axes, panels, strict=True):
        axis.set_ylabel(label, fontsize=8)
        axis.set_yscale("log")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=7, title=f"seed {seeds[0]}: best (—), divergence LR (--)", title_fontsize=7)
    figure.tight_layout()
    return figure


def grid_steps(plan: GridPlan, data: TinyData, seeds: Sequence[int]) -> list[Step]:
    """Per seed, arm and LR one run on `data` (same batches within a seed), then the results step."""
    steps, grid = [], []
    for seed in seeds:
        for arm in ARMS:
            for lr in plan.grid(arm):
                config = phenomenon_train_config(
                    data, num_steps=plan.num_steps, peak_lr=lr, optimizer=OPTIMIZERS[arm], seed=seed, data_seed=seed
                )
                steps.append(Step(f"phenomena/{NAME}/{arm}/lr{lr:g}-seed{seed}", run_training, config))
                grid.append(GridRun(arm=arm, lr=lr, seed=seed, run=steps[-1].ref()))
    analysis = MuonDivergenceConfig(runs=tuple(grid), final_window=plan.final_window)
    return [*steps, Step(results_step_name(NAME), analyze_muon_divergence, analysis)]


def build_steps(scale: str) -> list[Step]:
    """The grid of `scale` on the tiny data, with the scale's seeds."""
    return grid_steps(PLANS[scale], tiny_data_steps(), SEEDS[scale])
