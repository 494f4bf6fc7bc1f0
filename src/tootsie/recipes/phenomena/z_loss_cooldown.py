"""Phenomenon `z-loss-cooldown`: a long low-LR tail grows the lm_head norm and log Z; does z-loss hold them?

Marin 8B's deep cooldowns (Raccoon, Spoonbill) held a very low learning rate for
a long time; the loss crept up, the lm_head norm exploded, and z-loss 1e-4 fixed
it (paper outline, 6.4.2.6; 32B retrospective: "adding a small z-loss stopped
`lm_head` norm growth during cooldown"). At toy scale, per seed:

    base        warmup, then `peak_lr` held for `stable_steps` (no z-loss)
    no-z-loss   warm start from base: linear decay to `tail_ratio * peak_lr` over
                `decay_steps`, then that LR held to `total_steps` (the deep tail)
    z-loss      the same tail with `z_loss_weight` (z-loss added at the cooldown,
                as Spoonbill did)

Both tails see the same batches (`batch(step)` is stateless) from the same
weights and optimizer state, so z-loss is the only difference. The schedule is
one `RewarmConfig` shared by all three runs: cycle 1 is warmup + stable, cycle 2
"re-warms" *down* to the tail LR (its rewarmup is the cooldown's decay) and holds.

`analyze_z_loss_cooldown` measures, per seed and arm, over the hold (from the end
of the decay to the last step, `window`-step means at each end): the lm_head
norm's relative growth, the rise of the mean log-partition (`aux/log_z`) and of
the largest one (`aux/log_z_max`), the largest output logit's rise
(`aux/logit_max`), and the final loss. `verdict` turns them into reproduced /
partial / not_reproduced by the thresholds of `Criteria` (`checks` says which held).
It also splits the lm_head of each base and tail (`head_parts`) into the part
that shifts every logit alike (log Z only) and the part that ranks tokens.

Tuned on seed 0 (hold from step 500, 50-step means), then run on every seed:
the Spoonbill-like tail of 0.01 x peak moves nothing in 1,000 steps (lm_head
+0.6 %, log Z +0.02 nats, with or without z-loss 1e-4), so the tail is 0.1 x
peak; z-loss 1e-4 is indistinguishable from none there, 1e-2 drops log Z by 3
nats at 0.09 nats of loss, so the weight is 1e-3 (10 x the seeds'). At every
setting tried (also weight decay off in the tail, a 0.3 x tail, peak 1e-2
without decay, z-loss from step 0) z-loss held log Z but the lm_head norm grew
as much or more with it: the toy's tail is still learning (its loss falls
0.2 nats), and lowering log Z towards 0 moves the head, not shrinks it.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tootsie.eval.training import run_training
from tootsie.executor import Step, StepRef
from tootsie.recipes.cases.common import metric_series, trailing_mean
from tootsie.recipes.phenomena.common import SEEDS, phenomenon_train_config
from tootsie.recipes.phenomena.registry import results_step_name
from tootsie.recipes.phenomena.results import over_seeds, write_phenomenon
from tootsie.recipes.tiny.data import TinyData, tiny_data_steps
from tootsie.train.checkpoint import latest_checkpoint, read_tensors
from tootsie.train.config import WarmStartConfig
from tootsie.train.divergence import read_divergence
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import RewarmConfig

NAME = "z-loss-cooldown"
ARMS = ("no-z-loss", "z-loss")
SIGNALS = ("lm_head_norm", "aux/log_z", "aux/log_z_max", "aux/logit_max")
"""The per-step metrics read over the tail (the last three from the loss's auxiliary outputs)."""


@dataclass(frozen=True)
class CooldownPlan:
    """The run lengths and learning rates of one scale."""

    stable_steps: int
    """Steps of the base run (warmup + peak LR); the tails warm-start from its last checkpoint."""
    decay_steps: int
    """Steps of the linear decay from the peak to the tail LR."""
    total_steps: int
    """The tails' last step (the hold runs from stable_steps + decay_steps to here)."""
    peak_lr: float
    """LR of the stable phase."""
    tail_ratio: float
    """The tail LR as a fraction of peak_lr."""
    z_loss_weight: float
    """z-loss weight of the z-loss arm."""
    weight_decay: float
    """AdamW decoupled weight decay (on matrices; the embedding is never decayed)."""
    window: int
    """Steps averaged at each end of the hold."""

    def __post_init__(self) -> None:
        if self.stable_steps + self.decay_steps + 2 * self.window > self.total_steps:
            raise ValueError(
                f"total_steps={self.total_steps} leaves no hold of 2 * window={2 * self.window} steps after "
                f"stable_steps={self.stable_steps} + decay_steps={self.decay_steps}; raise total_steps"
            )

    @property
    def hold_start(self) -> int:
        """The first step at the tail LR."""
        return self.stable_steps + self.decay_steps

    def schedule(self) -> RewarmConfig:
        """Warmup (10 % of the base), peak to stable_steps, linear decay to the tail LR, then held."""
        return RewarmConfig(
            cycles=(self.stable_steps, self.total_steps),
            peak_lrs=(self.peak_lr, self.peak_lr * self.tail_ratio),
            warmup_steps=max(1, self.stable_steps // 10),
            rewarmup_steps=self.decay_steps,
            decay_steps=0,
        )


PLANS = {
    "tiny": CooldownPlan(
        stable_steps=400,
        decay_steps=100,
        total_steps=1500,
        peak_lr=3e-3,
        tail_ratio=0.1,
        z_loss_weight=1e-3,
        weight_decay=0.1,
        window=50,
    ),
    "smoke": CooldownPlan(
        stable_steps=40,
        decay_steps=10,
        total_steps=120,
        peak_lr=3e-3,
        tail_ratio=0.1,
        z_loss_weight=1e-3,
        weight_decay=0.1,
        window=10,
    ),
}
"""Per scale. Tuned on seed 0 at tiny scale: see the module docstring and docs/phenomena.md."""


@dataclass(frozen=True)
class Criteria:
    """The thresholds the verdict compares the seed means with (set on seed 0's tails, before seeds 1 and 2 ran)."""

    min_growth: float = 0.03
    """Without z-loss the lm_head norm grows by at least this fraction over the hold."""
    min_log_z_rise: float = 0.15
    """... and the mean log Z rises by at least this many nats."""
    max_share: float = 0.5
    """With z-loss the lm_head norm's growth and the rises of mean and max log Z are each at most this share of the
    no-z-loss ones."""
    max_loss_cost: float = 0.02
    """z-loss's final loss is worse than no-z-loss's by at most this (nats/token)."""


def check_arms(runs: Mapping[str, Sequence[object]], arms: Sequence[str], seeds: Sequence[int]) -> None:
    """Raise unless `runs` has exactly the `arms`, each with one run per seed."""
    if set(runs) != set(arms) or any(len(arm_runs) != len(seeds) for arm_runs in runs.values()):
        raise ValueError(
            f"runs has arms {sorted(runs)} with {[len(r) for r in runs.values()]} runs; "
            f"give {list(arms)}, each with one run per seed of {tuple(seeds)}"
        )


@dataclass(frozen=True)
class ZLossAnalysisConfig:
    """The tails per arm and seed, and where the hold starts."""

    runs: dict[str, tuple[StepRef | str, ...]]
    """"no-z-loss" and "z-loss" → their tail runs, one per seed in the same order."""
    seeds: tuple[int, ...]
    """The seeds, in the order of the runs."""
    hold_start: int
    """First step at the tail LR."""
    window: int
    """Steps averaged at each end of the hold."""
    z_loss_weight: float
    """The z-loss arm's weight (reported)."""
    criteria: Criteria = field(default_factory=Criteria)
    """Thresholds of the verdict."""
    bases: tuple[StepRef | str, ...] = ()
    """The base runs, one per seed in the same order; given, `head_parts` splits the lm_head of each base and tail."""

    def __post_init__(self) -> None:
        check_arms(self.runs, ARMS, self.seeds)
        if self.bases and len(self.bases) != len(self.seeds):
            raise ValueError(f"bases has {len(self.bases)} runs for seeds {self.seeds}; give one per seed, or none")


def hold_change(run: str, name: str, hold_start: int, window: int) -> tuple[float, float]:
    """Mean of metric `name` over the first and the last `window` steps of the hold (from `hold_start`)."""
    steps, values = metric_series(run, name)
    held = values[steps >= hold_start]
    if len(held) < 2 * window:
        raise ValueError(f"{run} logs {len(held)} values of {name!r} from step {hold_start}, fewer than 2 * {window=}")
    return float(held[:window].mean()), float(held[-window:].mean())


def seed_numbers(run: str, hold_start: int, window: int) -> dict[str, float]:
    """One tail's changes over the hold: relative lm_head norm growth, rises of log Z and logit max, final loss."""
    norm_start, norm_end = hold_change(run, "lm_head_norm", hold_start, window)
    numbers = {
        "lm_head_norm_start": norm_start,
        "lm_head_norm_end": norm_end,
        "lm_head_growth": norm_end / norm_start - 1,
    }
    for name in SIGNALS[1:]:
        start, end = hold_change(run, name, hold_start, window)
        key = name.removeprefix("aux/")
        numbers |= {f"{key}_start": start, f"{key}_end": end, f"{key}_rise": end - start}
    numbers["final_loss"] = hold_change(run, "loss", hold_start, window)[1]
    return numbers


def head_parts(run: str) -> dict[str, float]:
    """The lm_head at a run's last checkpoint: its norm, and the two parts whose squares add up to its square.

    `shift` is the norm of the vocabulary-mean column repeated over the vocabulary: it adds the same amount to
    every logit, so it moves log Z and never a prediction; `centered` is the rest, which ranks the tokens. z-loss
    acts on the first (cross-entropy does not see it); sharpening predictions grows the second.
    """
    checkpoint = latest_checkpoint(f"{run}/checkpoints")
    tensors = read_tensors(checkpoint, "model") if checkpoint is not None else None
    if tensors is None or ".lm_head" not in tensors:
        raise ValueError(f"{run} has no checkpoint with an untied lm_head to split; train it with checkpoints on")
    head = np.asarray(tensors[".lm_head"], np.float64)  # (hidden, vocab)
    mean_column = head.mean(axis=1, keepdims=True)
    return {
        "norm": float(np.linalg.norm(head)),
        "shift": float(np.linalg.norm(mean_column) * np.sqrt(head.shape[1])),
        "centered": float(np.linalg.norm(head - mean_column)),
    }


def checks(
    no_z: Mapping[str, float], with_z: Mapping[str, float], loss_cost: float, criteria: Criteria
) -> dict[str, bool]:
    """Each criterion on the seed means: growth without z-loss, bounds with it, and the loss cost."""
    return {
        "lm_head_grows": no_z["lm_head_growth"] >= criteria.min_growth,
        "log_z_grows": no_z["log_z_rise"] >= criteria.min_log_z_rise,
        "lm_head_bounded": with_z["lm_head_growth"] <= criteria.max_share * no_z["lm_head_growth"],
        "log_z_bounded": with_z["log_z_rise"] <= criteria.max_share * no_z["log_z_rise"],
        "log_z_max_bounded": with_z["log_z_max_rise"] <= criteria.max_share * no_z["log_z_max_rise"],
        "loss_cost_ok": loss_cost <= criteria.max_loss_cost,
    }


def verdict(passed: Mapping[str, bool]) -> str:
    """reproduced: every check passes; not_reproduced: neither lm_head norm nor log Z grows without z-loss (nothing
    for z-loss to fix); partial: anything between."""
    if not (passed["lm_head_grows"] or passed["log_z_grows"]):
        return "not_reproduced"
    return "reproduced" if all(passed.values()) else "partial"


def analyze_z_loss_cooldown(config: ZLossAnalysisConfig, output_path: str) -> dict[str, object]:
    """Per-seed changes over the hold in both arms, their spread, the verdict; `results.json` and `figure.png`."""
    runs = {arm: [str(run) for run in config.runs[arm]] for arm in ARMS}
    per_seed = {arm: [seed_numbers(run, config.hold_start, config.window) for run in runs[arm]] for arm in ARMS}
    keys = per_seed["no-z-loss"][0].keys()
    means = {arm: {key: over_seeds([seed[key] for seed in per_seed[arm]]) for key in keys} for arm in ARMS}
    loss_cost = over_seeds(
        [z["final_loss"] - n["final_loss"] for z, n in zip(per_seed["z-loss"], per_seed["no-z-loss"], strict=True)]
    )
    mean_of = {arm: {key: float(value["mean"]) for key, value in means[arm].items()} for arm in ARMS}
    passed = checks(mean_of["no-z-loss"], mean_of["z-loss"], float(loss_cost["mean"]), config.criteria)
    numbers = {
        "seeds": list(config.seeds),
        "hold_start": config.hold_start,
        "window": config.window,
        "z_loss_weight": config.z_loss_weight,
        "criteria": vars(config.criteria),
        "checks": passed,
        "arms": means,
        "loss_cost": loss_cost,
        "diverged": {arm: [read_divergence(run) is not None for run in runs[arm]] for arm in ARMS},
    }
    if config.bases:
        parts = {"base": [head_parts(str(run)) for run in config.bases]} | {
            arm: [head_parts(run) for run in runs[arm]] for arm in ARMS
        }
        numbers["lm_head_parts"] = {
            when: {key: over_seeds([seed[key] for seed in seeds]) for key in seeds[0]} for when, seeds in parts.items()
        }
    return write_phenomenon(output_path, NAME, verdict(passed), numbers, _figure(runs, config.hold_start))


ARM_COLORS = {"no-z-loss": "tab:red", "z-loss": "tab:blue"}
SMOOTH = 25
"""Steps in the trailing mean of the figures' per-step noisy panels (loss, log Z, largest logit)."""


def plot_seed_band(axis: Axes, runs: Sequence[str], name: str, color: str, label: str, smooth: int = 1) -> None:
    """Metric `name` of `runs` (one per seed) on `axis`: the mean over seeds, and their range shaded.

    `smooth` > 1 takes each seed's trailing mean over that many steps first.
    """
    series = [metric_series(run, name) for run in runs]
    length = min(len(steps) for steps, _ in series)
    values = np.stack([trailing_mean(values[:length], smooth) for _, values in series])
    steps = series[0][0][:length]
    label = f"{label} (mean of {len(runs)} seeds)"
    axis.plot(steps, values.mean(0), color=color, label=label)
    axis.fill_between(steps, values.min(0), values.max(0), color=color, alpha=0.2)


def _figure(runs: Mapping[str, Sequence[str]], hold_start: int) -> Figure:
    """lm_head norm, mean and max log Z, largest logit, loss and LR over the tails: seed mean and range per arm."""
    figure = Figure(figsize=(15, 8))
    axes = figure.subplots(2, 3, sharex=True).ravel()
    panels = (
        ("lm_head_norm", "lm_head norm (Frobenius)"),
        ("aux/log_z", f"mean log Z (nats), {SMOOTH}-step mean"),
        ("aux/log_z_max", f"largest log Z (nats), {SMOOTH}-step mean"),
        ("aux/logit_max", f"largest output logit, {SMOOTH}-step mean"),
        ("loss", f"train loss, {SMOOTH}-step mean"),
        ("lr", "learning rate"),
    )
    for axis, (name, label) in zip(axes, panels, strict=True):
        for arm in ARMS:
            plot_seed_band(
                axis, runs[arm], name, ARM_COLORS[arm], arm, smooth=1 if name in ("lm_head_norm", "lr") else SMOOTH
            )
        axis.axvline(hold_start, color="black", linestyle="--", linewidth=0.8, label="tail LR reached")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[5].set_yscale("log")
    for axis in axes[3:]:
        axis.set_xlabel("step")
    figure.suptitle("Deep cooldown tail without and with z-loss (band: range over seeds)")
    figure.tight_layout()
    return figure


def cooldown_steps(plan: CooldownPlan, data: TinyData, seeds: Sequence[int]) -> list[Step]:
    """Per seed a base run on `data` and its two tails (without and with z-loss), then the results step."""
    runs: dict[str, list[StepRef]] = {arm: [] for arm in ARMS}
    bases: list[StepRef] = []
    steps = []
    for seed in seeds:
        config = phenomenon_train_config(
            data,
            num_steps=plan.stable_steps,
            schedule=plan.schedule(),
            optimizer=AdamWConfig(weight_decay=plan.weight_decay),
            seed=seed,
            data_seed=seed,
        )
        base = Step(f"phenomena/{NAME}/base-seed{seed}", run_training, config)
        steps.append(base)
        bases.append(base.ref())
        for arm, weight in zip(ARMS, (0.0, plan.z_loss_weight), strict=True):
            tail = replace(
                config, num_steps=plan.total_steps, z_loss_weight=weight, warm_start=WarmStartConfig(base.ref())
            )
            steps.append(Step(f"phenomena/{NAME}/{arm}-seed{seed}", run_training, tail))
            runs[arm].append(steps[-1].ref())
    analysis = ZLossAnalysisConfig(
        runs={arm: tuple(refs) for arm, refs in runs.items()},
        seeds=tuple(seeds),
        hold_start=plan.hold_start,
        window=plan.window,
        z_loss_weight=plan.z_loss_weight,
        bases=tuple(bases),
    )
    return [*steps, Step(results_step_name(NAME), analyze_z_loss_cooldown, analysis)]


def build_steps(scale: str) -> list[Step]:
    """The experiment of `scale` on the tiny data, with the scale's seeds."""
    return cooldown_steps(PLANS[scale], tiny_data_steps(), SEEDS[scale])
