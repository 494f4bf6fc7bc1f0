"""How every command prints: the `--json` contract, `--quiet`, and flag-built configs.

With `--json`, a command's last stdout line is exactly one JSON object (what
tooling reads); without it, a headline and one indented line per figure.
`--quiet` drops the prose and the progress: only errors and `--json`'s object
are printed. Both flags come from `options.add_output_flags`; handlers print
through `emit`, `say` and `warn` here, which honour them. Live progress
(training steps, datakit shards) goes to stderr, never into stdout's last
line. Configs built from flags turn their validation errors into one-line
`TootsieError`s, so a bad flag never shows a traceback.
"""

import argparse
import contextlib
import json
import sys
from typing import TypeVar

from tootsie.errors import TootsieError
from tootsie.executor.progress import progress_setting

C = TypeVar("C")


def emit(result: dict[str, object], args: argparse.Namespace, headline: str) -> int:
    """Print the result as JSON (last line) or as a headline plus indented figures (nothing with --quiet); 0."""
    if args.json:
        print_json(result)
    elif not args.quiet:
        print(headline)
        for key, value in result.items():
            print(f"  {key}: {value}")
    return 0


def print_json(result: object) -> None:
    """The one JSON object of `--json`, as stdout's last line."""
    print(json.dumps(result))


def say(args: argparse.Namespace, *lines: str) -> None:
    """Prose lines on stdout, unless --quiet."""
    if not args.quiet:
        for line in lines:
            print(line)


def warn(args: argparse.Namespace, *warnings: str) -> None:
    """`tootsie: warning: ...` lines on stderr, unless --quiet (with --json they belong in the object too)."""
    if not args.quiet:
        for warning in warnings:
            print(f"tootsie: warning: {warning}", file=sys.stderr)


def build(config_class: type[C], **fields: object) -> C:
    """Construct a config from flags, turning its validation error into a one-line user error."""
    try:
        return config_class(**fields)
    except ValueError as error:
        raise TootsieError(f"{config_class.__name__}: {error}") from None


def quiet_progress(args: argparse.Namespace) -> contextlib.AbstractContextManager[None]:
    """For the block, progress is off when `--quiet` was given (also in the steps and workers it starts)."""
    return progress_setting("off" if args.quiet else None)
