"""Phenomenon `embedding-norm`: under AdamW the undecayed embedding's norm keeps growing; decaying it bounds it.

The weekly update's 1e22 MoE run: "the embed (trained with AdamW rather than
AdamH) grew from norm 176 at initialization to 3700 over the course of the run",
with weight decay among the remedies explored. tootsie's AdamW, like Marin's,
leaves embeddings undecayed (`train.optimizer.decay_mask`: no decay on `embed`,
norm scales and biases). At toy scale, per seed, two runs on the same batches:

    adamw          AdamW, weight decay on matrices only (the default mask)
    embed-decay    the same AdamW with its decoupled decay on the embedding too

`EmbeddingDecayAdamWConfig` is that second optimizer: AdamW's own update with a
mask that also takes `embed`. It is a stand-in defined here, since the optimizer
registry has no switch for it (a `decay_embeddings` field on `AdamWConfig` would
replace it). The seeds' other remedies (cautious weight decay, per-token
normalisation, token-level LR modulation, AdamH) need optimizer or model changes
and are not run.

`analyze_embedding_norm` reads `embed_norm` (the embedding's Frobenius norm,
logged every step): its growth factor from the first step to the mean of the
last `window` steps, the final loss of each arm, and the loss cost of the decay
(paired by seed). `verdict` compares them with `Criteria` (set before any run).

Seed 0, tried first: at the recipes' weight decay 0.1 the embedding grows 4.8x
in 1,000 steps and decaying it removes 16 % of the growth (4.2x) for +0.009
nats: lr x decay x steps is 0.3 here, against tens in the seeds' runs. At 1.0
(800 steps) it removes 74 % of it (4.1x → 1.8x) but costs 0.075 nats, and
decaying every matrix that hard costs 0.12 nats already without it (against
0.1 at step 800). The tiny run keeps 0.1, the recipes' own value.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import jax
import optax
from matplotlib.figure import Figure

from tootsie.eval.training import run_training
from tootsie.executor import Step, StepRef
from tootsie.recipes.cases.common import metric_series, trailing_mean
from tootsie.recipes.phenomena.common import SEEDS, phenomenon_train_config
from tootsie.recipes.phenomena.registry import results_step_name
from tootsie.recipes.phenomena.results import over_seeds, write_phenomenon
from tootsie.recipes.phenomena.z_loss_cooldown import SMOOTH, check_arms, plot_seed_band
from tootsie.recipes.tiny.data import TinyData, tiny_data_steps
from tootsie.train.optimizer import AdamWConfig, LearningRate

NAME = "embedding-norm"
ARMS = ("adamw", "embed-decay")
UNDECAYED_NAMES = ("norm", "bias")
"""Parameter-path substrings the embed-decay arm leaves undecayed (the default mask's, less `embed`)."""


def embedding_decay_mask(params: object) -> object:
    """True for leaves that get weight decay: every matrix, the embedding included; not norm scales or biases."""

    def decays(path: tuple[object, ...], _leaf: object) -> bool:
        names = jax.tree_util.keystr(path).lower()
        return not any(name in names for name in UNDECAYED_NAMES)

    return jax.tree_util.tree_map_with_path(decays, params)


@dataclass(frozen=True)
class EmbeddingDecayAdamWConfig(AdamWConfig):
    """AdamW whose decoupled weight decay reaches the embedding too (same state as AdamW, so checkpoints match)."""

    def build(self, learning_rate: LearningRate) -> optax.GradientTransformationExtraArgs:
        """Clipping, then AdamW with `embedding_decay_mask`."""
        clip = [] if self.max_grad_norm is None else [optax.clip_by_global_norm(self.max_grad_norm)]
        adamw = optax.adamw(
            learning_rate,
            b1=self.beta1,
            b2=self.beta2,
            eps=self.epsilon,
            weight_decay=self.weight_decay,
            mask=embedding_decay_mask,
        )
        return optax.chain(*clip, adamw)


@dataclass(frozen=True)
class EmbeddingPlan:
    """Run length and optimizer of one scale."""

    num_steps: int
    """Steps of each run (10 % warmup, then the peak LR held)."""
    peak_lr: float
    """LR after warmup."""
    weight_decay: float
    """Decoupled weight decay of both arms (on the embedding too in embed-decay)."""
    window: int
    """Steps averaged at the end of each run."""


PLANS = {
    "tiny": EmbeddingPlan(num_steps=1000, peak_lr=3e-3, weight_decay=0.1, window=50),
    "smoke": EmbeddingPlan(num_steps=60, peak_lr=3e-3, weight_decay=0.1, window=10),
}
"""Per scale."""


@dataclass(frozen=True)
class Criteria:
    """The thresholds the verdict compares the seed means with."""

    min_growth: float = 2.0
    """Without decay the embedding norm grows by at least this factor (the seeds' run: 3700 / 176 = 21)."""
    max_growth_share: float = 0.5
    """With decay the norm's growth (factor - 1) is at most this share of the growth without it."""
    max_loss_cost: float = 0.02
    """The decayed arm's final loss is worse by at most this (nats/token)."""


@dataclass(frozen=True)
class EmbeddingAnalysisConfig:
    """The runs per arm and seed."""

    runs: dict[str, tuple[StepRef | str, ...]]
    """"adamw" and "embed-decay" → their runs, one per seed in the same order."""
    seeds: tuple[int, ...]
    """The seeds, in the order of the runs."""
    window: int
    """Steps averaged at the end of each run."""
    weight_decay: float
    """Both arms' weight decay (reported)."""
    criteria: Criteria = field(default_factory=Criteria)
    """Thresholds of the verdict."""

    def __post_init__(self) -> None:
        check_arms(self.runs, ARMS, self.seeds)


def run_numbers(run: str, window: int) -> dict[str, float]:
    """One run's embedding norm at its first step and its end (`window`-step mean), their ratio, and its final loss."""
    _, norms = metric_series(run, "embed_norm")
    _, losses = metric_series(run, "loss")
    if len(norms) < window or len(losses) < window:
        raise ValueError(f"{run} logs {len(norms)} embed_norm and {len(losses)} loss values, fewer than {window=}")
    start, end = float(norms[0]), float(norms[-window:].mean())
    return {
        "embed_norm_start": start,
        "embed_norm_end": end,
        "growth": end / start,
        "final_loss": float(losses[-window:].mean()),
    }


def verdict(adamw_growth: float, decayed_growth: float, loss_cost: float, criteria: Criteria) -> str:
    """reproduced: the undecayed norm grows, decay removes most of the growth at little loss cost; partial: it grows
    but decay does not remove enough of it, or costs too much loss; not_reproduced: it does not grow."""
    if adamw_growth < criteria.min_growth:
        return "not_reproduced"
    bounded = decayed_growth - 1 <= criteria.max_growth_share * (adamw_growth - 1)
    return "reproduced" if bounded and loss_cost <= criteria.max_loss_cost else "partial"


def analyze_embedding_norm(config: EmbeddingAnalysisConfig, output_path: str) -> dict[str, object]:
    """Growth factors and final losses per arm over seeds, the loss cost, the verdict; results.json + figure.png."""
    runs = {arm: [str(run) for run in config.runs[arm]] for arm in ARMS}
    per_seed = {arm: [run_numbers(run, config.window) for run in runs[arm]] for arm in ARMS}
    arms = {arm: {key: over_seeds([seed[key] for seed in per_seed[arm]]) for key in per_seed[arm][0]} for arm in ARMS}
    loss_cost = over_seeds(
        [d["final_loss"] - a["final_loss"] for d, a in zip(per_seed["embed-decay"], per_seed["adamw"], strict=True)]
    )
    result = verdict(
        float(arms["adamw"]["growth"]["mean"]),
        float(arms["embed-decay"]["growth"]["mean"]),
        float(loss_cost["mean"]),
        config.criteria,
    )
    numbers = {
        "seeds": list(config.seeds),
        "window": config.window,
        "weight_decay": config.weight_decay,
        "criteria": vars(config.criteria),
        "arms": arms,
        "loss_cost": loss_cost,
    }
    return write_phenomenon(output_path, NAME, result, numbers, _figure(runs))


ARM_COLORS = {"adamw": "tab:red", "embed-decay": "tab:blue"}


def _figure(runs: Mapping[str, Sequence[str]]) -> Figure:
    """Embedding norm and loss over steps (seed mean and range per arm), and the paired loss difference per seed."""
    figure = Figure(figsize=(15, 4.5))
    norm_axis, loss_axis, cost_axis = figure.subplots(1, 3, sharex=True)
    for arm in ARMS:
        plot_seed_band(norm_axis, runs[arm], "embed_norm", ARM_COLORS[arm], arm)
        plot_seed_band(loss_axis, runs[arm], "loss", ARM_COLORS[arm], arm, smooth=SMOOTH)
    for adamw, decayed in zip(runs["adamw"], runs["embed-decay"], strict=True):
        (steps, base), (_, loss) = metric_series(adamw, "loss"), metric_series(decayed, "loss")
        n = min(len(base), len(loss))
        cost_axis.plot(steps[:n], trailing_mean(loss[:n] - base[:n], SMOOTH), color="tab:blue", alpha=0.6)
    cost_axis.axhline(0, color="black", linewidth=0.8)
    norm_axis.set_ylabel("embedding norm (Frobenius)")
    loss_axis.set_ylabel(f"train loss, {SMOOTH}-step mean")
    cost_axis.set_ylabel(f"loss cost of the decay, {SMOOTH}-step mean (a line per seed)")
    for axis in (norm_axis, loss_axis, cost_axis):
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    norm_axis.legend(fontsize=8)
    figure.suptitle("Embedding norm under AdamW, without and with weight decay on it (band: range over seeds)")
    figure.tight_layout()
    return figure


def embedding_steps(plan: EmbeddingPlan, data: TinyData, seeds: Sequence[int]) -> list[Step]:
    """Per seed one run per arm on `data` (same batches), then the results step."""
    optimizers = {
        "adamw": AdamWConfig(weight_decay=plan.weight_decay),
        "embed-decay": EmbeddingDecayAdamWConfig(weight_decay=plan.weight_decay),
    }
    runs: dict[str, list[Step]] = {arm: [] for arm in ARMS}
    for seed in seeds:
        for arm in ARMS:
            config = phenomenon_train_config(
                data,
                num_steps=plan.num_steps,
                peak_lr=plan.peak_lr,
                optimizer=optimizers[arm],
                seed=seed,
                data_seed=seed,
            )
            runs[arm].append(Step(f"phenomena/{NAME}/{arm}-seed{seed}", run_training, config))
    analysis = EmbeddingAnalysisConfig(
        runs={arm: tuple(step.ref() for step in steps) for arm, steps in runs.items()},
        seeds=tuple(seeds),
        window=plan.window,
        weight_decay=plan.weight_decay,
    )
    trainings = [step for steps in runs.values() for step in steps]
    return [*trainings, Step(results_step_name(NAME), analyze_embedding_norm, analysis)]


def build_steps(scale: str) -> list[Step]:
    """The experiment of `scale` on the tiny data, with the scale's seeds."""
    return embedding_steps(PLANS[scale], tiny_data_steps(), SEEDS[scale])
