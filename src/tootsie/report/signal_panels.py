"""The report's panels for the optimizer's inner signals: per-layer update norms and Adam's moments.

The trainer logs these every step (`layer_update_norms`, `adam/mu_norm`,
`adam/nu_norm`, `muon/momentum_norm`, `lm_head_norm`, and the instability
signals `aux/attn_logit_max`, `aux/logit_max`, `aux/log_z_max`) because they move before
the loss does: Marin's 32B spikes were preceded by Adam's first moment doubling
while the second stayed flat (Marin issue #1368), and a single layer's update
norm jumping points at that layer. The heatmap draws log10 of each layer's
update norm, layers up the y axis and steps along the shared x axis, one strip
per run, so a layer that jumped shows as a bright cell left of a loss spike.
"""

from dataclasses import dataclass

import numpy as np
from matplotlib import colors

from tootsie.monitor.signals import ATTN_LOGIT_MAX, LAYER_NORMS, layer_norms, series
from tootsie.report.panels import (
    BOTTOM,
    RIGHT,
    TOP,
    WIDTH,
    Panel,
    Records,
    Timeline,
    backdrop,
    finished,
    log_scale_if_wide,
    panel_figure,
)

STRIP_HEIGHT = 1.5
"""Inches per run's heatmap strip."""


@dataclass(frozen=True)
class LayerSignal:
    """A per-layer metric drawn as a layers × steps heatmap: its record name, panel title and what it shows."""

    key: str
    title: str
    note: str


UPDATE_NORMS = LayerSignal(
    LAYER_NORMS,
    "Per-layer update norms (layer × step)",
    "Each layer's update norm (the stacked `layers` leaves of the update), log10, brighter = larger."
    " A layer that brightens a few steps before a loss spike led it (the spike table names it).",
)
ATTENTION_LOGITS = LayerSignal(
    ATTN_LOGIT_MAX,
    "Largest pre-softmax attention logit per layer (layer × step)",
    "Each layer's largest attention logit in the step (after QK-norm when the model has it), log10."
    " Growth without QK-norm is the small-scale proxy for attention-logit instability (Wortsman et al., 2023);"
    " QK-norm keeps it flat.",
)


def layer_heatmap_panel(runs: dict[str, Records], timeline: Timeline, signal: LayerSignal = UPDATE_NORMS) -> Panel:
    """A per-layer signal as a layers × steps heatmap (log10), one strip per run that logged it."""
    title = signal.title
    matrices = {
        label: m for label, m in ((label, layer_norms(records, signal.key)) for label, records in runs.items()) if m
    }
    if not matrices:
        return Panel(title, None, f"`{signal.key}` was not logged (older runs log no per-layer values).")
    figure, first = panel_figure(BOTTOM + TOP + STRIP_HEIGHT * len(matrices))
    axes = [first] if len(matrices) == 1 else list(first.get_figure().subplots(len(matrices), 1, sharex=True))
    if len(matrices) > 1:
        first.remove()
    logs = {label: np.log10(np.where(m.values > 0, m.values, np.nan)) for label, m in matrices.items()}
    finite = np.concatenate([v[np.isfinite(v)] for v in logs.values()])
    scale = colors.Normalize(float(finite.min()), float(finite.max())) if len(finite) else None
    image = None
    for axis, (label, matrix) in zip(axes, matrices.items()):
        backdrop(axis, timeline)
        steps = matrix.steps.astype(np.float64)
        edges = np.concatenate([steps - 0.5, [steps[-1] + 0.5]]) if len(steps) == 1 else _edges(steps)
        image = axis.pcolormesh(
            edges,
            np.arange(matrix.num_layers + 1) - 0.5,
            np.ma.masked_invalid(logs[label]),
            norm=scale,
            cmap="viridis",
            shading="flat",
            gid=label,
            zorder=2,
        )
        axis.set_ylabel(f"{label}\nlayer", color=timeline.color(label), fontsize=8)
        axis.set_yticks(range(matrix.num_layers))
        if axis is not axes[-1]:
            axis.set_xlabel("")
    if image is not None:
        bottom, top = axes[-1].get_position().y0, axes[0].get_position().y1
        bar = figure.add_axes((1 - (RIGHT - 0.1) / WIDTH, bottom, 0.1 / WIDTH, top - bottom))  # in the right margin,
        figure.colorbar(image, cax=bar)  # so the step axis lines up with the other panels (log10: the note says)
    shapes = "; ".join(f"{label}: {m.num_layers} layers × {len(m.steps)} steps" for label, m in matrices.items())
    return finished(title, figure, f"{shapes}. {signal.note}")


def _edges(steps: np.ndarray) -> np.ndarray:
    """Cell edges halfway between logged steps (x steps give x + 1 edges)."""
    middle = (steps[1:] + steps[:-1]) / 2
    return np.concatenate([[steps[0] - (middle[0] - steps[0])], middle, [steps[-1] + (steps[-1] - middle[-1])]])


def output_logits_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """The largest output logit (solid) and the largest and mean log Z (dashed, dotted) per run."""
    title = "Output logits: the largest logit and log Z"
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    drawn = []
    for label, records in runs.items():
        for key, style in (("aux/logit_max", "-"), ("aux/log_z_max", "--"), ("aux/log_z", ":")):
            steps, values, _ = series(records, key)
            if len(values):
                drawn.append(values)
                axis.plot(
                    steps, values, style, color=timeline.color(label), linewidth=1.1, label=f"{label} {key}", gid=label
                )
    if not drawn:
        return Panel(title, None, "No output-logit signal was logged (`aux/logit_max`, `aux/log_z_max`, `aux/log_z`).")
    axis.set_ylabel("nats")
    axis.legend(fontsize=8, loc="upper left")
    return finished(
        title,
        figure,
        "Solid: the largest output logit of the step; dashed: the largest log-partition log Z; dotted: mean log Z."
        " Their drift is the output-logit divergence z-loss exists to stop (it pulls log Z to 0).",
    )


def adam_moments_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Adam's first-moment norm (solid, left axis) and second-moment norm (dashed, right axis) per run."""
    title = "Optimizer moments: Adam first and second moment norms"
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    twin = axis.twinx()
    left, right = [], []
    for label, records in runs.items():
        for key, target, style, drawn in (
            ("adam/mu_norm", axis, "-", left),
            ("muon/momentum_norm", axis, ":", left),
            ("adam/nu_norm", twin, "--", right),
        ):
            steps, values, _ = series(records, key)
            if len(values):
                drawn.append(values)
                target.plot(
                    steps, values, style, color=timeline.color(label), linewidth=1.2, label=f"{label} {key}", gid=label
                )
    if not left and not right:
        return Panel(title, None, "No optimizer moment norm was logged (`adam/mu_norm`, `adam/nu_norm`).")
    log_scale_if_wide(axis, left)
    log_scale_if_wide(twin, right)
    axis.set_ylabel("first moment (μ) norm")
    twin.set_ylabel("second moment (ν) norm")
    axis.legend(fontsize=8, loc="upper left")
    twin.legend(fontsize=8, loc="upper right")
    return finished(
        title,
        figure,
        "Solid: ‖μ‖ (left axis), dashed: ‖ν‖ (right axis), dotted: Muon momentum."
        " μ rising while ν stays flat is the pre-spike pattern of Marin's 32B run (issue #1368).",
    )
