r"""`tootsie phenomena`: list the retrospectives' failures tootsie reproduces, and run one.

    tootsie phenomena list [--json]
    tootsie phenomena run qk-norm-spikes --scale tiny --out /tmp/phenomena --json

`list --json` prints `[{"name", "seed", "claim"}, ...]`. `run` runs the
phenomenon's steps (`tootsie.recipes.phenomena`) with the executor under
`--out`, so a rerun skips what finished, and its last line is the
results.json object: `{"phenomenon", "seed_quote", "claim", "verdict",
"figures", "numbers"}` (with `--json`; without it, the verdict and the paths).
It exits 1 when a step fails.
"""

import argparse
import sys

from tootsie import storage
from tootsie.cli.executor_cmd import progress_lines
from tootsie.cli.options import add_output_flags
from tootsie.cli.output import print_json, quiet_progress, say
from tootsie.executor import failure_summary, run_experiment

Commands = "argparse._SubParsersAction[argparse.ArgumentParser]"


def register(subparsers: Commands) -> None:
    """Add `tootsie phenomena list` and `tootsie phenomena run`."""
    from tootsie.recipes.phenomena.registry import DEFAULT_SCALE, PHENOMENA, SCALES

    parser = subparsers.add_parser(
        "phenomena", help="the retrospectives' failures reproduced at toy scale: list them, run one"
    )
    commands = parser.add_subparsers(dest="phenomena_command", required=True)
    listing = commands.add_parser("list", help="every phenomenon: name, where the seeds report it, the claim")
    add_output_flags(listing)
    listing.set_defaults(handler=list_command)
    run = commands.add_parser("run", help="run one phenomenon's experiment; the last line is its results.json")
    run.add_argument("name", choices=list(PHENOMENA), help="the phenomenon (tootsie phenomena list)")
    run.add_argument(
        "--scale", choices=SCALES, default=DEFAULT_SCALE, help="tiny: the documented run; smoke: a short one"
    )
    run.add_argument("--out", required=True, help="prefix of the steps' outputs (a rerun skips finished steps)")
    add_output_flags(run)
    run.set_defaults(handler=run_command)


def list_command(args: argparse.Namespace) -> int:
    """`tootsie phenomena list`: a table, or `[{"name", "seed", "claim"}]` with --json."""
    from tootsie.recipes.phenomena.registry import PHENOMENA

    listing = [entry.listing() for entry in PHENOMENA.values()]
    if args.json:
        print_json(listing)
        return 0
    for entry in listing:
        say(args, f"{entry['name']:22} {entry['seed']}", f"{'':22} {entry['claim']}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    """`tootsie phenomena run`: run the steps under --out and print the results (the last line with --json)."""
    from tootsie.recipes.phenomena.registry import phenomenon

    steps = phenomenon(args.name).steps(args.scale)
    with progress_lines(enabled=not args.quiet), quiet_progress(args):
        report = run_experiment(steps, args.out)
    summary = failure_summary(report)
    if summary is not None:
        print(f"tootsie: {summary}", file=sys.stderr)
        return 1
    results_dir = next(step.output_path for step in report.steps if step.name == steps[-1].name)
    results = storage.read_json(storage.join(results_dir, "results.json"))
    if results is None:
        print(
            f"tootsie: {steps[-1].name} finished without {storage.join(results_dir, 'results.json')}", file=sys.stderr
        )
        return 1
    if args.json:
        print_json(results)
    else:
        say(args, f"{args.name}: {results['verdict']}", f"  results: {storage.join(results_dir, 'results.json')}")
    return 0
