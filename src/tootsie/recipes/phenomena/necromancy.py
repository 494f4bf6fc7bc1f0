"""Phenomenon `necromancy`: restarts of a failing run, without and with QK-norm, and whether each relapses.

The 32B run (Marin 32B retrospective, Phases 1-3) spiked at ~80k steps with
update clipping briefly off. It tried, from checkpoints before the spikes: a
"necromancy" restart (optimizer state rebuilt, the clip-update-norm filter
seeded with the last good checkpoint's update history), NAdamW (β1 = 0.95,
Nesterov) and Muon (LR 2e-3 against AdamW's 7e-4, on the Adam-style
schedule). All relapsed. The switch to QK-norm, warm-started from the same
weights, did not.

At toy scale, per seed, on the spiking setup (`spiking.spiking_train_config`,
no QK-norm, at `peak_lr`, where `qk_norm_spikes` finds the Llama failing):

    base         steps 0 → restart_step, checkpointed there. Its update clip records every update norm
                 but never clips (σ = 1e6: clipping off, as the 32B run had it ~74k-80k), so the
                 checkpoint holds valid rolling statistics of the update norms.
    continued    restart_step → num_steps, the same config: the run as it was going.
    necromancy   the same warm start (Adam moments and the clip's history carried by `WarmStartConfig`)
                 with update clipping on at 2σ: the clip acts from the first step on seeded statistics.
    nadamw       as necromancy with `NAdamWConfig` (β1 = 0.95, Nesterov).
    muon         as necromancy with `MuonConfig(muon_lr_ratio=2e-3 / 7e-4)` on the same schedule.
    qk-switch    as necromancy with QK-norm (`WarmStartConfig(add_qk_norm=True)`, the Phase 3 switch).

Every run sees the same batches at the same steps and the same schedule
(cosine over `num_steps`). A restart *relapses* (`relapsed`) when, after the
restart, it diverges, the spike classifier finds a spike, or the largest attention logit
grows to >= `regrowth` (3) times the base run's at the restart step (the
growth that made the base fail, back again); seeds vote (a majority).
Verdict (`judge`): `reproduced` when necromancy, nadamw and muon relapse
and qk-switch does not; `partial` when only one of those two halves holds;
`not_reproduced` when neither does.
"""

from dataclasses import dataclass, replace

from matplotlib.figure import Figure

from tootsie.eval.training import run_training
from tootsie.executor import Step, StepRef
from tootsie.recipes.cases.common import trailing_mean
from tootsie.recipes.phenomena.common import SEEDS
from tootsie.recipes.phenomena.registry import results_step_name
from tootsie.recipes.phenomena.results import over_seeds, write_phenomenon
from tootsie.recipes.phenomena.spiking import RunSignals, read_run, spike_summary, spiking_train_config
from tootsie.recipes.tiny.data import TinyData, tiny_data_steps
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.optimizer import MuonConfig, NAdamWConfig
from tootsie.train.stability import StabilityConfig

NAME = "necromancy"
NO_QK_RESTARTS = ("necromancy", "nadamw", "muon")
"""The restarts that keep the Llama attention (the 32B Phase 2); all relapsed at 32B."""
RESTARTS = ("continued", *NO_QK_RESTARTS, "qk-switch")
CLIP_WINDOW = 32
"""Update-norm history of the clip (the 32B run's 128 of 80k steps, shortened for a 300-step run)."""
RECORD_ONLY = StabilityConfig(clip_update_window=CLIP_WINDOW, clip_update_sigma=1e6)
"""The base run's clip: it fills the history, and no update reaches mean + 1e6 σ."""
CLIPPED = StabilityConfig(clip_update_window=CLIP_WINDOW, clip_update_sigma=2.0)
"""The restarts' clip: 2σ, the 32B run's."""
MUON_LR_RATIO = 2e-3 / 7e-4
"""exp1380 ran Muon at 2e-3 where the AdamW schedule peaked at 7e-4 (32B retrospective)."""


@dataclass(frozen=True)
class NecromancyScale:
    """The runs at one scale."""

    num_steps: int
    """Where every run ends (the schedule's end)."""
    restart_step: int
    """The base run's checkpoint every restart starts from (before its attention logits have grown)."""
    peak_lr: float
    """Peak learning rate of every run (a failing LR of `qk_norm_spikes`)."""
    seeds: tuple[int, ...]
    """Initialization seeds (a base run and its restarts each)."""


SCALES = {
    "tiny": NecromancyScale(num_steps=300, restart_step=50, peak_lr=1e-1, seeds=SEEDS["tiny"]),
    "smoke": NecromancyScale(num_steps=40, restart_step=20, peak_lr=1e-1, seeds=SEEDS["smoke"]),
}


@dataclass(frozen=True)
class RestartRun:
    """One run of one seed: the base or a restart."""

    arm: str
    """"base" or one of `RESTARTS`."""
    seed: int
    """Its initialization seed."""
    run: StepRef | str
    """The run's output directory."""


@dataclass(frozen=True)
class NecromancyAnalysisConfig:
    """The runs, where they restart, and the relapse test."""

    runs: tuple[RestartRun, ...]
    """Every seed's base run and restarts."""
    restart_step: int
    """The step the restarts start from."""
    regrowth: float = 3.0
    """A restart relapses when its largest attention logit reaches this times the base's at the restart."""
    tail: int = 20
    """Final loss: mean train loss over this many last steps."""

    def __post_init__(self) -> None:
        arms = {run.arm for run in self.runs}
        if arms != {"base", *RESTARTS}:
            raise ValueError(f"runs have arms {sorted(arms)}; give base and every restart of {RESTARTS}")


def relapsed(restart: RunSignals, base_logit: float, regrowth: float) -> bool:
    """Whether a restart diverged, spiked, or its attention logits grew to `regrowth` × the base's at the restart."""
    return restart.diverged or bool(restart.spikes) or restart.peak_attn_logit >= regrowth * base_logit


def judge(relapses: dict[str, list[bool]]) -> str:
    """The verdict from each restart's per-seed relapses (a majority of seeds decides an arm)."""
    majority = {arm: sum(votes) > len(votes) / 2 for arm, votes in relapses.items()}
    without_qk = all(majority[arm] for arm in NO_QK_RESTARTS)
    switch_holds = not majority["qk-switch"]
    if without_qk and switch_holds:
        return "reproduced"
    return "partial" if without_qk or switch_holds else "not_reproduced"


def analyze_necromancy(config: NecromancyAnalysisConfig, output_path: str) -> dict[str, object]:
    """Judge every restart against the base and write results.json and figure.png."""
    signals: dict[str, dict[int, RunSignals]] = {}
    for run in config.runs:
        signals.setdefault(run.arm, {})[run.seed] = read_run(str(run.run), config.tail)
    seeds = sorted(signals["base"])
    base_logit = {seed: signals["base"][seed].attn_at(config.restart_step - 1) for seed in seeds}
    relapses = {
        arm: [relapsed(signals[arm][seed], base_logit[seed], config.regrowth) for seed in seeds] for arm in RESTARTS
    }
    numbers = {
        "restart_step": config.restart_step,
        "regrowth": config.regrowth,
        "relapse_rule": "divergence or a spike after the restart, or the largest attention logit >= regrowth x "
        "the base's at the restart; an arm relapses when most seeds do",
        "base_attn_logit_at_restart": over_seeds([base_logit[seed] for seed in seeds]),
        "restarts": {
            arm: {
                "relapsed_seeds": sum(relapses[arm]),
                "seeds": len(seeds),
                "final_loss": over_seeds([signals[arm][seed].final_loss for seed in seeds]),
                "peak_attn_logit": over_seeds([signals[arm][seed].peak_attn_logit for seed in seeds]),
                "regrowth_ratio": over_seeds([signals[arm][seed].peak_attn_logit / base_logit[seed] for seed in seeds]),
                "diverged_seeds": sum(signals[arm][seed].diverged for seed in seeds),
                "spikes": spike_summary([signals[arm][seed] for seed in seeds]),
            }
            for arm in RESTARTS
        },
    }
    return write_phenomenon(output_path, NAME, judge(relapses), numbers, _figure(signals, seeds[0], config))


def _figure(signals: dict[str, dict[int, RunSignals]], seed: int, config: NecromancyAnalysisConfig) -> Figure:
    """Per restart of one seed: the smoothed loss and the largest attention logit over steps."""
    figure = Figure(figsize=(12, 5))
    left, right = figure.subplots(1, 2)
    for arm in ("base", *RESTARTS):
        run = signals[arm][seed]
        style = {"color": "black", "linewidth": 2} if arm == "base" else {"linewidth": 1}
        left.plot(run.loss_steps, trailing_mean(run.loss, 10), label=arm, **style)
        right.plot(run.attn_steps, run.attn_max, label=arm, **style)
    left.set_ylabel("train loss, 10-step mean")
    right.set_ylabel("largest pre-softmax attention logit (max over layers)")
    right.set_yscale("log")
    left.set_title(f"Restarts from step {config.restart_step} (seed {seed})")
    right.set_title(f"Relapse: logits >= {config.regrowth:g}x the base's at step {config.restart_step - 1}, or a spike")
    for axis in (left, right):
        axis.axvline(config.restart_step, color="gray", linestyle="--", linewidth=0.8)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


def restart_configs(base: TrainConfig, checkpoint: StepRef, num_steps: int) -> dict[str, TrainConfig]:
    """Each restart's config: `base` warm-started from `checkpoint` and run to `num_steps`, changed as it says."""
    restart = replace(base, num_steps=num_steps, warm_start=WarmStartConfig(checkpoint), stability=CLIPPED)
    return {
        "continued": replace(restart, stability=base.stability),
        "necromancy": restart,
        "nadamw": replace(restart, optimizer=NAdamWConfig(weight_decay=0.1)),
        "muon": replace(restart, optimizer=MuonConfig(muon_lr_ratio=MUON_LR_RATIO)),
        "qk-switch": replace(
            restart,
            model=replace(base.model, qk_norm=True),
            warm_start=WarmStartConfig(checkpoint, add_qk_norm=True),
        ),
    }


def necromancy_steps(data: TinyData, scale: NecromancyScale) -> list[Step]:
    """Per seed, the base run and its restarts."""
    steps = []
    for seed in scale.seeds:
        full = spiking_train_config(data, num_steps=scale.num_steps, peak_lr=scale.peak_lr, seed=seed)
        base_config = replace(
            full,
            num_steps=scale.restart_step,
            stability=RECORD_ONLY,
            checkpoints=CheckpointConfig(every_steps=scale.restart_step),
        )
        base = Step(f"phenomena/{NAME}/base/seed{seed}", run_training, base_config)
        steps.append(base)
        for arm, config in restart_configs(base_config, base.ref(), scale.num_steps).items():
            steps.append(Step(f"phenomena/{NAME}/{arm}/seed{seed}", run_training, config))
    return steps


def phenomenon_steps(data: TinyData, scale: NecromancyScale) -> list[Step]:
    """The base runs and restarts on `data`, and the results step after them."""
    runs = necromancy_steps(data, scale)
    refs = tuple(RestartRun(arm=step.name.split("/")[2], seed=step.config.seed, run=step.ref()) for step in runs)
    analysis = NecromancyAnalysisConfig(runs=refs, restart_step=scale.restart_step)
    return [*runs, Step(results_step_name(NAME), analyze_necromancy, analysis)]


def build_steps(scale: str) -> list[Step]:
    """The experiment at `scale` (tiny or smoke) on the tiny data."""
    return phenomenon_steps(tiny_data_steps(), SCALES[scale])
