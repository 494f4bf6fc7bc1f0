"""Phenomenon `qk-norm-spikes`: an LR grid with and without QK-norm, and the attention-logit growth behind its failures.

The 32B run spiked until it switched to QK-norm (Marin 32B retrospective,
Phases 1-3), which cites Wortsman et al. 2023 ("Small-scale proxies for
large-scale Transformer training instabilities"): at small scale a high
learning rate makes the attention logits grow until softmax saturates, and
qk-layernorm removes that failure. Their method, at toy scale: train the
spiking setup (`spiking.spiking_train_config`) over an LR grid in three arms,
every (arm, LR) with each seed, all on the same batches:

    llama        no QK-norm
    qk-norm      the same model with QK-norm (`LlamaConfig(qk_norm=True)`)
    update-clip  no QK-norm, with update-norm clipping (`StabilityConfig`, 2σ over a rolling window), at `clip_lrs`

Criteria (`judge`, the issue's, seeds aggregated by their mean): an LR
*fails* in the llama arm when its mean final loss is more than `fail_margin`
(1 nat) above the arm's best LR, or the spike classifier finds >= `min_spikes`
(3) spikes per seed on average, or most seeds diverged. At each failing LR
the qk-norm arm is *fixed* when its mean final loss is within `near_margin`
(0.1 nat) of the qk-norm arm's best LR and the llama arm's largest attention
logit (mean over seeds of each run's maximum) is >= `logit_ratio` (10) times
the qk-norm arm's. Verdict: `reproduced` when >= `min_lrs` (2) LRs fail and
are fixed; `partial` when some failing LR meets one of the two qk-norm
conditions; `not_reproduced` otherwise. The update-clip arm is judged
against the llama arm's best: it stops the failure at an LR when that LR
does not fail there.
"""

from dataclasses import dataclass, field

import numpy as np
from matplotlib.figure import Figure

from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.recipes.phenomena.common import SEEDS, GridRun
from tootsie.recipes.phenomena.registry import results_step_name
from tootsie.recipes.phenomena.results import over_seeds, write_phenomenon
from tootsie.recipes.phenomena.spiking import RunSignals, read_run, spike_summary, spiking_train_config
from tootsie.recipes.tiny.data import TinyData, tiny_data_steps
from tootsie.train.stability import StabilityConfig

NAME = "qk-norm-spikes"
ARMS = ("llama", "qk-norm", "update-clip")
CLIP = StabilityConfig(clip_update_window=32, clip_update_sigma=2.0)
"""Update clipping of the update-clip arm: the 32B run's 2σ, over 32 steps (its 128 of 80k, shortened for 300)."""


@dataclass(frozen=True)
class GridScale:
    """The grid at one scale."""

    num_steps: int
    """Steps per run."""
    lrs: tuple[float, ...]
    """Peak learning rates of the llama and qk-norm arms."""
    clip_lrs: tuple[float, ...]
    """Peak learning rates of the update-clip arm (where the llama arm fails)."""
    seeds: tuple[int, ...]
    """Initialization seeds (the data order is the same for all)."""


SCALES = {
    "tiny": GridScale(num_steps=300, lrs=(1e-2, 1e-1, 3e-1), clip_lrs=(1e-1, 3e-1), seeds=SEEDS["tiny"]),
    "smoke": GridScale(num_steps=40, lrs=(3e-3, 1e-1), clip_lrs=(1e-1,), seeds=SEEDS["smoke"]),
}
"""`tiny`: the documented grid; `smoke`: two LRs, one seed, a short run (the tests)."""


@dataclass(frozen=True)
class SpikeCriteria:
    """The issue's thresholds (module docstring)."""

    fail_margin: float = 1.0
    """An LR fails when its final loss is more than this above the arm's best (nats)."""
    min_spikes: int = 3
    """...or when the classifier finds this many spikes per run (mean over seeds)."""
    near_margin: float = 0.1
    """QK-norm fixes a failing LR when its final loss is within this of its arm's best (nats)..."""
    logit_ratio: float = 10.0
    """...and the llama arm's largest attention logit is at least this many times the qk-norm arm's."""
    min_lrs: int = 2
    """Failing LRs that QK-norm must fix for `reproduced`."""


@dataclass(frozen=True)
class QKSpikesAnalysisConfig:
    """The grid's runs and how they are judged."""

    runs: tuple[GridRun, ...]
    """Every run of every arm, LR and seed."""
    criteria: SpikeCriteria = field(default_factory=SpikeCriteria)
    """The thresholds of `judge`."""
    tail: int = 20
    """Final loss: mean train loss over this many last steps."""

    def __post_init__(self) -> None:
        arms = {run.arm for run in self.runs}
        if not {"llama", "qk-norm"} <= arms <= set(ARMS):
            raise ValueError(f"runs have arms {sorted(arms)}; give llama and qk-norm runs (and update-clip)")


@dataclass(frozen=True)
class Cell:
    """One arm at one LR, over its seeds."""

    final_loss: float
    """Mean over seeds of the final loss."""
    spikes: float
    """Mean over seeds of the classifier's spike count."""
    diverged: float
    """Fraction of seeds that diverged."""
    peak_attn_logit: float
    """Mean over seeds of each run's largest attention logit."""


def cell(runs: list[RunSignals]) -> Cell:
    """Aggregate one (arm, LR)'s seeds by their mean."""
    return Cell(
        final_loss=float(np.mean([run.final_loss for run in runs])),
        spikes=float(np.mean([len(run.spikes) for run in runs])),
        diverged=float(np.mean([run.diverged for run in runs])),
        peak_attn_logit=float(np.mean([run.peak_attn_logit for run in runs])),
    )


def fails(candidate: Cell, best_loss: float, criteria: SpikeCriteria) -> bool:
    """Whether a cell spikes or diverges: far above the best loss, several spikes per run, or mostly diverged."""
    return (
        not candidate.final_loss <= best_loss + criteria.fail_margin
        or candidate.spikes >= criteria.min_spikes
        or candidate.diverged > 0.5
    )


def judge(
    llama: dict[float, Cell], qk_norm: dict[float, Cell], criteria: SpikeCriteria
) -> tuple[str, dict[str, object]]:
    """The verdict and, per failing LR of the llama arm, whether QK-norm fixed it (module docstring)."""
    llama_best = float(np.nanmin([c.final_loss for c in llama.values()]))
    qk_best = float(np.nanmin([c.final_loss for c in qk_norm.values()]))
    failing = [lr for lr in sorted(llama) if fails(llama[lr], llama_best, criteria)]
    at_failing = {}
    for lr in failing:
        ratio = llama[lr].peak_attn_logit / qk_norm[lr].peak_attn_logit
        near = bool(qk_norm[lr].final_loss <= qk_best + criteria.near_margin)
        at_failing[f"{lr:g}"] = {
            "llama_final_loss": llama[lr].final_loss,
            "qk_norm_final_loss": qk_norm[lr].final_loss,
            "qk_norm_within_near_margin": near,
            "attn_logit_ratio": float(ratio),
            "ratio_at_least": bool(ratio >= criteria.logit_ratio),
            "fixed": near and bool(ratio >= criteria.logit_ratio),
        }
    fixed = [lr for lr, row in at_failing.items() if row["fixed"]]
    if len(failing) >= criteria.min_lrs and len(fixed) >= criteria.min_lrs:
        verdict = "reproduced"
    elif any(row["qk_norm_within_near_margin"] or row["ratio_at_least"] for row in at_failing.values()):
        verdict = "partial"
    else:
        verdict = "not_reproduced"
    return verdict, {
        "llama_best_final_loss": llama_best,
        "qk_norm_best_final_loss": qk_best,
        "failing_lrs": [float(lr) for lr in failing],
        "fixed_lrs": [float(lr) for lr in fixed],
        "at_failing_lrs": at_failing,
    }


def analyze_qk_norm_spikes(config: QKSpikesAnalysisConfig, output_path: str) -> dict[str, object]:
    """Judge the grid and write results.json and figure.png (final loss vs LR; attention logits over steps)."""
    signals: dict[str, dict[float, list[RunSignals]]] = {}
    for run in config.runs:
        signals.setdefault(run.arm, {}).setdefault(run.lr, []).append(read_run(str(run.run), config.tail))
    cells = {arm: {lr: cell(runs) for lr, runs in by_lr.items()} for arm, by_lr in signals.items()}
    verdict, judged = judge(cells["llama"], cells["qk-norm"], config.criteria)
    grid = {
        arm: {
            f"{lr:g}": {
                "final_loss": over_seeds([run.final_loss for run in runs]),
                "peak_attn_logit": over_seeds([run.peak_attn_logit for run in runs]),
                "diverged_seeds": sum(run.diverged for run in runs),
                "spikes": spike_summary(runs),
            }
            for lr, runs in sorted(by_lr.items())
        }
        for arm, by_lr in signals.items()
    }
    clip = {
        f"{lr:g}": {
            "fails": fails(c, judged["llama_best_final_loss"], config.criteria),
            "llama_fails": fails(cells["llama"][lr], judged["llama_best_final_loss"], config.criteria),
        }
        for lr, c in sorted(cells.get("update-clip", {}).items())
        if lr in cells["llama"]
    }
    numbers = {
        "criteria": {**vars(config.criteria), "final_loss_tail_steps": config.tail, "seeds_aggregated_by": "mean"},
        **judged,
        "update_clip_stops_failure": {lr: row["llama_fails"] and not row["fails"] for lr, row in clip.items()},
        "update_clip": clip,
        "grid": grid,
    }
    return write_phenomenon(output_path, NAME, verdict, numbers, _figure(signals, judged["failing_lrs"]))


def _figure(signals: dict[str, dict[float, list[RunSignals]]], failing: list[float]) -> Figure:
    """Final loss vs LR per arm (mean ± sd over seeds); the largest attention logit over steps at a failing LR."""
    figure = Figure(figsize=(12, 5))
    left, right = figure.subplots(1, 2)
    colors = {"llama": "tab:red", "qk-norm": "tab:blue", "update-clip": "tab:orange"}
    for arm, by_lr in signals.items():
        lrs = sorted(by_lr)
        losses = [[run.final_loss for run in by_lr[lr]] for lr in lrs]
        left.errorbar(
            lrs, [np.mean(v) for v in losses], yerr=[np.std(v) for v in losses], marker="o", capsize=3,
            color=colors[arm], label=arm,
        )  # fmt: skip
    left.set_xscale("log")
    left.set_xlabel("peak learning rate")
    left.set_ylabel("final train loss (mean of the last steps), mean ± sd over seeds")
    left.set_title("LR sensitivity with and without QK-norm")
    shown = min(failing) if failing else max(signals["llama"])
    for arm in ("llama", "qk-norm"):
        for index, run in enumerate(signals[arm].get(shown, [])):
            right.plot(
                run.attn_steps, run.attn_max, color=colors[arm], alpha=0.8, linewidth=1,
                label=arm if index == 0 else None,
            )  # fmt: skip
    right.set_yscale("log")
    right.set_xlabel("step")
    right.set_ylabel("largest pre-softmax attention logit (max over layers)")
    right.set_title(f"Attention logits at LR {shown:g} ({'a failing LR' if failing else 'no LR failed'}), each seed")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


def grid_steps(data: TinyData, scale: GridScale) -> list[Step]:
    """The training steps of the grid: every arm, LR and seed."""
    steps = []
    for arm in ARMS:
        for lr in scale.clip_lrs if arm == "update-clip" else scale.lrs:
            for seed in scale.seeds:
                config = spiking_train_config(
                    data,
                    num_steps=scale.num_steps,
                    peak_lr=lr,
                    seed=seed,
                    qk_norm=arm == "qk-norm",
                    **({"stability": CLIP} if arm == "update-clip" else {}),
                )
                steps.append(Step(f"phenomena/{NAME}/{arm}/lr{lr:g}/seed{seed}", run_training, config))
    return steps


def phenomenon_steps(data: TinyData, scale: GridScale) -> list[Step]:
    """The grid's runs on `data` and the results step after them."""
    runs = grid_steps(data, scale)
    refs = tuple(
        GridRun(arm=step.name.split("/")[2], lr=step.config.schedule.peak_lr, seed=step.config.seed, run=step.ref())
        for step in runs
    )
    return [*runs, Step(results_step_name(NAME), analyze_qk_norm_spikes, QKSpikesAnalysisConfig(runs=refs))]


def build_steps(scale: str) -> list[Step]:
    """The experiment at `scale` (tiny or smoke) on the tiny data."""
    return phenomenon_steps(tiny_data_steps(), SCALES[scale])
