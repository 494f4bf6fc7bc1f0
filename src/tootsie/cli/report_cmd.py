"""`tootsie report RUN_DIR`: write a run's self-contained HTML report (the curve-reading guide's panels)."""

import argparse
from pathlib import Path

from tootsie.cli.output import emit
from tootsie.errors import TootsieError
from tootsie.monitor.report import REPORT_FILE, write_report


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `report` command."""
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained report.html of a run: loss, BPB, norms, LR, throughput, spikes, mixture, config",
    )
    parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="a training output directory (tootsie train --out) or the demo's summary directory",
    )
    parser.add_argument("--out", metavar="FILE", help=f"where to write the report (default RUN_DIR/{REPORT_FILE})")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(handler=report_command)


def report_command(args: argparse.Namespace) -> int:
    """`tootsie report`."""
    if not Path(args.run_dir).is_dir():
        raise TootsieError(f"run directory not found: {args.run_dir}")
    result = write_report(args.run_dir, args.out)
    drawn = sum(result["panels"].values())
    headline = (
        f"wrote {result['report']} ({result['bytes'] / 1e3:.0f} kB, {drawn}/{len(result['panels'])} panels drawn,"
        f" {len(result['spikes'])} spikes) in {result['seconds']:.1f} s"
    )
    return emit(result, args, headline)
