"""Entry point of the `tootsie` console script.

Each command module exposes `register(subparsers)`, which adds its parser and
sets `handler` to a function `(args) -> int` returning the exit code.
"""

import argparse
import sys

from tootsie import __version__
from tootsie.cli import (
    checkpoint_cmd,
    dashboard_cmd,
    data_cmd,
    datakit_cmd,
    demo_cmd,
    dpo_cmd,
    eval_cmd,
    executor_cmd,
    generate_cmd,
    monitor_cmd,
    plan_cmd,
    release_cmd,
    report_cmd,
    scaling_cmd,
    sft_cmd,
    train_cmd,
    verify_cmd,
)
from tootsie.errors import PREEMPTED_EXIT_CODE, Preempted, TootsieError

COMMAND_MODULES = (
    executor_cmd,
    verify_cmd,
    demo_cmd,
    datakit_cmd,
    data_cmd,
    train_cmd,
    sft_cmd,
    dpo_cmd,
    checkpoint_cmd,
    eval_cmd,
    generate_cmd,
    monitor_cmd,
    report_cmd,
    dashboard_cmd,
    release_cmd,
    scaling_cmd,
    plan_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every command registered."""
    parser = argparse.ArgumentParser(prog="tootsie", description="A fully-open LLM training lab.")
    parser.add_argument("--version", action="version", version=f"tootsie {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse `argv`, run the chosen command, and turn user errors into one line on stderr.

    Exit codes: 0 success, 1 a failed step, 2 a user error, 75 preempted (SIGTERM; rerun to resume), 130 Ctrl-C.
    """
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except TootsieError as error:
        print(f"tootsie: {error}", file=sys.stderr)
        return 2
    except Preempted as stop:
        print(f"tootsie: {stop}", file=sys.stderr)
        return PREEMPTED_EXIT_CODE
    except KeyboardInterrupt:
        print("tootsie: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
