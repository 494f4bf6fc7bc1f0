"""`tootsie data ...`: diagnostics of the data layer, one function pair per subcommand.

Each subcommand has a `_register_<name>(commands)` that adds its parser and a
`run_<name>(args)` handler. With `--json` the last line of stdout is one JSON
object (the contract tooling reads); without it, a headline and indented
fields.

    tootsie data inspect out/demo/tokenized/prose/train-<hash> --tokenizer tokenizer.json
    tootsie data inspect mixture.yaml --steps 0:1000 --json
    tootsie data shuffle-report --perm linear --length 1000003 --batch-size 1024 --seed 0 --json
    tootsie data throughput mixture.yaml
"""

import argparse
from pathlib import Path

from tootsie.cli.output import emit
from tootsie.configfile import load_config
from tootsie.data.inspect import batch_throughput, inspect_cache, inspect_mixture
from tootsie.data.mixture import MixtureConfig
from tootsie.data.shuffle_report import ShuffleReportConfig, shuffle_report
from tootsie.datakit.token_cache import open_token_cache
from tootsie.datakit.tokenizer import load_tokenizer
from tootsie.errors import TootsieError


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie data` and its subcommands."""
    data = subparsers.add_parser(
        "data", help="data-layer diagnostics: inspect caches and mixtures, shuffle quality, throughput"
    )
    commands = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    _register_inspect(commands)
    _register_shuffle_report(commands)
    _register_throughput(commands)


def _register_inspect(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    help_text = (
        "summarize a token cache, or decode a batch of a mixture config and compare realized with target weights"
    )
    parser = commands.add_parser("inspect", help=help_text, description=help_text)
    parser.add_argument(
        "target", metavar="CACHE_OR_CONFIG", help="a token cache directory, or a YAML/JSON MixtureConfig file"
    )
    parser.add_argument("--tokenizer", metavar="FILE", help="tokenizer.json to decode tokens with")
    parser.add_argument("--step", type=int, default=0, help="mixture: the step whose batch is decoded (default 0)")
    parser.add_argument(
        "--steps",
        default="0:100",
        metavar="A:B",
        help="mixture: step range for realized vs target weights (default 0:100)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(handler=run_inspect)


def run_inspect(args: argparse.Namespace) -> int:
    """`tootsie data inspect`."""
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    target = Path(args.target)
    if target.is_dir():
        result = inspect_cache(open_token_cache(target), tokenizer)
        return emit(result, args, f"token cache {target}: {result['docs']} documents, {result['tokens']} tokens")
    start, _, end = args.steps.partition(":")
    if not (start.isdigit() and end.isdigit() and int(start) < int(end)):
        raise TootsieError(f"--steps {args.steps!r}: expected A:B with A < B, e.g. --steps 0:100")
    result = inspect_mixture(
        load_config(target, MixtureConfig, root="mixture"), args.step, (int(start), int(end)), tokenizer
    )
    return emit(result, args, f"mixture {target}: step {args.step}, {result['batch_size']} sequences")


def _register_throughput(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    help_text = "sequences/s and tokens/s of batch(step) for a mixture config, on this core"
    parser = commands.add_parser("throughput", help=help_text, description=help_text)
    parser.add_argument("config", metavar="CONFIG", help="a YAML/JSON MixtureConfig file")
    parser.add_argument("--steps", type=int, default=20, help="steps to time (default 20)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(handler=run_throughput)


def run_throughput(args: argparse.Namespace) -> int:
    """`tootsie data throughput`."""
    result = batch_throughput(load_config(args.config, MixtureConfig, root="mixture"), args.steps)
    return emit(
        result,
        args,
        f"batch(step): {result['tokens_per_s'] / 1e6:.2f} M tokens/s, {result['sequences_per_s']:.0f} sequences/s",
    )


def _register_shuffle_report(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    help_text = (
        "autocorrelation of per-batch data composition under a permutation vs a true shuffle,"
        " on a simulated ordered corpus"
    )
    parser = commands.add_parser("shuffle-report", help=help_text, description=help_text)
    parser.add_argument("--perm", required=True, metavar="KIND", help="permutation kind: linear, feistel, era or block")
    parser.add_argument("--length", type=int, required=True, metavar="N", help="items in the corpus")
    parser.add_argument("--batch-size", type=int, required=True, metavar="B", help="items per training step")
    parser.add_argument("--seed", type=int, default=0, help="permutation and reference seed (default: 0)")
    parser.add_argument(
        "--multiplier", type=int, metavar="A", help="linear only: force the LCG stride a (to diagnose a known run)"
    )
    parser.add_argument("--era-length", type=int, metavar="L", help="era only: items per shuffle window")
    parser.add_argument("--block-size", type=int, metavar="S", help="block only: items per block")
    parser.add_argument("--window-blocks", type=int, metavar="W", help="block only: blocks per shuffle window")
    parser.add_argument("--max-steps", type=int, default=2000, help="simulate at most this many steps (default: 2000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(handler=run_shuffle_report)


def run_shuffle_report(args: argparse.Namespace) -> int:
    """`tootsie data shuffle-report`."""
    flags = {
        "multiplier": args.multiplier,
        "era_length": args.era_length,
        "block_size": args.block_size,
        "window_blocks": args.window_blocks,
    }
    options = {name: value for name, value in flags.items() if value is not None}
    try:
        config = ShuffleReportConfig(
            perm=args.perm,
            length=args.length,
            batch_size=args.batch_size,
            seed=args.seed,
            options=options,
            max_steps=args.max_steps,
        )
    except ValueError as error:
        raise TootsieError(f"shuffle-report: {error}") from None
    result = shuffle_report(config)
    lags = ", ".join(f"{name} {value:+.3f}" for name, value in result["autocorrelation"].items() if value is not None)
    return emit(result, args, f"{result['verdict']}: {args.perm} over {config.steps} steps ({lags})")
