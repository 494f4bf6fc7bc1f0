"""`tootsie data ...`: diagnostics of the data layer, one function pair per subcommand.

Each subcommand has a `_register_<name>(commands)` that adds its parser and a
`run_<name>(args)` handler. With `--json` the last line of stdout is one JSON
object (the contract tooling reads); without it, a headline and indented
fields.

    tootsie data shuffle-report --perm linear --length 1000003 --batch-size 1024 --seed 0 --json
"""

import argparse

from tootsie.cli.output import emit
from tootsie.data.shuffle_report import ShuffleReportConfig, shuffle_report
from tootsie.errors import TootsieError


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie data` and its subcommands."""
    data = subparsers.add_parser("data", help="data-layer diagnostics: shuffle quality")
    commands = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    _register_shuffle_report(commands)


def _register_shuffle_report(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    help_text = "autocorrelation of per-batch data composition under a permutation vs a true shuffle, on a simulated ordered corpus"
    parser = commands.add_parser("shuffle-report", help=help_text, description=help_text)
    parser.add_argument("--perm", required=True, metavar="KIND", help="permutation kind: linear, feistel, era or block")
    parser.add_argument("--length", type=int, required=True, metavar="N", help="items in the corpus")
    parser.add_argument("--batch-size", type=int, required=True, metavar="B", help="items per training step")
    parser.add_argument("--seed", type=int, default=0, help="permutation and reference seed (default: 0)")
    parser.add_argument("--multiplier", type=int, metavar="A", help="linear only: force the LCG stride a (to diagnose a known run)")
    parser.add_argument("--era-length", type=int, metavar="L", help="era only: items per shuffle window")
    parser.add_argument("--block-size", type=int, metavar="S", help="block only: items per block")
    parser.add_argument("--window-blocks", type=int, metavar="W", help="block only: blocks per shuffle window")
    parser.add_argument("--max-steps", type=int, default=2000, help="simulate at most this many steps (default: 2000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(handler=run_shuffle_report)


def run_shuffle_report(args: argparse.Namespace) -> int:
    """`tootsie data shuffle-report`."""
    flags = {"multiplier": args.multiplier, "era_length": args.era_length, "block_size": args.block_size, "window_blocks": args.window_blocks}
    options = {name: value for name, value in flags.items() if value is not None}
    try:
        config = ShuffleReportConfig(perm=args.perm, length=args.length, batch_size=args.batch_size, seed=args.seed, options=options, max_steps=args.max_steps)
    except ValueError as error:
        raise TootsieError(f"shuffle-report: {error}") from None
    result = shuffle_report(config)
    lags = ", ".join(f"{name} {value:+.3f}" for name, value in result["autocorrelation"].items() if value is not None)
    return emit(result, args, f"{result['verdict']}: {args.perm} over {config.steps} steps ({lags})")
