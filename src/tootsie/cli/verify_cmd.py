"""`tootsie verify`: rerun an experiment's finished steps into scratch and compare their content with what is recorded.

    tootsie verify EXPERIMENT.py --prefix P [--steps GLOB] [--scratch DIR] [--keep] [--json] [--quiet]

Each selected finished step runs again on the same inputs, its output in a
fresh scratch directory, and the manifest it records there (path, size,
sha256 of every file) is compared with the one recorded in the prefix
(`executor.verify`); the prefix is not written. Prints one row per step
(IDENTICAL, DIFFERS, FAILED or SKIPPED, seconds, hash, step, and the
differing files or why it was skipped). With `--json` the last line of stdout
is `{"steps": [{"name", "hash", "identical", "differing", ...}], "ok", ...}`.
Exits 0 when at least one step was rerun and none differs, else 1.
"""

import argparse

from tootsie.cli.executor_cmd import add_experiment_arguments, load_steps, prefix_of, print_table
from tootsie.cli.output import print_json, quiet_progress
from tootsie.executor.verify import StepVerdict, VerifyReport, verify_experiment


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `verify` command."""
    parser = subparsers.add_parser(
        "verify",
        help="rerun finished steps into scratch and check they write the same bytes",
        description=(
            "Rerun each selected finished step of EXPERIMENT.py on the same inputs into a scratch directory and "
            "compare the files it writes (size and sha256, volatile files left out) with the recorded manifest."
        ),
    )
    add_experiment_arguments(parser)
    parser.add_argument(
        "--steps", metavar="GLOB", help="only steps whose name matches GLOB (fnmatch, e.g. 'demo/tokenize/*')"
    )
    parser.add_argument(
        "--scratch",
        metavar="DIR",
        help="where the reruns write (a fresh tootsie-verify-* inside DIR; default: the system temp directory)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (to diff the files)")
    parser.set_defaults(handler=verify_command)


def verify_command(args: argparse.Namespace) -> int:
    """`tootsie verify`: verify, print the table or JSON, and return 0 iff the report is ok."""
    steps, _ = load_steps(args)
    with quiet_progress(args):
        report = verify_experiment(steps, prefix_of(args), steps_glob=args.steps, scratch=args.scratch, keep=args.keep)
    if args.json:
        print_json(report.to_json())
    elif not args.quiet:
        print_report(report)
    return 0 if report.ok else 1


def _verdict(step: StepVerdict) -> tuple[str, str]:
    if step.skipped is not None:
        return "SKIPPED", step.skipped
    if step.error is not None:
        return "FAILED", step.error
    if step.differing:
        return "DIFFERS", ", ".join(step.differing) + (f" ({step.note})" if step.note else "")
    return "IDENTICAL", f"{len(step.volatile)} volatile files not compared" if step.volatile else ""


def print_report(report: VerifyReport) -> None:
    """The table, the changes of each differing step, and a one-line verdict."""
    print(f"prefix: {report.prefix}")
    rows = [("VERDICT", "SECONDS", "HASH", "STEP", "NOTE")]
    for step in report.steps:
        verdict, note = _verdict(step)
        seconds = "" if step.seconds is None else f"{step.seconds:.1f}"
        rows.append((verdict, seconds, step.hash, step.name, note))
    print_table(rows)
    for step in report.steps:
        for line in step.changes:
            print(f"  {step.name}: {line}")
    if report.scratch is not None:
        print(f"scratch kept: {report.scratch}")
    counts = report.to_json()
    verdict = "ok" if report.ok else "NOT ok"
    print(f"{verdict}: {counts['verified']} rerun, {counts['differing']} differing, {counts['skipped']} skipped")
