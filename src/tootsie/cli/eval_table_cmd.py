"""`tootsie eval table`: checkpoints or suite results side by side, laid out as the 32B retrospective's table.

    tootsie eval table [LABEL=]RUN_OR_RESULTS... --suite marin-base --out table.md [--json]
        [--prompt-format lm-eval|olmes] [--compare] [--data-dir DIR [--limit N] [--save-results DIR] ...]

An input is a RESULTS file, the object `tootsie eval suite --json` prints
(alone, or as the last line of a saved stdout), or a RUN: a checkpoint or a
training output directory (its newest checkpoint), which is evaluated on the
spot with `tootsie eval suite`'s logic when `--data-dir` is given (its other
flags, `--limit`, `--tokenizer`, `--max-length`, ..., are the suite's) and
refused without it. Inputs under one LABEL (default: the file's stem or the
directory's name) make one row, so a model scored with `--suite core` and
`--suite reasoning` fills one row. `--compare` takes exactly two models, the
base then its SFT model, and adds the before/after view. The rendering and its
rules (Average, empty columns, degradation marks) are in `tootsie.eval.table`.
"""

import argparse
import json
from pathlib import Path
from typing import Any

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args
from tootsie.cli.output import print_json, say
from tootsie.errors import TootsieError
from tootsie.eval.checkpoint_eval import SuiteEvalConfig
from tootsie.eval.table import TABLE_FORMATS

SUITE_FLAGS_EXCLUDED = ("checkpoint", "suite", "data_dir", "prompt_format", "show_prompts")
"""SuiteEvalConfig fields the table sets itself (per input, or from its own flags)."""


def register(verbs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `table` under `tootsie eval`."""
    table = verbs.add_parser(
        "table", help="checkpoints or `eval suite --json` results side by side, as the 32B retrospective's table"
    )
    table.add_argument(
        "inputs",
        nargs="+",
        metavar="[LABEL=]RUN_OR_RESULTS",
        help="a results file of `tootsie eval suite --json`, or a checkpoint/run directory (needs --data-dir);"
        " inputs sharing a LABEL make one row",
    )
    table.add_argument("--suite", default="marin-base", metavar="NAME", help="the columns (default: marin-base)")
    table.add_argument("--out", metavar="FILE", help="write the Markdown table here (default: print it)")
    table.add_argument(
        "--prompt-format",
        choices=TABLE_FORMATS,
        default="lm-eval",
        help="which results to show, and to evaluate runs in (default: lm-eval)",
    )
    table.add_argument(
        "--compare",
        action="store_true",
        help="two models, base then SFT: add a before/after view with differences and ▼ where the base degrades",
    )
    table.add_argument(
        "--data-dir", metavar="DIR", help="benchmark data (as `tootsie eval mirror` writes it) to evaluate RUN inputs"
    )
    table.add_argument(
        "--save-results", metavar="DIR", help="write each evaluated RUN's suite result to DIR/LABEL.json for reuse"
    )
    add_config_flags(table, SuiteEvalConfig, exclude=SUITE_FLAGS_EXCLUDED, metavars={"tokenizer": "FILE", "limit": "N"})
    add_output_flags(table)
    table.set_defaults(handler=run_table_command)


def split_label(spec: str) -> tuple[str, str]:
    """`LABEL=PATH` → (LABEL, PATH); a bare PATH is labelled by its file stem or directory name."""
    label, sep, path = spec.partition("=")
    if sep and label and "/" not in label:
        return label, path
    return Path(spec).stem if Path(spec).is_file() else Path(spec.rstrip("/")).name, spec


def input_results(label: str, path: str, args: argparse.Namespace) -> dict[str, Any]:
    """The suite result of one input: read from a results file, or evaluated from a RUN with --data-dir."""
    from tootsie.eval.table import read_results

    if "://" not in path and not Path(path).is_dir():
        return read_results(path)
    if args.data_dir is None:
        raise TootsieError(
            f"{path} is a run or checkpoint directory, not a results file: pass --data-dir DIR to evaluate it"
            f" on --suite {args.suite}, or pass the file `tootsie eval suite --json` wrote for it"
        )
    from tootsie.eval.checkpoint_eval import checkpoint_suite
    from tootsie.release.hf_export import find_tokenizer

    config = config_from_args(
        args,
        SuiteEvalConfig,
        checkpoint=path,
        suite=args.suite,
        data_dir=args.data_dir,
        prompt_format=args.prompt_format,
    )
    result = checkpoint_suite(config, find_tokenizer)
    if args.save_results:
        saved = Path(args.save_results) / f"{label}.json"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        say(args, f"saved {label}'s results to {saved}")
    return result


def run_table_command(args: argparse.Namespace) -> int:
    """`tootsie eval table`: the Markdown to --out (or stdout), or with --json the same numbers as one object."""
    from tootsie.eval.table import build_row, build_table, render_markdown, table_columns, table_json

    columns = table_columns(args.suite)
    grouped: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for spec in args.inputs:
        label, path = split_label(spec)
        grouped.setdefault(label, []).append((path, input_results(label, path, args)))
    rows = [build_row(label, results, columns, args.prompt_format) for label, results in grouped.items()]
    table = build_table(args.suite, rows, columns, args.prompt_format, compare=args.compare)
    markdown = render_markdown(table)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(markdown, encoding="utf-8")
    if args.json:
        print_json(table_json(table) | {"out": args.out})
    elif args.out:
        say(args, f"wrote the {args.suite} table of {len(rows)} models to {args.out}")
    else:
        say(args, markdown.rstrip("\n"))
    return 0
