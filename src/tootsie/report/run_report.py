"""The run report: one self-contained `report.html` that reads a run the way the curve-reading guide does.

Input is a directory holding `metrics.jsonl`: a training output directory (its
config from the executor's `.executor_info.json` or `tootsie train`'s
`config.json`), or a summary directory whose merged metrics label every record
with its `run` (pretrain, cooldown) and whose `summary.json` names each run's
directory and holds offline bits-per-byte. The page shows the guide's panels
in its order — held-out BPB per domain, train loss raw and smoothed, gradient
norm, update norm, the optimizer's inner signals, for an MoE run its router
panels (`moe_panels`: expert load per block, drops and balance, router losses;
absent for a dense run), for an RL run its panels (`rl_panels`: reward and
held-out exact match, KL against its bound, clipping, entropy and length;
absent without `rl/` metrics), learning rate with schedule phases, throughput
and MFU, clip/skip events — then the spike table (`find_spikes`), the data mixture by
phase, the configs, and what was skipped reading damaged metrics (unparseable
lines, non-finite values, step gaps): a damaged file still gives a report.
Plots are base64 PNG inside the HTML, so the file can be mailed or archived alone.
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.executor.portable import portable
from tootsie.monitor.metrics_log import MetricsRead
from tootsie.monitor.spikes import find_spikes
from tootsie.report.data import (
    X_AXES,
    RunData,
    RunDirectory,
    directory_names,
    get,
    load_runs,
    on_tokens,
    step_to_tokens,
    steps_to_tokens,
)
from tootsie.report.html import ReportContent, RunConfig, render_page
from tootsie.report.moe_panels import moe_panels
from tootsie.report.panels import (
    Records,
    Span,
    Table,
    Timeline,
    events_panel,
    file_panel,
    heldout_panel,
    lr_panel,
    mixture_panel,
    norm_panel,
    throughput_panel,
    train_loss_panel,
)
from tootsie.report.rl_panels import rl_panels
from tootsie.report.signal_panels import (
    ATTENTION_LOGITS,
    adam_moments_panel,
    layer_heatmap_panel,
    output_logits_panel,
)
from tootsie.report.tables import bpb_table, damage, damage_lines, overview_table, rewind_table, spike_table
from tootsie.storage import write_bytes

REPORT_FILE = "report.html"
MIXTURE_POINTS = 600


def _phases(records: Records) -> tuple[Span, ...]:
    """Contiguous stretches of the logged schedule `phase`."""
    spans: list[Span] = []
    for record in records:
        phase, step = record.get("phase"), record.get("step")
        if not isinstance(phase, str) or not isinstance(step, int):
            continue
        if spans and spans[-1].name == phase:
            spans[-1] = Span(phase, spans[-1].first, step)
        else:
            spans.append(Span(phase, step, step))
    return tuple(spans)


def _mixture(run: RunData) -> MixtureConfig:
    """The run's mixture stages as a MixtureConfig (caches by name only), so weights come from `weights_at`."""
    stages = get(run.config, "data", "stages")
    if not isinstance(stages, list) or not stages:
        raise ValueError("no data.stages in the config")
    built = tuple(
        MixtureStage(
            int(s["start_step"]), {str(k): float(v) for k, v in s["weights"].items()}, int(s.get("transition_steps", 0))
        )
        for s in stages
    )
    caches = get(run.config, "data", "caches")
    names = set(caches) if isinstance(caches, dict) else {name for stage in built for name in stage.weights}
    return MixtureConfig(caches={name: "" for name in names}, stages=built)


def mixture_by_phase(
    runs: tuple[RunData, ...],
) -> tuple[list[dict[str, object]], dict[str, tuple[np.ndarray, dict[str, np.ndarray]]], list[str]]:
    """Table rows (run, stage, steps, transition, weights), per-run weight curves over the logged steps, and notes.

    The notes name runs without a mixture.
    """
    rows, curves, notes = [], {}, []
    for run in runs:
        span = run.span
        try:
            mixture = _mixture(run)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            notes.append(f"{run.label}: mixture unknown ({error if run.config else 'no config found'})")
            continue
        first = span.first if span else 0
        last = span.last if span else int(get(run.config, "num_steps") or 1) - 1
        starts = [stage.start_step for stage in mixture.stages]
        for index, stage in enumerate(mixture.stages):
            stage_last = starts[index + 1] - 1 if index + 1 < len(starts) else last
            if stage_last < first:
                continue
            weights = dict(
                zip(
                    mixture.component_names,
                    mixture.weights_at(max(stage.start_step + stage.transition_steps - 1, stage.start_step)),
                )
            )
            reached = stage.start_step <= last
            steps = (
                f"{max(stage.start_step, first)}–{min(stage_last, last)}"
                if reached
                else f"from {stage.start_step} (not reached)"
            )
            rows.append(
                {
                    "run": run.label,
                    "stage": index,
                    "steps": steps,
                    "transition_steps": stage.transition_steps,
                    "weights": weights,
                }
            )
        grid = np.unique(
            np.concatenate(
                [np.linspace(first, last, MIXTURE_POINTS).round(), [s for s in starts if first <= s <= last]]
            ).astype(np.int64)
        )
        table = np.array([mixture.weights_at(int(step)) for step in grid])
        curves[run.label] = (grid, {name: table[:, i] for i, name in enumerate(mixture.component_names)})
    return rows, curves, notes


def clip_skip_events(runs: tuple[RunData, ...]) -> tuple[dict[str, list[int]], str]:
    """Steps where each readable clip/skip signal fired, and the per-run settings that explain them."""
    records = [r for run in runs for r in run.records]
    events: dict[str, list[int]] = {}
    limits = {run.label: get(run.config, "optimizer", "max_grad_norm") for run in runs}
    if any(isinstance(v, (int, float)) for v in limits.values()):
        events["grad norm > max_grad_norm"] = [
            r["step"]
            for run in runs
            for r in run.records
            if isinstance(limits[run.label], (int, float))
            and isinstance(r.get("grad_norm"), (int, float))
            and r["grad_norm"] > limits[run.label]
        ]
    for name, key in (("update clipped", "clip_update/clipped"), ("step skipped", "skip/skipped")):
        if any(key in r for r in records):
            events[name] = [r["step"] for r in records if isinstance(r.get(key), (int, float)) and r[key] > 0.5]
    if any("loss" in r for r in records):
        events["non-finite loss"] = [
            r["step"]
            for r in records
            if "loss" in r and not (isinstance(r["loss"], (int, float)) and np.isfinite(r["loss"]))
        ]
    settings = []
    for run in runs:
        if run.config is None:
            settings.append(f"{run.label}: config not found")
            continue
        window = get(run.config, "stability", "clip_update_window")
        clip = (
            f"update clip σ={get(run.config, 'stability', 'clip_update_sigma')} over {window}"
            if window
            else "update clipping off"
        )
        skip = "skip_bad_steps on" if get(run.config, "stability", "skip_bad_steps") else "skip_bad_steps off"
        settings.append(f"{run.label}: max_grad_norm={limits[run.label]}, {clip}, {skip}")
    return events, "; ".join(settings)


def _grad_limits(runs: tuple[RunData, ...]) -> dict[str, float]:
    """The gradient clip levels of the runs, labelled (with the runs' names when they differ)."""
    values: dict[float, list[str]] = {}
    for run in runs:
        value = get(run.config, "optimizer", "max_grad_norm")
        if isinstance(value, (int, float)):
            values.setdefault(float(value), []).append(run.label)
    return {
        f"max_grad_norm={value:g}" + (f" ({', '.join(labels)})" if len(values) > 1 else ""): value
        for value, labels in values.items()
    }


def _first_moe_block(run: RunData) -> int:
    """The model's index of a run's first MoE block: its `model.dense_layers` (0 when absent)."""
    dense = get(run.config, "model", "dense_layers")
    return dense if isinstance(dense, int) else 0


def find_run_spikes(data: RunDirectory) -> dict[str, object]:
    """The spike report of every compared directory (spikes tagged with its `run`), or of the one directory."""
    groups = sorted({run.group for run in data.runs})
    names = directory_names(list(data.compared)) if data.compared else []
    reports = {
        group: find_spikes(
            MetricsRead([r for run in data.runs if run.group == group for r in run.records], data.skipped_lines)
        )
        for group in groups
    }
    if not data.compared:
        return reports[groups[0]] if groups else find_spikes(MetricsRead([], data.skipped_lines))
    return {
        "spikes": [{"run": names[g], **s} for g, report in reports.items() for s in report["spikes"]],
        "points": sum(int(report["points"]) for report in reports.values()),
        "ema_gap": [gap for report in reports.values() for gap in report.get("ema_gap", [])],
    }


def _colors(data: RunDirectory) -> dict[str, str]:
    """A colour per run, or per directory when several are compared (the reference first, C0)."""
    if data.compared:
        return {run.label: f"C{run.group % 10}" for run in data.runs}
    return {run.label: f"C{index % 10}" for index, run in enumerate(data.runs)}


def spike_positions(logged: RunDirectory, spikes: list[dict[str, object]], x: str) -> tuple[int, ...]:
    """Each spike's place on the x axis: its train step, or the tokens its own directory had trained on by then.

    `logged` holds the runs with their steps as logged (not yet mapped to tokens); a directory's runs (its
    phases) are read together, so a spike in a later phase maps through that phase's tokens.
    """
    if x != "tokens":
        return tuple(int(s["step"]) for s in spikes)
    names = directory_names(list(logged.compared)) if logged.compared else []
    groups: dict[int, list[RunData]] = {}
    for run in logged.runs:
        groups.setdefault(run.group, []).append(run)
    merged = {
        group: replace(runs[0], records=sorted((r for run in runs for r in run.records), key=lambda r: r["step"]))
        for group, runs in groups.items()
    }
    return tuple(step_to_tokens(merged[names.index(s["run"]) if "run" in s else 0], s["step"]) for s in spikes)


def _timeline(data: RunDirectory, spike_x: tuple[int, ...], x: str) -> Timeline:
    """The shared backdrop: the reference directory's runs and phases, every run's x range, spikes and rewinds."""
    reference = [run for run in data.runs if run.group == 0]
    records = sorted((r for run in reference for r in run.records), key=lambda r: r["step"])
    spans = [s for s in (run.span for run in data.runs) if s]
    return Timeline(
        tuple(s for s in (run.span for run in reference) if s),
        _phases(records),
        spike_x,
        colors=_colors(data),
        rewinds=tuple((run.label, rewind) for run in data.runs for rewind in run.rewinds),
        limits=(min(s.first for s in spans), max(s.last for s in spans)) if spans else None,
        x_label="tokens" if x == "tokens" else "step",
        compare=bool(data.compared),
    )


def build_content(
    data: RunDirectory, spike_report: dict[str, object], skipped: dict[str, object], x: str = "step"
) -> ReportContent:
    """Every section of the page: overview, the guide's panels in its order, spikes, mixture, configs, skipped data.

    `data` is drawn as given; with `x="tokens"` the mixture is read from its steps and mapped to tokens.
    """
    shown = on_tokens(data) if x == "tokens" else data
    runs = {run.label: run.records for run in shown.runs}
    spikes = spike_report["spikes"]
    timeline = _timeline(shown, spike_positions(data, spikes, x), x)
    marked = [{**s, "step": at} for s, at in zip(spikes, timeline.spike_steps)]
    rows, curves, notes = mixture_by_phase(tuple(run for run in data.runs if run.group == 0))
    if x == "tokens":
        by_label = {run.label: run for run in data.runs}
        curves = {
            label: (steps_to_tokens(by_label[label], steps), weights) for label, (steps, weights) in curves.items()
        }
    events, settings = clip_skip_events(shown.runs)
    heldout = heldout_panel(runs, timeline)
    panels = (
        replace(heldout, table=bpb_table(data.summary, list(runs))),
        replace(train_loss_panel(runs, timeline, marked), table=rewind_table(data.runs)),
        norm_panel(
            runs,
            timeline,
            "grad_norm",
            "Gradient norm (pre-clip)",
            _grad_limits(data.runs),
            "Leading indicator: grad norms often spike a step or more before the loss (faint red lines: loss spikes)."
            " Dotted: the clip level.",
        ),
        norm_panel(
            runs,
            timeline,
            "update_norm",
            "Update norm (post-optimizer)",
            {},
            "The size of the step actually taken; often the better lever for 'was this a wild step?'."
            " Dashed: update-clip threshold when on.",
        ),
        layer_heatmap_panel(runs, timeline),
        adam_moments_panel(runs, timeline),
        norm_panel(
            runs,
            timeline,
            "lm_head_norm",
            "lm_head norm",
            {},
            "Norm of the output projection (the embedding when tied): steady growth is normal,"
            " a jump means the logits' scale moved.",
        ),
        norm_panel(
            runs,
            timeline,
            "embed_norm",
            "Embedding norm",
            {},
            "Norm of the token embedding matrix: under AdamW without decay on it, it can grow for the whole run"
            " (the weekly update's 1e22 run: 176 to 3700).",
        ),
        layer_heatmap_panel(runs, timeline, ATTENTION_LOGITS),
        output_logits_panel(runs, timeline),
        *moe_panels(runs, timeline, {run.label: _first_moe_block(run) for run in shown.runs}),
        *rl_panels(runs, timeline),
        lr_panel(runs, timeline),
        throughput_panel(runs, timeline),
        events_panel(events, timeline, settings),
    )
    mixture = mixture_panel(curves, timeline)
    components = sorted({name for row in rows for name in row["weights"]})
    mixture_rows = tuple(
        (
            row["run"],
            str(row["stage"]),
            row["steps"],
            str(row["transition_steps"]),
            *(f"{100 * row['weights'].get(c, 0.0):.1f}%" for c in components),
        )
        for row in rows
    )
    mixture = replace(
        mixture,
        note=" ".join([mixture.note, *notes, *(["(the reference run's mixture)"] if data.compared else [])]),
        table=Table(("run", "stage", "steps", "transition steps", *components), mixture_rows),
    )
    spikes_table, spike_note = spike_table(spike_report)
    names = [d.resolve().name for d in data.compared] or [data.directory.resolve().name]
    return ReportContent(
        title=f"Run report: {names[0]}" + (f" vs {', '.join(names[1:])}" if names[1:] else ""),
        directory=", ".join(portable(str(d.resolve())) for d in data.compared or (data.directory,)),
        overview=overview_table(data),
        panels=panels,
        spikes=spikes_table,
        spike_note=spike_note,
        mixture=mixture,
        configs=tuple(RunConfig(r.label, r.config_source, r.config) for r in data.runs),
        skipped=damage_lines(skipped),
    )


def write_report(
    directory: str | Path | Sequence[str | Path],
    output: str | Path | None = None,
    figures: Mapping[str, str | Path] | None = None,
    x: str = "step",
) -> dict[str, object]:
    """Write the HTML report of one run or summary directory, or of several overlaid; return what it holds.

    The default output is `<first directory>/report.html`. Several directories are compared on the same panels,
    the first as the reference. `x` is "step" or "tokens". `figures` (title → PNG file) are embedded after the
    guide's panels: a case study's own figure, say.
    """
    if x not in X_AXES:
        raise TootsieError(f"x axis {x!r} is not one of {X_AXES}; pass --x step or --x tokens")
    started = time.perf_counter()
    data = load_runs([directory] if isinstance(directory, (str, Path)) else list(directory))
    spike_report = find_run_spikes(data)
    skipped = damage(data)
    content = build_content(data, spike_report, skipped, x)
    content = replace(
        content, panels=content.panels + tuple(file_panel(title, Path(path)) for title, path in (figures or {}).items())
    )
    target = Path(output) if output else data.directory / REPORT_FILE
    write_bytes(str(target), render_page(content).encode("utf-8"))
    spike_keys = (
        "run",
        "step",
        "height",
        "kind",
        "norm_led",
        "lead_steps",
        "layer_led",
        "layer_lead_steps",
        "attn_layer_led",
        "attn_layer_lead_steps",
    )
    return {
        "report": str(target),
        "bytes": target.stat().st_size,
        "seconds": round(time.perf_counter() - started, 3),
        "runs": {
            run.label: {
                "records": len(run.records),
                "first_step": run.span.first if run.span else None,
                "last_step": run.span.last if run.span else None,
                "config": run.config_source,
                "rewinds": [r.to_json() for r in run.rewinds],
            }
            for run in data.runs
        },
        "panels": {panel.title: panel.image is not None for panel in (*content.panels, content.mixture)},
        "traces": {panel.title: list(panel.traces) for panel in (*content.panels, content.mixture) if panel.traces},
        "spikes": [{k: s[k] for k in spike_keys if k in s} for s in spike_report["spikes"]],
        "skipped": skipped,
    }
