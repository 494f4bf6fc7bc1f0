"""`tootsie report RUN_DIR [RUN_DIR ...]`: a self-contained HTML report of one run, or of several overlaid."""

import argparse
from pathlib import Path

from tootsie.cli.options import add_output_flags
from tootsie.cli.output import emit
from tootsie.errors import TootsieError
from tootsie.report.data import X_AXES
from tootsie.report.run_report import REPORT_FILE, write_report


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `report` command."""
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained report.html of a run: loss, BPB, norms, LR, throughput, spikes, mixture, config",
    )
    parser.add_argument(
        "run_dirs",
        metavar="RUN_DIR",
        nargs="+",
        help="training output directories (tootsie train --out) or the demo's summary directory;"
        " several are overlaid on the same panels, the first as the reference",
    )
    parser.add_argument(
        "--out", metavar="FILE", help=f"where to write the report (default: the first RUN_DIR/{REPORT_FILE})"
    )
    parser.add_argument("--x", choices=X_AXES, default="step", help="x axis of every panel (default step)")
    add_output_flags(parser)
    parser.set_defaults(handler=report_command)


def report_command(args: argparse.Namespace) -> int:
    """`tootsie report`."""
    for directory in args.run_dirs:
        if not Path(directory).is_dir():
            raise TootsieError(f"run directory not found: {directory}")
    result = write_report(args.run_dirs if len(args.run_dirs) > 1 else args.run_dirs[0], args.out, x=args.x)
    drawn = sum(result["panels"].values())
    headline = (
        f"wrote {result['report']} ({len(result['runs'])} run(s), {result['bytes'] / 1e3:.0f} kB,"
        f" {drawn}/{len(result['panels'])} panels drawn,"
        f" {len(result['spikes'])} spikes) in {result['seconds']:.1f} s"
    )
    return emit(result, args, headline)
