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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tootsie.executor.portable import portable
from tootsie.monitor.signals import Rewind, series

Records = list[dict[str, object]]
WIDTH, HEIGHT, DPI = 11.0, 3.2, 100
"""Figure size in inches and resolution: 1100 px wide, the page's content width."""
LEFT, RIGHT, BOTTOM, TOP = 0.8, 0.75, 0.5, 0.3
"""Fixed margins in inches, the same for every panel so their step axes line up (and no tight_layout pass is paid)."""
PHASE_COLORS = {"warmup": "#fde68a", "rewarmup": "#fde68a", "stable": "#d1fae5", "decay": "#bfdbfe"}
OTHER_PHASE_COLOR = "#e5e7eb"
SPIKE_COLOR = "#dc2626"
REWIND_COLOR = "#7c3aed"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""Per-domain markers when compared runs are coloured by run."""
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
    colors: Mapping[str, str] = field(default_factory=dict)
    """Run label → the colour of its curves (runs of one compared directory share one)."""
    rewinds: tuple[tuple[str, Rewind], ...] = ()
    """(run label, rewind): the re-run window of each is shaded, the loss panel draws the jump back."""
    limits: tuple[int, int] | None = None
    """First and last x of every run, so every panel has the same x range (None: from `runs`)."""
    x_label: str = "step"
    compare: bool = False
    """Several directories overlaid: curves are coloured by run, not by domain or series."""

    def color(self, label: str) -> str:
        """The colour of a run's curves."""
        return self.colors.get(label, "C0")


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
    traces: tuple[str, ...] = ()
    """The run label of every curve drawn (one entry per curve), read back from the figure."""


def file_panel(title: str, path: Path) -> Panel:
    """A panel showing a PNG another step made (a case study's figure), embedded so the page stays self-contained."""
    where = portable(path)
    if not path.is_file():
        return Panel(title, None, f"figure not found: {where}")
    return Panel(title, "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii"), f"from {where}")


def panel_figure(height: float = HEIGHT) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(WIDTH, height), dpi=DPI)
    figure.subplots_adjust(left=LEFT / WIDTH, right=1 - RIGHT / WIDTH, bottom=BOTTOM / height, top=1 - TOP / height)
    return figure, figure.subplots()


def _data_uri(figure: Figure) -> str:
    """The figure as a base64 PNG data URI."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def traces(figure: Figure) -> tuple[str, ...]:
    """The run label (`gid`) of every curve on the figure's axes, in drawing order."""
    return tuple(
        artist.get_gid()
        for axis in figure.axes
        for artist in (*axis.lines, *axis.collections, *axis.images)
        if artist.get_gid()
    )


def run_curve(
    axis: Axes, timeline: Timeline, run: str, steps: np.ndarray, values: np.ndarray, *fmt: str, **style: object
) -> None:
    """Plot one run's series in the run's color, tagged with the run's label (`gid`) so `traces` reads it back."""
    axis.plot(steps, values, *fmt, color=timeline.color(run), gid=run, **style)


def finished(title: str, figure: Figure, note: str, table: Table | None = None) -> Panel:
    """The panel of a drawn figure: its PNG, and the runs of its curves read back from it."""
    return Panel(title, _data_uri(figure), note, table, traces(figure))


def _phase_color(name: str) -> str:
    return PHASE_COLORS.get(name.rsplit("/", 1)[-1], OTHER_PHASE_COLOR)


def step_note(axis: Axes, step: float, height: float, text: str, *, ha: str, va: str, **style: object) -> None:
    """Small text at `step` on the x axis and `height` as a fraction of the axes (phase names, run starts, rewinds)."""
    axis.text(step, height, text, transform=axis.get_xaxis_transform(), ha=ha, va=va, fontsize=8, **style)


def backdrop(axis: Axes, timeline: Timeline, label_phases: bool = False) -> None:
    """Shade schedule phases, mark run starts and spikes; name the phases on top when asked.

    Only phases wide enough to hold a name are named.
    """
    total = sum(phase.last - phase.first + 1 for phase in timeline.phases)
    for phase in timeline.phases:
        axis.axvspan(
            phase.first - 0.5, phase.last + 0.5, color=_phase_color(phase.name), alpha=0.45, linewidth=0, zorder=0
        )
        if label_phases and phase.last - phase.first + 1 >= 0.04 * total:
            step_note(axis, (phase.first + phase.last) / 2, 1.01, phase.name, ha="center", va="bottom")
    for run in timeline.runs[1:]:
        axis.axvline(run.first - 0.5, color="#374151", linestyle="--", linewidth=1, zorder=1)
        step_note(axis, run.first, 0.98, f" {run.name} →", ha="left", va="top", color="#374151")
    for step in timeline.spike_steps:
        axis.axvline(step, color=SPIKE_COLOR, alpha=0.35, linewidth=1, zorder=1)
    for label, rewind in timeline.rewinds:  # the steps trained on the skipped data, then re-run
        axis.axvspan(
            rewind.to_step,
            rewind.from_step,
            facecolor="none",
            edgecolor=timeline.color(label),
            hatch="///",
            alpha=0.5,
            linewidth=0,
            zorder=0,
        )
    limits = timeline.limits or (
        (min(run.first for run in timeline.runs), max(run.last for run in timeline.runs)) if timeline.runs else None
    )
    if limits:
        first, last = limits
        pad = max(0.5, 0.01 * (last - first))
        axis.set_xlim(first - pad, last + pad)  # the same x range in every panel, so they line up
    axis.set_xlabel(timeline.x_label)
    axis.grid(alpha=0.3)


def log_scale_if_wide(axis: Axes, values: list[np.ndarray]) -> None:
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
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    groups = runs if timeline.compare else {"": records}  # compared runs overlap in steps: one curve set per run
    for label, group in groups.items():
        for index, name in enumerate(names):
            for key, style in ((name, "-"), (f"{name}_ema", "--")):
                steps, values, _ = series(group, key)
                if len(values):
                    axis.plot(
                        steps,
                        values,
                        style,
                        color=timeline.color(label) if timeline.compare else f"C{index}",
                        marker=MARKERS[index % len(MARKERS)] if timeline.compare else "o",
                        markersize=3,
                        linewidth=1.4,
                        label=f"{label} {key.removeprefix('eval/bpb/')}".strip(),
                        gid=label or None,
                    )
    axis.set_ylabel("bits per byte")
    axis.legend(fontsize=8, ncol=min(4, 2 * len(names)))
    return finished(
        title,
        figure,
        "Lower is better. Solid: raw weights; dashed: EMA weights (the gap is the EMA gap)."
        " If this rises while train loss falls, check the eval data before calling it overfitting.",
    )


def train_loss_panel(runs: dict[str, Records], timeline: Timeline, spikes: list[dict[str, object]]) -> Panel:
    """Raw train loss (thin) and its smoothed trend (thick) per run, spikes marked with their kind."""
    title = "Train loss (raw and smoothed)"
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    total = sum(len(rs) for rs in runs.values())
    span = min(100.0, max(3.0, total / 20))
    drawn = False
    for label, records in runs.items():
        steps, values, _ = series(records, "loss")
        if len(values):
            drawn = True
            run_curve(axis, timeline, label, steps, values, alpha=0.35, linewidth=0.8, label=f"{label} (raw)")
            run_curve(axis, timeline, label, steps, smooth(values, span), linewidth=1.8, label=f"{label} (smoothed)")
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
    _draw_rewinds(axis, timeline)
    axis.set_ylabel("loss (nats/token)")
    axis.legend(fontsize=8, ncol=len(runs), loc="lower left")  # a falling loss leaves that corner empty
    return finished(
        title,
        figure,
        f"Smoothed: bias-corrected EMA over ~{span:.0f} points. Red marks: detected spikes (table below)."
        " A spike that rejoins the band is recoverable; a new higher level is a plateau."
        + (
            f" Purple arrows: {len(timeline.rewinds)} rewind(s) (rewinds.json), from the step where the plateau was"
            " final back to the checkpoint; hatched: the steps first trained on the skipped data, then re-run."
            if timeline.rewinds
            else ""
        ),
    )


def _draw_rewinds(axis: Axes, timeline: Timeline) -> None:
    """An arrow from the step where each rewind fired back to its checkpoint, labelled with both."""
    for _, rewind in timeline.rewinds:
        axis.annotate(
            "",
            xy=(rewind.to_step, 0.9),
            xytext=(rewind.from_step, 0.9),
            xycoords=axis.get_xaxis_transform(),
            arrowprops={"arrowstyle": "->", "color": REWIND_COLOR, "linewidth": 1.6},
        )
        middle = (rewind.to_step + rewind.from_step) / 2
        text = f"rewind {rewind.from_step}→{rewind.to_step}"
        step_note(axis, middle, 0.92, text, ha="center", va="bottom", color=REWIND_COLOR)


def norm_panel(
    runs: dict[str, Records], timeline: Timeline, metric: str, title: str, limits: dict[str, float], note: str
) -> Panel:
    """A norm series per run, with horizontal clip levels (`limits`: label → value).

    Also a dashed `clip_update/threshold` if logged.
    """
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    drawn = []
    for label, records in runs.items():
        steps, values, _ = series(records, metric)
        if len(values):
            drawn.append(values)
            run_curve(axis, timeline, label, steps, values, linewidth=1.0, label=label)
        if metric == "update_norm":
            steps, values, _ = series(records, "clip_update/threshold")
            if len(values):
                axis.plot(
                    steps,
                    values,
                    "--",
                    color=timeline.color(label),
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
    log_scale_if_wide(axis, drawn)
    axis.set_ylabel(metric)
    axis.legend(fontsize=8)
    return finished(title, figure, note)


def lr_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Learning rate per run with the schedule phases shaded and named."""
    title = "Learning rate and schedule phase"
    figure, axis = panel_figure()
    backdrop(axis, timeline, label_phases=True)
    drawn = False
    for label, records in runs.items():
        steps, values, _ = series(records, "lr")
        if len(values):
            drawn = True
            run_curve(axis, timeline, label, steps, values, linewidth=1.6, label=label)
    if not drawn:
        return Panel(title, None, "`lr` was not logged.")
    axis.set_ylabel("learning rate")
    axis.legend(fontsize=8, loc="lower left")
    phases = ", ".join(f"{p.name} {p.first}–{p.last}" for p in timeline.phases) or "no `phase` field logged"
    return finished(
        title, figure, f"Loss is not readable without knowing where in the schedule it is. Phases: {phases}."
    )


def throughput_panel(runs: dict[str, Records], timeline: Timeline) -> Panel:
    """Tokens per second per run (each run's first step left out: it includes compilation) and MFU on a second axis."""
    title = "Throughput and MFU"
    figure, axis = panel_figure()
    backdrop(axis, timeline)
    twin, drawn, mfu_logged = None, False, False
    for label, records in runs.items():
        steps, values, _ = series(records[1:], "tokens_per_s")
        if len(values):
            drawn = True
            run_curve(axis, timeline, label, steps, values, linewidth=0.9, label=f"{label} tokens/s")
        mfu_steps, mfu_values, _ = series(records[1:], "mfu")
        if len(mfu_values):
            mfu_logged = True
            twin = twin or axis.twinx()
            run_curve(twin, timeline, label, mfu_steps, 100 * mfu_values, ":", linewidth=1.2, label=f"{label} MFU")
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
    return finished(
        title,
        figure,
        "The money line: a drop at constant loss slope is paid for."
        f" Each run's first step (compilation) is left out. {mfu_note}",
    )


def events_panel(events: dict[str, list[int]], timeline: Timeline, settings: str) -> Panel:
    """One row per clip/skip signal that could be read, a tick at every step where it fired."""
    title = "Clip and skip events"
    if not events:
        return Panel(title, None, f"No clip or skip signal could be read. Settings: {settings}.")
    figure, axis = panel_figure(BOTTOM + TOP + 0.45 * len(events))
    backdrop(axis, timeline)
    for row, (name, steps) in enumerate(events.items()):
        axis.plot(steps, [row] * len(steps), "|", color=SPIKE_COLOR, markersize=12, markeredgewidth=1.5)
        axis.text(
            0.003, row + 0.18, f"{name}: {len(steps)}", transform=axis.get_yaxis_transform(), fontsize=8, va="bottom"
        )
    axis.set_yticks([])
    axis.set_ylim(-0.5, len(events) - 0.1)
    return finished(
        title,
        figure,
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
    figure, axis = panel_figure()
    backdrop(axis, timeline)
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
    return finished(
        title,
        figure,
        "Target weights of each component by step, from the runs' MixtureConfig stages"
        " (interpolated through transitions); exact numbers in the table.",
    )
