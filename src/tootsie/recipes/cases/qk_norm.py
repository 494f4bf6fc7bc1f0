"""Case study: switching a Llama run to QK-norm mid-run (the 32B phase 3 warm start), its loss penalty and recovery.

The 32B run warm-started its 80k Llama checkpoint into the Qwen3 backbone
(QK-norm: an RMSNorm on each head's queries and keys, scales starting at one),
paying a loss penalty it then trained off (32B retrospective, Phase 3). At toy
scale, three runs share one data stream (`batch(step)` is stateless, so every
step sees the same batch in every run) and one constant learning rate after
warmup, so the only difference after the switch is the architecture:

    base      Llama, steps 0 → switch
    control   Llama warm-started from base's checkpoint, switch → end
    qk-norm   the same warm start with `add_qk_norm=True`, switch → end

`analyze_qk_norm` pairs the control and qk-norm losses step by step
(`delta = loss_qk - loss_control`) and reports, in steps and tokens after the
switch: the penalty (delta at the first step, the largest delta, the mean over
the first 10 steps), when the `smooth_steps`-step mean delta first falls
within `tolerance` of zero (recovered to the control) and when the qk-norm
run's smoothed loss first gets back to the base run's loss just before the
switch (recovered to where it was). It also compares the first post-switch
update norms of the two runs: had the warm start restarted the optimizer's
step count, the applied LR would restart at schedule(0) (the trainer gap noted
in docs/recipes.md) and the qk-norm update would be far smaller.
"""

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Integer
from matplotlib.figure import Figure

from tootsie.recipes.cases.common import metric_series, trailing_mean, write_results


@dataclass(frozen=True)
class QKNormAnalysisConfig:
    """The three runs and how penalty and recovery are measured."""

    runs: dict[str, str]
    """"base", "control" and "qk-norm" → their training runs."""
    switch_step: int
    """The step the control and qk-norm runs start from."""
    tokens_per_step: int
    """Tokens per step (to report steps as tokens)."""
    smooth_steps: int = 10
    """Trailing mean length for the recovery tests."""
    tolerance: float = 0.02
    """Recovered to the control once the smoothed delta is at most this (nats/token)."""

    def __post_init__(self) -> None:
        missing = {"base", "control", "qk-norm"} - set(self.runs)
        if missing:
            raise ValueError(f"runs lacks {sorted(missing)}; give the base, control and qk-norm runs")


def first_at_or_below(steps: Integer[np.ndarray, " n"], values: Float[np.ndarray, " n"], level: float) -> int | None:
    """The first step whose value is <= level, None when none is."""
    hits = np.flatnonzero(values <= level)
    return int(steps[hits[0]]) if len(hits) else None


def analyze_qk_norm(config: QKNormAnalysisConfig, output_path: str) -> dict[str, object]:
    """Penalty and recovery of the QK-norm switch against the control; `figure.png` and `results.json`."""
    base_steps, base_loss = metric_series(config.runs["base"], "loss")
    control_steps, control_loss = metric_series(config.runs["control"], "loss")
    qk_steps, qk_loss = metric_series(config.runs["qk-norm"], "loss")
    steps = np.intersect1d(control_steps, qk_steps)
    delta = qk_loss[np.searchsorted(qk_steps, steps)] - control_loss[np.searchsorted(control_steps, steps)]
    smoothed_delta = trailing_mean(delta, config.smooth_steps)
    smoothed_qk = trailing_mean(qk_loss, config.smooth_steps)
    before = float(base_loss[base_steps >= config.switch_step - config.smooth_steps].mean())
    to_control = first_at_or_below(steps, smoothed_delta, config.tolerance)
    to_before = first_at_or_below(qk_steps, smoothed_qk, before)

    def after(step: int | None) -> dict[str, int] | None:
        return (
            None
            if step is None
            else {"steps": step - config.switch_step, "tokens": (step - config.switch_step) * config.tokens_per_step}
        )

    update = {name: metric_series(config.runs[name], "update_norm")[1][0] for name in ("control", "qk-norm")}
    eval_steps, control_eval = metric_series(config.runs["control"], "eval/bpb/macro_avg")
    qk_eval_steps, qk_eval = metric_series(config.runs["qk-norm"], "eval/bpb/macro_avg")
    results = {
        "switch_step": config.switch_step,
        "tokens_per_step": config.tokens_per_step,
        "loss_before_switch": before,
        "penalty": {
            "first_step": float(delta[0]),
            "max": float(delta.max()),
            "max_at_step": int(steps[int(delta.argmax())]),
            "mean_first_10": float(delta[:10].mean()),
        },
        "recovered_to_control": after(to_control),
        "recovered_to_pre_switch_loss": after(to_before),
        "tolerance": config.tolerance,
        "final_delta_mean_last_20": float(delta[-20:].mean()),
        "first_update_norm": {name: float(value) for name, value in update.items()},
        "eval_macro_bpb_delta": {
            int(s): float(q - c) for s, q, c in zip(eval_steps, qk_eval, control_eval, strict=True)
        }
        if np.array_equal(eval_steps, qk_eval_steps)
        else None,
    }
    figure = Figure(figsize=(11, 7))
    top, bottom = figure.subplots(2, 1, sharex=True)
    top.plot(base_steps, trailing_mean(base_loss, config.smooth_steps), color="black", label="base (Llama)")
    top.plot(
        control_steps,
        trailing_mean(control_loss, config.smooth_steps),
        color="tab:blue",
        label="control (Llama, warm start)",
    )
    top.plot(qk_steps, smoothed_qk, color="tab:red", label="qk-norm (warm start, add_qk_norm)")
    top.axhline(before, color="gray", linestyle=":", linewidth=1, label=f"loss before the switch ({before:.3f})")
    top.set_ylabel(f"train loss, {config.smooth_steps}-step mean")
    top.set_title(f"Warm start into QK-norm at step {config.switch_step} ({config.tokens_per_step} tokens/step)")
    bottom.plot(
        steps, delta, color="tab:red", alpha=0.35, linewidth=0.8, label="qk-norm − control, per step (same batches)"
    )
    bottom.plot(steps, smoothed_delta, color="tab:red", label=f"{config.smooth_steps}-step mean")
    bottom.axhline(0, color="black", linewidth=0.8)
    bottom.axhline(config.tolerance, color="gray", linestyle="--", linewidth=0.8, label=f"tolerance {config.tolerance}")
    for step, label in ((to_control, "back within tolerance of control"), (to_before, "back to the pre-switch loss")):
        if step is not None:
            bottom.axvline(
                step,
                linestyle=":",
                color="tab:green" if step == to_control else "tab:purple",
                label=f"{label}: +{step - config.switch_step} steps",
            )
    bottom.set_ylabel("loss delta (nats/token)")
    bottom.set_xlabel("step")
    for axis in (top, bottom):
        axis.axvline(config.switch_step, color="black", linestyle="--", linewidth=0.8)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return write_results(output_path, results, figure)
