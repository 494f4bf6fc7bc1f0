"""The run report's figures: one panel per signal of the curve-reading guide, as PNG data URIs.

Every time-series panel draws the same backdrop so the panels line up by eye:
the schedule phases shaded (warmup yellow, stable green, decay blue; named in
the learning-rate panel), a dashed line where the next run of the recipe
starts (pretrain → cooldown), and a faint red line at every detected loss
spike, so a norm that moved before the loss shows as a bump left of the line.
Figures are `matplotlib.figure.Figure` objects drawn on the Agg canvas (no
pyplot state, no display), encoded as base64 PNG so the HTML needs no other file.
"""

import base64
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tootsie.monitor.spikes import series

Records = list[dict[str, object]]
WIDTH, HEIGHT, DPI = 11.0, 3.2, 100
"""Figure size in inches and resolution: 1100 px wide, the page's content width."""
LEFT, RIGHT, BOTTOM, TOP = 0.8, 0.75, 0.5, 0.3
"""Fixed margins in inches, the same for every panel so their step axes line up (and no tight_layout pass is paid)."""
PHASE_COLORS = {"warmup": "#fde68a", "rewarmup": "#fde68a", "stable": "#d1fae5", "decay": "#bfdbfe"}
OTHER_PHASE_COLOR = "#e5e7eb"
SPIKE_COLOR = "#dc2626"
MIXTURE_COLORS = ("#10b981", "#8b5cf6", "#f59e0b", "#06b6d4", "#ec4899", "#84cc16", "#6366f1", "#f97316")


@dataclass(frozen=True)
class Span:
    """A named stretch of steps, inclusive at both ends (a run of the recipe, or a schedule phase)."""

    name: str
    first: int
    last: int


@dataclass(frozen=True)
class Timeline:
    """What every time-series panel draws behind its curves."""

    runs: tuple[Span, ...]
    """The recipe's runs in order (pretrain, cooldown, ...)."""
    phases: tuple[Span, ...]
    """Learning-rate schedule phases as logged in the `phase` field."""
    spike_steps: tuple[int, ...]
    """First steps of the detected loss spikes."""


@dataclass(frozen=True)
class Table:
    """Column names and rows of already formatted cells."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Panel:
    """One report section: a title, the figure (None if nothing was logged for it), a reading note, and a table."""

    title: str
    image: str | None
    note: str
    table: Table | None = None


def file_panel(title: str, path: Path) -> Panel:
    """A panel showing a PNG another step made (a case study's figure), embedded so the page stays self-contained."""
    if not path.is_file():
        return Panel(title, None, f"figure not found: {path}")
    return Panel(title, "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii"), f"from {path}")


def _figure(height: float = HEIGHT) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(WIDTH, height), dpi=DPI)
    figure.subplots_adjust(left=LEFT / WIDTH, right=1 - RIGHT / WIDTH, bottom=BOTTOM / height, top=1 - TOP / height)
    return figure, figure.subplots()


def _data_uri(figure: Figure) -> str:
    """The figure as a base64 PNG data URI."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _phase_color(name: str) -> str:
    return PHASE_COLORS.get(name.rsplit("/", 1)[-1], OTHER_PHASE_COLOR)


def _backdrop(axis: Axes, timeline: Timeline, label_phases: bool = False) -> None:
    """Shade schedule phases, mark run starts and spikes; name the phases on top when asked.

    Only phases wide enough to hold a name are named.
    """
    total = sum(phase.last - phase.first + 1 for phase in timeline.phases)
    for phase in timeline.phases:
        axis.axvspan(
            phase.first - 0.5, phase.last + 0.5, color=_phase_color(phase.name), alpha=0.45, linewidth=0, zorder=0
        )
        if label_phases and phase.last - phase.first + 1 >= 0.04 * total:
            axis.text(
                (phase.first + phase.last) / 2,
                1.01,
                phase.name,
                transform=axis.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    for run in timeline.runs[1:]:
        axis.axvline(run.first - 0.5, color="#374151", linestyle="--", linewidth=1, zorder=1)
        axis.text(
            run.first,
            0.98,
            f" {run.name} →",
            transform=axis.get_xaxis_transform(),
            ha="left",
            va="top",
            fontsize=8,
            color="#374151",
        )
    for step in timeline.spike_steps:
        axis.axvline(step, color=SPIKE_COLOR, alpha=0.35, linewidth=1, zorder=1)
    if timeline.runs:
        first, last = min(run.first for run in timeline.runs), max(run.last for run in timeline.runs)
        pad = max(0.5, 0.01 * (last - first))
        axis.set_xlim(first - pad, last + pad)  # the same step range in every panel, so they line up
    axis.set_xlabel("step")
    axis.grid(alpha=0.3)


def _log_scale_if_wide(axis: Axes, values: list[np.ndarray]) -> None:
    """Log y when positive values span more than 30x (norms early in training), so the tail stays readable."""
    finite = np.concatenate([v for v in values if len(v)]) if any(len(v) for v in values) else np.array([])
    if len(finite) and finite.min() > 0 and finite.max() / finite.min() > 30:
        axis.set_yscale("log")


def smooth(values: np.ndarray, span: float) -> np.ndarray:
    """Bias-corrected exponential moving average with time constant `span` points (what W&B's smoothing does)."""
    decay = math.exp(-1.0 / max(span, 1.0))
    out, average, weight = np.empty(len(values)), 0.0, 0.0
    for i, value in enumerate(values):
        average = decay * average + (1 - decay) * value
        weight = decay * weight + (1 - decay)
        out[i] = average / weight
    return out


def heldout_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Held-out bits-per-byte per domain and its averages, raw weights solid and EMA weights dashed."""
    title = "Held-out loss: bits-per-byte per domain"
    records = [r for rs in runs.values() for r in rs]
    names = sorted({k for r in records for k in r if k.startswith("eval/bpb/") and not k.endswith("_ema")})
    if not names:
        return Panel(
            title,
            None,
            "No in-loop evaluation was logged (TrainConfig.eval unset);"
            " offline checkpoint results, if any, are in the table below.",
        )
    figure, axis = _figure()
    _backdrop(axis, timeline)
    for index, name in enumerate(names):
        color = f"C{index}"
        for key, style in ((name, "-"), (f"{name}_ema", "--")):
            steps, values, _ = series(records, key)
            if len(values):
                axis.plot(
                    steps,
                    values,
                    style,
                    color=color,
                    marker="o",
                    markersize=3,
                    linewidth=1.4,
                    label=key.removeprefix("eval/bpb/"),
                )
    axis.set_ylabel("bits per byte")
    axis.legend(fontsize=8, ncol=min(4, 2 * len(names)))
    return Panel(
        title,
        _data_uri(figure),
        "Lower is better. Solid: raw weights; dashed: EMA weights (the gap is the EMA gap)."
        " If this rises while train loss falls, check the eval data before calling it overfitting.",
    )


def train_loss_panel(runs: dict[str, Records], timeline: Timeline, spikes: list[dict[str, object]]) -> Panel:
    """Raw train loss (thin) and its smoothed trend (thick) per run, spikes marked with their kind."""
    title = "Train loss (raw and smoothed)"
    figure, axis = _figure()
    _backdrop(axis, timeline)
    total = sum(len(rs) for rs in runs.values())
    span = min(100.0, max(3.0, total / 20))
    drawn = False
    for index, (label, records) in enumerate(runs.items()):
        steps, values, _ = series(records, "loss")
        if len(values):
            drawn = True
            axis.plot(steps, values, color=f"C{index}", alpha=0.35, linewidth=0.8, label=f"{label} (raw)")
            axis.plot(steps, smooth(values, span), color=f"C{index}", linewidth=1.8, label=f"{label} (smoothed)")
    if not drawn:
        return Panel(title, None, "No finite train loss was logged.")
    for spike in spikes:
        axis.annotate(
            str(spike["kind"]),
            (spike["step"], spike["baseline"] + spike["height"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
            color=SPIKE_COLOR,
        )
        axis.plot([spike["step"]], [spike["baseline"] + spike["height"]], "v", color=SPIKE_COLOR, markersize=6)
    axis.set_ylabel("loss (nats/token)")
    axis.legend(fontsize=8, ncol=len(runs), loc="lower left")  # a falling loss leaves that corner empty
    return Panel(
        title,
        _data_uri(figure),
        f"Smoothed: bias-corrected EMA over ~{span:.0f} points. Red marks: detected spikes (table below)."
        " A spike that rejoins the band is recoverable; a new higher level is a plateau.",
    )


def norm_panel(
    runs: dict[str, Records], timeline: Timeline, metric: str, title: str, limits: dict[str, float], note: str
) -> Panel:
    """A norm series per run, with horizontal clip levels (`limits`: label → value).

    Also a dashed `clip_update/threshold` if logged.
    """
    figure, axis = _figure()
    _backdrop(axis, timeline)
    drawn = []
    for index, (label, records) in enumerate(runs.items()):
        steps, values, _ = series(records, metric)
        if len(values):
            drawn.append(values)
            axis.plot(steps, values, color=f"C{index}", linewidth=1.0, label=label)
        if metric == "update_norm":
            steps, values, _ = series(records, "clip_update/threshold")
            if len(values):
                axis.plot(
                    steps,
                    values,
                    "--",
                    color=f"C{index}",
                    linewidth=0.9,
                    alpha=0.8,
                    label=f"{label} update-clip threshold",
                )
    if not drawn:
        return Panel(title, None, f"`{metric}` was not logged.")
    for label, value in limits.items():
        axis.axhline(value, color="#6b7280", linestyle=":", linewidth=1.2)
        axis.text(
            0.995,
            value,
            f"{label} ",
            transform=axis.get_yaxis_transform(),
            ha="right",
            va="bottom",
            fontsize=8,
            color="#374151",
        )
    _log_scale_if_wide(axis, drawn)
    axis.set_ylabel(metric)
    axis.legend(fontsize=8)
    return Panel(title, _data_uri(figure), note)


def lr_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Learning rate per run with the schedule phases shaded and named."""
    title = "Learning rate and schedule phase"
    figure, axis = _figure()
    _backdrop(axis, timeline, label_phases=True)
    drawn = False
    for index, (label, records) in enumerate(runs.items()):
        steps, values, _ = series(records, "lr")
        if len(values):
            drawn = True
            axis.plot(steps, values, color=f"C{index}", linewidth=1.6, label=label)
    if not drawn:
        return Panel(title, None, "`lr` was not logged.")
    axis.set_ylabel("learning rate")
    axis.legend(fontsize=8, loc="lower left")
    phases = ", ".join(f"{p.name} {p.first}–{p.last}" for p in timeline.phases) or "no `phase` field logged"
    return Panel(
        title, _data_uri(figure), f"Loss is not readable without knowing where in the schedule it is. Phases: {phases}."
    )


def throughput_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Tokens per second per run (each run's first step left out: it includes compilation) and MFU on a second axis."""
    title = "Throughput and MFU"
    figure, axis = _figure()
    _backdrop(axis, timeline)
    twin, drawn, mfu_logged = None, False, False
    for index, (label, records) in enumerate(runs.items()):
        steps, values, _ = series(records[1:], "tokens_per_s")
        if len(values):
            drawn = True
            axis.plot(steps, values, color=f"C{index}", linewidth=0.9, label=f"{label} tokens/s")
        mfu_steps, mfu_values, _ = series(records[1:], "mfu")
        if len(mfu_values):
            mfu_logged = True
            twin = twin or axis.twinx()
            twin.plot(mfu_steps, 100 * mfu_values, ":", color=f"C{index}", linewidth=1.2, label=f"{label} MFU")
    if not drawn:
        return Panel(title, None, "`tokens_per_s` was not logged.")
    axis.set_ylabel("tokens / s")
    axis.set_ylim(bottom=0)
    axis.legend(fontsize=8, loc="lower left")
    if twin is not None:
        twin.set_ylabel("MFU (%)")
        twin.set_ylim(bottom=0)
        twin.legend(fontsize=8, loc="lower right")
    mfu_note = (
        "MFU dotted, right axis."
        if mfu_logged
        else "MFU was not logged (the device's peak FLOP/s is unknown, e.g. a CPU; set TOOTSIE_PEAK_FLOPS to log it)."
    )
    return Panel(
        title,
        _data_uri(figure),
        "The money line: a drop at constant loss slope is paid for."
        f" Each run's first step (compilation) is left out. {mfu_note}",
    )


def events_panel(events: dict[str, list[int]], timeline: Timeline, settings: str) -> Panel:
    """One row per clip/skip signal that could be read, a tick at every step where it fired."""
    title = "Clip and skip events"
    if not events:
        return Panel(title, None, f"No clip or skip signal could be read. Settings: {settings}.")
    figure, axis = _figure(BOTTOM + TOP + 0.45 * len(events))
    _backdrop(axis, timeline)
    for row, (name, steps) in enumerate(events.items()):
        axis.plot(steps, [row] * len(steps), "|", color=SPIKE_COLOR, markersize=12, markeredgewidth=1.5)
        axis.text(
            0.003, row + 0.18, f"{name}: {len(steps)}", transform=axis.get_yaxis_transform(), fontsize=8, va="bottom"
        )
    axis.set_yticks([])
    axis.set_ylim(-0.5, len(events) - 0.1)
    return Panel(
        title,
        _data_uri(figure),
        "One row per signal with its count; a tick per step where it fired."
        " Grad clipping bounds Adam's input, update clipping the step taken, skipping drops the step."
        f" Settings: {settings}.",
    )


def mixture_panel(curves: dict[str, tuple[np.ndarray, dict[str, np.ndarray]]], timeline: Timeline) -> Panel:
    """Target mixture weights against step, stacked, from each run's mixture stages.

    `curves`: run → steps, component → weights.
    """
    title = "Data mixture by phase"
    if not curves:
        return Panel(title, None, "No run config with mixture stages was found.")
    figure, axis = _figure()
    _backdrop(axis, timeline)
    components = sorted({name for _, weights in curves.values() for name in weights})
    for index, (steps, weights) in enumerate(curves.values()):
        stacked = [weights.get(name, np.zeros(len(steps))) for name in components]
        axis.stackplot(
            steps,
            *stacked,
            colors=[MIXTURE_COLORS[i % len(MIXTURE_COLORS)] for i in range(len(components))],
            alpha=0.8,
            labels=components if index == 0 else (),
        )
    axis.set_ylim(0, 1)
    axis.set_ylabel("target weight")
    axis.legend(fontsize=8, loc="lower left")
    return Panel(
        title,
        _data_uri(figure),
        "Target weights of each component by step, from the runs' MixtureConfig stages"
        " (interpolated through transitions); exact numbers in the table.",
    )
