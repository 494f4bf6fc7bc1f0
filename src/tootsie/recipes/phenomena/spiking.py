"""Shared by `qk_norm_spikes` and `necromancy`: the spiking run's setup, and what a run says about its instability.

The spiking setup is the tiny Llama with one attention head of width 64 per
layer (the wider head makes attention logits grow at a lower learning rate
than the case studies' four heads of 16), z-loss 1e-4 (Wortsman et al.'s
small-scale proxies keep it on, so the output logits are not what fails),
a warmup over the first third of the run and a cosine to zero, so a run's
final loss is its annealed loss, not the noise of a high learning rate (with a
10 % warmup the qk-norm arm lost 0.45 nat at LR 2e-2 against 1e-2; with a third,
0.3 nat at 3e-2: tuned on seed 0).

`read_run` reduces one training run to what both analyses compare: the final
loss (mean train loss over its last `tail` steps; every run of a phenomenon
sees the same batches at the same steps), whether it diverged, the spike
classifier's report (`tootsie.monitor.spikes`: count, kinds, the layer that
led) and the largest pre-softmax attention logit per step (`aux/attn_logit_max`,
the max over layers).
"""

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from jaxtyping import Float, Int64

from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.signals import ATTN_LOGIT_MAX, layer_norms
from tootsie.monitor.spikes import find_spikes
from tootsie.monitor.trackers import METRICS_FILE
from tootsie.recipes.cases.common import CASE_MODEL, metric_series
from tootsie.recipes.phenomena.common import phenomenon_train_config
from tootsie.recipes.tiny.data import TinyData
from tootsie.train.config import TrainConfig
from tootsie.train.divergence import read_divergence
from tootsie.train.optimizer import OptimizerChoice
from tootsie.train.schedule import CosineConfig

SPIKING_MODEL = replace(CASE_MODEL, num_heads=1, num_kv_heads=1)
"""The tiny Llama (hidden 64, 2 layers) with one 64-wide attention head per layer, no QK-norm."""
Z_LOSS = 1e-4
"""z-loss weight of every spiking run (Wortsman et al. 2023 and Marin's runs use 1e-4)."""


def spiking_train_config(
    data: TinyData,
    *,
    num_steps: int,
    peak_lr: float,
    seed: int,
    qk_norm: bool = False,
    optimizer: OptimizerChoice | None = None,
    **fields: object,
) -> TrainConfig:
    """A spiking-setup run: `SPIKING_MODEL` (with QK-norm if asked), warmup a third, cosine to zero, z-loss 1e-4."""
    return phenomenon_train_config(
        data,
        num_steps=num_steps,
        schedule=CosineConfig(
            peak_lr=peak_lr, warmup_steps=max(1, num_steps // 3), total_steps=num_steps, min_lr_ratio=0.0
        ),
        model=replace(SPIKING_MODEL, qk_norm=qk_norm),
        optimizer=optimizer,
        seed=seed,
        z_loss_weight=Z_LOSS,
        **fields,
    )


@dataclass(frozen=True)
class RunSignals:
    """One run's instability signals."""

    loss_steps: Int64[np.ndarray, " m"]
    """Steps with a finite train loss."""
    loss: Float[np.ndarray, " m"]
    """The train loss at those steps."""
    final_loss: float
    """Mean train loss over the last `tail` logged steps (NaN when none is finite)."""
    diverged: bool
    """Whether the run stopped with diverged.json."""
    spikes: list[dict[str, object]]
    """The spike classifier's spikes (`find_spikes`), each with its kind and the layer that led."""
    attn_steps: Int64[np.ndarray, " n"]
    """Steps that logged the attention logits."""
    attn_max: Float[np.ndarray, " n"]
    """The largest attention logit over layers at each of those steps."""
    attn_layer_peaks: tuple[float, ...] = ()
    """Each layer's largest attention logit over the run."""

    @property
    def peak_attn_logit(self) -> float:
        """The largest attention logit of the whole run (NaN when none was logged)."""
        return float(np.nanmax(self.attn_max)) if len(self.attn_max) else float("nan")

    def attn_at(self, step: int) -> float:
        """The largest attention logit at the last logged step <= `step` (NaN before the first)."""
        index = int(np.searchsorted(self.attn_steps, step, side="right")) - 1
        return float(self.attn_max[index]) if index >= 0 else float("nan")


def read_run(run_dir: str, tail: int) -> RunSignals:
    """The signals of the training run in `run_dir` (see the module docstring)."""
    loss_steps, loss = metric_series(run_dir, "loss")
    metrics = read_metrics(Path(run_dir) / METRICS_FILE)
    attn = layer_norms(metrics.records, ATTN_LOGIT_MAX)
    attn_steps = attn.steps if attn is not None else np.zeros(0, dtype=np.int64)
    attn_max = np.nanmax(attn.values, axis=0) if attn is not None else np.zeros(0)
    peaks = tuple(float(v) for v in np.nanmax(attn.values, axis=1)) if attn is not None else ()
    return RunSignals(
        loss_steps=loss_steps,
        loss=loss,
        final_loss=float(loss[-tail:].mean()) if len(loss) else float("nan"),
        diverged=read_divergence(run_dir) is not None,
        spikes=find_spikes(metrics)["spikes"],
        attn_steps=attn_steps,
        attn_max=attn_max,
        attn_layer_peaks=peaks,
    )


def spike_summary(runs: list[RunSignals]) -> dict[str, object]:
    """The classifier's findings over several runs (spikes per run, kinds, how often each layer led) and, per run,
    the layer whose attention logits grew largest (`attn_layer_peaks`), which names a layer when no spike does."""
    spikes = [spike for run in runs for spike in run.spikes]
    return {
        "spikes_per_run": [len(run.spikes) for run in runs],
        "kinds": dict(Counter(str(spike["kind"]) for spike in spikes)),
        "layer_led": dict(Counter(str(spike.get("layer_led")) for spike in spikes)),
        "norm_led": sum(bool(spike["norm_led"]) for spike in spikes),
        "largest_attn_logit_layer": [
            int(np.argmax(run.attn_layer_peaks)) if run.attn_layer_peaks else None for run in runs
        ],
    }
