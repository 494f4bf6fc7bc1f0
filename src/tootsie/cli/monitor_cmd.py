"""`tootsie monitor ...`: read a run's metrics the way the curve-reading guide does."""

import argparse
from pathlib import Path

from tootsie.cli.output import build, emit
from tootsie.errors import TootsieError
from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.spikes import SpikeConfig, find_spikes


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie monitor` and its subcommands."""
    monitor = subparsers.add_parser("monitor", help="diagnose runs from their metrics: loss spikes")
    commands = monitor.add_subparsers(dest="monitor_command", required=True, metavar="COMMAND")
    spikes = commands.add_parser(
        "spikes",
        help="find loss spikes and classify them (recoverable / plateau), with leading norms and the layer that led",
    )
    spikes.add_argument("metrics", metavar="METRICS.jsonl", help="a run's metrics.jsonl")
    spikes.add_argument(
        "--k-sigma", type=float, default=SpikeConfig.k_sigma, help="spike threshold in robust sigmas (default 6)"
    )
    spikes.add_argument("--window", type=int, default=SpikeConfig.window, help="baseline window in points (default 50)")
    spikes.add_argument(
        "--horizon",
        type=int,
        default=SpikeConfig.horizon,
        help="steps to rejoin the band to count as recoverable (default 50)",
    )
    spikes.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    spikes.set_defaults(handler=run_spikes)


def run_spikes(args: argparse.Namespace) -> int:
    """`tootsie monitor spikes`."""
    path = Path(args.metrics)
    if not path.is_file():
        raise TootsieError(f"metrics file not found: {path}")
    report = find_spikes(
        read_metrics(path), build(SpikeConfig, k_sigma=args.k_sigma, window=args.window, horizon=args.horizon)
    )
    kinds = [spike["kind"] for spike in report["spikes"]]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds))) or "none"
    led = "; ".join(
        f"step {s['step']}: layer {s['layer_led']} led by {s['layer_lead_steps']} steps"
        for s in report["spikes"]
        if s.get("layer_led") is not None
    )
    headline = f"{len(kinds)} spikes in {report['points']} points ({counts}); skipped {report['skipped']}" + (
        f"; {led}" if led else ""
    )
    return emit(report, args, headline)
