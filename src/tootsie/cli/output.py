"""Shared pieces of every command: the `--json` contract and flag-built configs.

With `--json`, a command's last stdout line is exactly one JSON object (what
tooling reads); without it, a headline and one indented line per figure.
Configs built from flags turn their validation errors into one-line
`TootsieError`s, so a bad flag never shows a traceback. Live progress
(training steps, datakit shards) goes to stderr, never into stdout's last
line; `--quiet` turns it off.
"""

import argparse
import contextlib
import json
from typing import TypeVar

from tootsie.errors import TootsieError
from tootsie.executor.progress import progress_setting

C = TypeVar("C")


def emit(result: dict[str, object], args: argparse.Namespace, headline: str) -> int:
    """Print the result as JSON (last line) or as a headline plus indented figures; return 0."""
    if args.json:
        print(json.dumps(result))
    else:
        print(headline)
        for key, value in result.items():
            print(f"  {key}: {value}")
    return 0


def build(config_class: type[C], **fields: object) -> C:
    """Construct a config from flags, turning its validation error into a one-line user error."""
    try:
        return config_class(**fields)
    except ValueError as error:
        raise TootsieError(f"{config_class.__name__}: {error}") from None


def add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    """Add `--quiet`: no live progress lines (training steps, shards, executor steps)."""
    parser.add_argument(
        "--quiet", action="store_true", help="no live progress (training steps, shards, executor steps) on the console"
    )


def quiet_progress(args: argparse.Namespace) -> contextlib.AbstractContextManager[None]:
    """For the block, progress is off when `--quiet` was given (also in the steps and workers it starts)."""
    return progress_setting("off" if args.quiet else None)
