"""Summarize training runs: one merged `metrics.jsonl`, a loss-curve PNG, `summary.json` and `report.html`.

The demo's last step: it gathers the per-run metrics of every phase (pretrain,
cooldown) into one file in step order, plots them, records the held-out
bits-per-byte and each run's directory next to them, and writes the HTML run
report, so one directory holds the run's story.

Under the executor `summary.json` names the runs relative to the prefix
(`executor.portable`) and holds no timing, so it is the same under any prefix.
The merged metrics and the report carry the runs' throughput and step times,
which differ between reruns: they are declared volatile (`volatile_outputs`).
"""

import json
from dataclasses import dataclass
from pathlib import Path

from tootsie.executor.portable import portable_tree
from tootsie.executor.step import volatile_outputs
from tootsie.jsonfile import write_json_atomic
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.report.plots import plot_loss_curves
from tootsie.report.run_report import REPORT_FILE, write_report

SUMMARY_FILE = "summary.json"
"""The summary this step writes; `report.data` and the dashboard read it (a directory holding it merges runs)."""
LOSS_PLOT_FILE = "loss.png"
"""The loss curves of every run, beside the summary."""


@dataclass(frozen=True)
class RunSummaryConfig:
    """Which training runs (in phase order) and which BPB results to summarize."""

    runs: dict[str, str]
    """Phase label → training output directory (holding metrics.jsonl)."""
    bpb: str | None = None
    """A bpb.json file to include, if any."""
    figures: dict[str, str] | None = None
    """Title → PNG file another step made, embedded in the report (a case study's figure)."""


@volatile_outputs(METRICS_FILE, REPORT_FILE)
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
    plot_loss_curves(runs, out / LOSS_PLOT_FILE)
    summary = {
        "steps": len(merged),
        "runs": portable_tree(dict(config.runs)),
        "final_loss": {label: records[-1]["loss"] for label, records in runs.items() if records},
        "skipped_metric_lines": skipped,
        "bpb": json.loads(Path(config.bpb).read_text(encoding="utf-8")) if config.bpb else None,
    }
    write_json_atomic(out / SUMMARY_FILE, summary)
    write_report(out, figures=config.figures)
    return summary
