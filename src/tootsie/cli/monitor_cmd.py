"""`tootsie monitor ...`: read a run's metrics the way the curve-reading guide does."""

import argparse
from pathlib import Path

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args
from tootsie.cli.output import emit
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
    add_config_flags(spikes, SpikeConfig)
    add_output_flags(spikes)
    spikes.set_defaults(handler=run_spikes)


def run_spikes(args: argparse.Namespace) -> int:
    """`tootsie monitor spikes`."""
    path = Path(args.metrics)
    if not path.is_file():
        raise TootsieError(f"metrics file not found: {path}")
    report = find_spikes(read_metrics(path), config_from_args(args, SpikeConfig))
    kinds = [spike["kind"] for spike in report["spikes"]]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds))) or "none"
    led = "; ".join(
        f"step {s['step']}: {what} {s[f'{key}_led']} led by {s[f'{key}_lead_steps']} steps"
        for s in report["spikes"]
        for key, what in (("layer", "layer"), ("attn_layer", "attention logits of layer"))
        if s.get(f"{key}_led") is not None
    )
    headline = f"{len(kinds)} spikes in {report['points']} points ({counts}); skipped {report['skipped']}" + (
        f"; {led}" if led else ""
    )
    return emit(report, args, headline)
