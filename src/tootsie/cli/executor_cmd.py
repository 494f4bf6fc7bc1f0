"""`tootsie run` and `tootsie status`: run an experiment file's steps, or show where they stand.

Both print a compact table (status, seconds, hash, step, output path, and a
note: the plan reason on a dry run, why a step is FAILED otherwise, and for a
RUNNING training step where it is, `step 120/400 (30%) loss 3.412`). With
`--json` the last line of stdout is one JSON object,
`{"steps": [{"name", "hash", "status", "output_path", ...}, ...], ...}`, plus
the keys of the experiment's `PLAN` when it defines one (a recipe's phases).
`run` exits 0 iff every step is SUCCESS (a dry run: iff the plan was made);
when a step fails it also prints one line to stderr naming the step, its
error and its log file. `status` reports a finished step whose recorded files
are missing or resized as DAMAGED, naming them (`--check-digests` re-hashes
them too, catching same-size changes), and exits 1 when any step is; `run`
reruns such a step from a clean directory, and everything downstream of it.
With `--json`, each step carries `"manifest": {"digest", "files"}` (null
without one) and, when damaged, `"damage": [...]`. `run --backend ray` runs
the steps as Ray tasks on the cluster at `--ray-address` (default:
$RAY_ADDRESS, else a new local Ray).
`--prefix` may be an fsspec URL (`s3://bucket/runs`): outputs and the
executor's files then live in object storage (docs/scale-out.md).
"""

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from tootsie import storage
from tootsie.cli.options import add_output_flags
from tootsie.cli.output import print_json, quiet_progress
from tootsie.executor import RunReport, experiment_status, failure_summary, run_experiment
from tootsie.executor.experiment import load_experiment_with_plan, merge_plan
from tootsie.executor.report import StepReport
from tootsie.executor.runner import BACKENDS
from tootsie.executor.status import Status
from tootsie.monitor.progress import training_note

DEFAULT_PREFIX = "./out"


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `run` and `status` commands."""
    run = subparsers.add_parser(
        "run",
        help="run an experiment file's steps, skipping finished ones",
        description="Run every step of EXPERIMENT.py (a Python file defining STEPS) and the steps they reference.",
    )
    add_experiment_arguments(run)
    run.add_argument("--dry-run", action="store_true", help="print what would run and why; run and write nothing")
    run.add_argument(
        "--force", metavar="REGEX", help="rerun steps whose name matches REGEX (re.search) even if SUCCESS"
    )
    _add_check_digests(run, "and rerun those whose content changed")
    add_backend_arguments(run)
    run.set_defaults(handler=run_command)
    status = subparsers.add_parser(
        "status",
        help="show the status of an experiment file's steps",
        description=(
            "Report SUCCESS / DAMAGED / RUNNING / FAILED / DEP_FAILED / NOT_STARTED for every step of EXPERIMENT.py; "
            "exit 1 if a step is DAMAGED (a file its manifest records is missing or changed)."
        ),
    )
    add_experiment_arguments(status)
    _add_check_digests(status, "to find changed files of the recorded size too")
    status.set_defaults(handler=status_command)


def add_experiment_arguments(parser: argparse.ArgumentParser) -> None:
    """EXPERIMENT.py, --prefix, --scale, --json and --quiet (shared by `run`, `status` and `verify`)."""
    parser.add_argument(
        "experiment", metavar="EXPERIMENT.py", help="experiment file defining a module-level STEPS list"
    )
    parser.add_argument(
        "--prefix",
        metavar="DIR_OR_URL",
        help=(
            "root of all outputs: a directory or a URL like s3://bucket/runs"
            f" (default: $TOOTSIE_PREFIX, else {DEFAULT_PREFIX})"
        ),
    )
    parser.add_argument(
        "--scale",
        metavar="NAME",
        help="the scale a recipe experiment builds, e.g. tiny (default: full, the runs as they were)",
    )
    add_output_flags(parser)


def _add_check_digests(parser: argparse.ArgumentParser, purpose: str) -> None:
    parser.add_argument(
        "--check-digests",
        action="store_true",
        help=f"re-hash every finished step's files against its manifest {purpose} (default: sizes only, a listing)",
    )


def load_steps(args: argparse.Namespace) -> tuple[list, dict | None]:
    """The experiment's STEPS and PLAN, built at --scale when given (the recipes read it from the environment)."""
    if args.scale:
        from tootsie.recipes.tiny.scale import SCALE_ENV  # the recipes layer (JAX) only when a scale is asked for

        os.environ[SCALE_ENV] = args.scale
    return load_experiment_with_plan(args.experiment)


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --backend and --ray-address (shared by `run` and `demo`)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="local: steps one at a time in this process (default); ray: steps as Ray tasks, independent ones at once",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster for --backend ray, e.g. auto or ray://head:10001 (default: $RAY_ADDRESS, else a local Ray)",
    )


def prefix_of(args: argparse.Namespace) -> str:
    """--prefix, else $TOOTSIE_PREFIX, else ./out."""
    return args.prefix or os.environ.get("TOOTSIE_PREFIX") or DEFAULT_PREFIX


def run_command(args: argparse.Namespace) -> int:
    """`tootsie run`: run (or plan) the experiment, print the report, and return the exit code."""
    steps, plan = load_steps(args)
    with progress_lines(enabled=not args.quiet), quiet_progress(args):
        report = run_experiment(
            steps,
            prefix_of(args),
            force=args.force,
            dry_run=args.dry_run,
            experiment_path=args.experiment,
            backend=args.backend,
            ray_address=args.ray_address,
            check_digests=args.check_digests,
        )
    _print_report(report, args, experiment_plan=plan)
    summary = failure_summary(report)
    if summary is not None:
        print(f"tootsie: {summary}", file=sys.stderr)
    return 0 if report.ok else 1


def status_command(args: argparse.Namespace) -> int:
    """`tootsie status`: print every step's reported status, reading files only; 1 if a step is DAMAGED."""
    steps, plan = load_steps(args)
    report = experiment_status(steps, prefix_of(args), check_digests=args.check_digests)
    _print_report(report, args, show_plan=False, experiment_plan=plan)
    return 1 if any(step.status is Status.DAMAGED for step in report.steps) else 0


@contextlib.contextmanager
def progress_lines(enabled: bool = True) -> Iterator[None]:
    """Print the executor's progress log lines to stdout for the block (before `--json`'s last line, when asked).

    A step's own progress (training steps, shards) goes to stderr (`executor.progress`).
    """
    if not enabled:
        yield
        return
    logger = logging.getLogger("tootsie.executor")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[executor] %(message)s"))
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def _running_note(step: StepReport) -> str:
    """Where a running training step is (`step 120/400 (30%) loss 3.412`), read from its metrics log; else ""."""
    if step.status is not Status.RUNNING or storage.is_remote(step.output_path):
        return ""
    return training_note(step.output_path) or ""


def print_table(rows: list[tuple[str, ...]]) -> None:
    """Rows as aligned columns: the second (seconds) right-aligned, the last left as it is (a free-text note)."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [
            cell.rjust(width) if column == 1 else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row[:-1], widths, strict=True))
        ]
        print("  ".join(cells + [row[-1]]).rstrip())


def _print_report(
    report: RunReport, args: argparse.Namespace, *, show_plan: bool = True, experiment_plan: dict | None = None
) -> None:
    """The report as JSON (with the experiment's PLAN merged in), or as a table (nothing with --quiet)."""
    if args.json:
        print_json(merge_plan(report.to_json(), experiment_plan, args.experiment))
        return
    if args.quiet:
        return
    header = "dry run (nothing was run or written)" if report.dry_run and show_plan else "prefix"
    print(f"{header}: {report.prefix}")
    rows = [("STATUS", "SECONDS", "HASH", "STEP", "OUTPUT", "PLAN" if report.dry_run and show_plan else "NOTE")]
    for step in report.steps:
        note = step.reason if report.dry_run and show_plan else (step.error or step.detail or _running_note(step))
        seconds = "" if step.seconds is None else f"{step.seconds:.1f}"
        rows.append((str(step.status), seconds, step.hash, step.name, step.output_path, note))
    print_table(rows)
    for key, value in (experiment_plan or {}).items():
        if not isinstance(value, (dict, list)):
            print(f"{key}: {value}")
