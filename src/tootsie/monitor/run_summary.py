"""Summarize training runs: one merged `metrics.jsonl`, a loss-curve PNG, `summary.json` and `report.html`.

The demo's last step: it gathers the per-run metrics of every phase (pretrain,
cooldown) into one file in step order, plots them, records the held-out
bits-per-byte and each run's directory next to them, and writes the HTML run
report, so one directory holds the run's story.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from tootsie.jsonfile import write_json_atomic
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.monitor.plots import plot_loss_curves
from tootsie.monitor.report import write_report


@dataclass(frozen=True)
class RunSummaryConfig:
    """Which training runs (in phase order) and which BPB results to summarize."""

    runs: dict[str, str]
    """Phase label → training output directory (holding metrics.jsonl)."""
    bpb: str | None = None
    """A bpb.json file to include, if any."""
    figures: dict[str, str] | None = None
    """Title → PNG file another step made, embedded in the report (a case study's figure)."""


def summarize_runs(config: RunSummaryConfig, output_path: str) -> dict[str, object]:
    """Write merged metrics, `loss.png`, `summary.json` and `report.html` under `output_path`."""
    out = Path(output_path)
    runs, skipped = {}, {}
    for label, directory in config.runs.items():
        read = read_metrics(Path(directory) / METRICS_FILE)
        runs[label], skipped[label] = [{**r, "run": label} for r in read.records], read.skipped_lines
    merged = sorted((r for records in runs.values() for r in records), key=lambda r: r["step"])
    tmp = out / f".{METRICS_FILE}.tmp"
    out.mkdir(parents=True, exist_ok=True)
    tmp.write_text("".join(json.dumps(r) + "\n" for r in merged), encoding="utf-8")
    tmp.replace(out / METRICS_FILE)
    plot_loss_curves(runs, out / "loss.png")
    summary = {
        "steps": len(merged),
        "runs": dict(config.runs),
        "final_loss": {label: records[-1]["loss"] for label, records in runs.items() if records},
        "mean_tokens_per_s": {label: _mean_throughput(records) for label, records in runs.items()},
        "skipped_metric_lines": skipped,
        "bpb": json.loads(Path(config.bpb).read_text(encoding="utf-8")) if config.bpb else None,
    }
    write_json_atomic(out / "summary.json", summary)
    write_report(out, figures=config.figures)
    return summary


def _mean_throughput(records: list[dict[str, object]]) -> float | None:
    """Mean tokens/s excluding the first step (it includes compilation)."""
    values = [float(r["tokens_per_s"]) for r in records[1:] if isinstance(r.get("tokens_per_s"), (int, float))]
    return sum(values) / len(values) if values else None
