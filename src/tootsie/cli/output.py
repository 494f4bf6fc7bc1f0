"""Shared pieces of every command: the `--json` contract and flag-built configs.

With `--json`, a command's last stdout line is exactly one JSON object (what
tooling reads); without it, a headline and one indented line per figure.
Configs built from flags turn their validation errors into one-line
`TootsieError`s, so a bad flag never shows a traceback.
"""

import argparse
import json
from typing import TypeVar

from tootsie.errors import TootsieError

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
