"""The run report's tables, and what reading the metrics had to skip.

`overview_table` (per run: steps, tokens, final loss, throughput, config
source), `bpb_table` (offline bits-per-byte by checkpoint from a summary),
`spike_table` (the spike detector's findings and how they were found) and
`rewind_table`; `damage` counts what reading `metrics.jsonl` left out
(unparseable lines, records without a step, non-finite values, missing steps)
and `damage_lines` says it in sentences, so a damaged file still gives a report
that says what it could not show.

Example: a run whose log has steps 0-9 and 15-19 gives `damage(...)["runs"][label]`
= `{"non_finite": {}, "missing_steps": 5, "gaps": [(10, 14)]}`.
"""

from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.monitor.signals import series
from tootsie.monitor.spikes import SpikeConfig
from tootsie.report.data import RunData, RunDirectory
from tootsie.report.panels import Records, Table

CHECKED_METRICS = ("loss", "grad_norm", "update_norm", "lr", "tokens_per_s")
"""Series whose null or non-finite values count as damage (`mfu` is null by design on devices of unknown peak)."""


def damage(data: RunDirectory) -> dict[str, object]:
    """What reading the metrics skipped.

    Unparseable lines, records without a step, non-finite values and missing steps per run.
    """
    per_run = {}
    for run in data.runs:
        nonfinite = {name: series(run.records, name)[2] for name in CHECKED_METRICS}
        steps = sorted({r["step"] for r in run.records})
        gaps = [(a + 1, b - 1) for a, b in zip(steps, steps[1:]) if b > a + 1]
        per_run[run.label] = {
            "non_finite": {k: v for k, v in nonfinite.items() if v},
            "missing_steps": sum(b - a + 1 for a, b in gaps),
            "gaps": gaps[:10],
        }
    return {
        "unparseable_lines": data.skipped_lines,
        "records_without_step": data.stepless,
        "runs": per_run,
        "summary_skipped_lines": data.summary.get("skipped_metric_lines"),
    }


def damage_lines(skipped: dict[str, object]) -> tuple[str, ...]:
    """The skipped-data findings as sentences for the page."""
    lines = []
    if skipped["unparseable_lines"]:
        lines.append(
            f"{skipped['unparseable_lines']} unparseable line(s) of {METRICS_FILE} skipped"
            " (a truncated last line or damaged records)."
        )
    if skipped["records_without_step"]:
        lines.append(f"{skipped['records_without_step']} record(s) without an integer step left out of every panel.")
    if isinstance(skipped["summary_skipped_lines"], dict) and any(skipped["summary_skipped_lines"].values()):
        lines.append(
            "Unparseable lines skipped in the runs' own metrics when they were merged:"
            f" {skipped['summary_skipped_lines']}."
        )
    for label, run in skipped["runs"].items():
        if run["non_finite"]:
            counts = ", ".join(f"{name} {count}" for name, count in run["non_finite"].items())
            lines.append(f"{label}: null or non-finite values left out of the curves: {counts}.")
        if run["missing_steps"]:
            ranges = ", ".join(f"{a}–{b}" if a != b else str(a) for a, b in run["gaps"])
            lines.append(
                f"{label}: {run['missing_steps']} step(s) missing from the log (gaps at {ranges}); curves bridge them."
            )
    return tuple(lines) or ("Nothing: every line parsed, no step is missing, every plotted value is finite.",)


def _fmt(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value).lower()
    if isinstance(value, float):
        return f"{int(value):,}" if value.is_integer() and abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)


def _last_finite(records: Records, name: str) -> float | None:
    values = series(records, name)[1]
    return float(values[-1]) if len(values) else None


def overview_table(data: RunDirectory) -> Table:
    """Per run: steps, records, tokens, final loss, mean throughput (first step left out), step time, config source."""
    rows = []
    for run in data.runs:
        span = run.span
        throughput = series(run.records[1:], "tokens_per_s")[1]
        seconds = series(run.records, "step_seconds")[1]
        rows.append(
            (
                run.label,
                f"{span.first}–{span.last}" if span else "—",
                str(len(run.records)),
                _fmt(_last_finite(run.records, "tokens")),
                _fmt(_last_finite(run.records, "loss")),
                _fmt(float(throughput.mean()) if len(throughput) else None),
                _fmt(float(seconds.sum()) if len(seconds) else None),
                run.config_source or "not found",
            )
        )
    return Table(
        ("run", "steps", "records", "tokens", "final loss", "mean tokens/s", "step seconds", "config"), tuple(rows)
    )


def bpb_table(summary: dict[str, object], labels: list[str]) -> Table | None:
    """Offline bits-per-byte by checkpoint (init, the runs, final; EMA rows after raw ones) from the summary, if any."""
    bpb = summary.get("bpb")
    if not isinstance(bpb, dict) or not bpb:
        return None

    def order(name: str) -> tuple[int, bool]:
        base = name.removesuffix("_ema")
        rank = (
            0
            if base == "init"
            else 1 + labels.index(base)
            if base in labels
            else len(labels) + (2 if base == "final" else 1)
        )
        return rank, name.endswith("_ema")

    domains = sorted({d for v in bpb.values() if isinstance(v, dict) for d in v if not d.endswith("_avg")})
    columns = (*domains, "macro_avg", "micro_avg")
    rows = tuple(
        (name, *(_fmt(bpb[name].get(c)) for c in columns))
        for name in sorted(bpb, key=order)
        if isinstance(bpb[name], dict)
    )
    return Table(("checkpoint", *columns), rows)


def spike_table(report: dict[str, object]) -> tuple[Table, str]:
    """The spike detector's findings as a table, and a sentence on how they were found (plus the last EMA gap)."""
    spikes = report["spikes"]
    compared = any("run" in s for s in spikes)
    rows = tuple(
        (
            *((str(s["run"]),) if compared else ()),
            str(s["step"]),
            str(s["end_step"]),
            _fmt(s["height"]),
            _fmt(s["baseline"]),
            s["kind"],
            _fmt(s["norm_led"]),
            _fmt(s["lead_steps"]),
            _fmt(s.get("layer_led")),
            _fmt(s.get("layer_lead_steps")),
            _fmt(s.get("attn_layer_led")),
            _fmt(s.get("attn_layer_lead_steps")),
        )
        for s in spikes
    )
    config = SpikeConfig()
    kinds = [s["kind"] for s in spikes]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
    note = (
        f"{len(spikes)} spike(s) in {report['points']} finite train-loss points{f' ({counts})' if counts else ''}."
        " A spike is a run of points above "
        f"median + {config.k_sigma:g} robust σ of the previous {config.window};"
        f" recoverable = back in the band within {config.horizon} steps; "
        "norm led = a grad/update-norm spike started first (lead steps earlier);"
        " layer led = the layer whose update norm left its own band first (— when none did or none was logged);"
        " attention led = the same for each layer's largest attention logit (`aux/attn_logit_max`)."
    )
    gaps = [g for g in report.get("ema_gap", []) if g["metric"] == "eval/bpb/macro_avg"]
    if gaps:
        note += f" EMA gap (raw − EMA macro BPB) at step {gaps[-1]['step']}: {gaps[-1]['gap']:+.4f}."
    columns = (
        "step",
        "end step",
        "height",
        "baseline",
        "kind",
        "norm led",
        "lead steps",
        "layer led",
        "layer lead",
        "attention led",
        "attention lead",
    )
    return Table((*(("run",) if compared else ()), *columns), rows), note


def rewind_table(runs: tuple[RunData, ...]) -> Table:
    """Every rewind of every run, in steps: the spike, where the run went back from and to, the data it skipped."""
    return Table(
        ("run", "spike step", "rewound from step", "to step", "skipped data steps"),
        tuple(
            (run.label, str(r.spike_step), str(r.from_step), str(r.to_step), "[{}, {})".format(*r.skipped_data_steps))
            for run in runs
            for r in run.rewinds
        ),
    )
