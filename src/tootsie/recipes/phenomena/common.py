"""What the phenomena share: the tiny model and data, one training config builder, and the seeds per scale.

Every phenomenon trains the case studies' tiny Llama (`recipes.cases.common`)
on the tiny data's web/code/reference/math/qa mixture, a run per setting and
seed, each stopped cleanly when it diverges (`train.divergence`: a
diverged run writes diverged.json and counts as a result, not a failure).
"""

import math
from dataclasses import dataclass, replace

from tootsie.executor import StepRef
from tootsie.models.llama import LlamaConfig
from tootsie.recipes.cases.common import CASE_MODEL, mixture
from tootsie.recipes.tiny.data import TINY_VOCAB, TinyData
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.divergence import DivergenceConfig
from tootsie.train.optimizer import AdamWConfig, OptimizerChoice
from tootsie.train.schedule import ScheduleChoice, WSDConfig

MIXTURE_WEIGHTS = {"web": 0.5, "code": 0.2, "reference": 0.1, "math": 0.1, "qa": 0.1}
"""The case studies' mixture of the tiny kinds of text."""
SEEDS = {"tiny": (0, 1, 2), "smoke": (0,)}
"""Seeds per scale: three where numbers carry their noise, one in the smoke runs."""
DIVERGED = DivergenceConfig(max_loss=1.5 * math.log(TINY_VOCAB), patience=5, max_nonfinite_steps=1)
"""Five steps above 1.5 × ln(vocab) (a loss no learning run stays above), or one NaN, stop a run as diverged."""


def phenomenon_train_config(
    data: TinyData,
    *,
    num_steps: int,
    schedule: ScheduleChoice | None = None,
    peak_lr: float = 3e-3,
    model: LlamaConfig = CASE_MODEL,
    optimizer: OptimizerChoice | None = None,
    seed: int = 0,
    data_seed: int = 0,
    checkpoint_every: int | None = None,
    **fields: object,
) -> TrainConfig:
    """A tiny run of `num_steps` on the case mixture; a WSD schedule at `peak_lr` (10 % warmup) unless given.

    `fields` are any other `TrainConfig` fields (`z_loss_weight`, `stability`, `warm_start`, ...). EMA is off:
    the phenomena read the raw weights' signals.
    """
    config = TrainConfig(
        model=model,
        data=mixture({kind: data.train[kind] for kind in MIXTURE_WEIGHTS}, MIXTURE_WEIGHTS, seed=data_seed),
        num_steps=num_steps,
        optimizer=optimizer or AdamWConfig(weight_decay=0.1),
        schedule=schedule
        or WSDConfig(peak_lr=peak_lr, warmup_steps=max(1, num_steps // 10), decay_steps=0, total_steps=num_steps),
        ema=None,
        seed=seed,
        divergence=DIVERGED,
        checkpoints=CheckpointConfig(every_steps=checkpoint_every or num_steps),
    )
    return replace(config, **fields)


@dataclass(frozen=True)
class GridRun:
    """One training run of an LR grid: its arm, peak LR, seed and output."""

    arm: str
    """The setting it belongs to (e.g. "llama" and "qk-norm", or "adamw" and "muon")."""
    lr: float
    """Its peak learning rate."""
    seed: int
    """Its initialization (and data) seed."""
    run: StepRef | str
    """The run's output directory."""
