"""`tootsie data ...`: diagnostics of the data layer, one function pair per subcommand.

Each subcommand has a `_register_<name>(commands)` that adds its parser and a
`run_<name>(args)` handler. `shuffle-report`'s flags come from
`ShuffleReportConfig` and the permutation configs (`cli.options`). With
`--json` the last line of stdout is one JSON object (the contract tooling
reads); without it, a headline and indented fields (nothing with `--quiet`).

    tootsie data inspect out/demo/tokenized/prose/train-<hash> --tokenizer tokenizer.json
    tootsie data inspect mixture.yaml --steps 0:1000 --json
    tootsie data shuffle-report --perm linear --length 1000003 --batch-size 1024 --seed 0 --json
    tootsie data throughput mixture.yaml
"""

import argparse
from pathlib import Path

from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args, given_fields
from tootsie.cli.output import emit
from tootsie.configfile import load_config
from tootsie.data.inspect import batch_throughput, inspect_cache, inspect_mixture
from tootsie.data.mixture import MixtureConfig
from tootsie.data.permutation import PERMUTATIONS, BlockConfig, EraConfig, FeistelConfig, LinearPermutationConfig
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
    add_output_flags(parser)
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
    add_output_flags(parser)
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
    add_config_flags(
        parser,
        ShuffleReportConfig,
        exclude=("options",),
        choices={"perm": PERMUTATIONS},
        metavars={"perm": "KIND", "length": "N", "batch_size": "B"},
    )
    # The permutation's options: each flag is a field of one kind's config (rounds: feistel, era and block).
    add_config_flags(parser, LinearPermutationConfig, metavars={"multiplier": "A"})
    add_config_flags(parser, FeistelConfig)
    add_config_flags(parser, EraConfig, only=("era_length",), metavars={"era_length": "L"})
    add_config_flags(parser, BlockConfig, exclude=("rounds",), metavars={"block_size": "S", "window_blocks": "W"})
    add_output_flags(parser)
    parser.set_defaults(handler=run_shuffle_report)


def run_shuffle_report(args: argparse.Namespace) -> int:
    """`tootsie data shuffle-report`: the options given go to the chosen permutation (others are an error)."""
    options = (
        given_fields(args, LinearPermutationConfig)
        | given_fields(args, FeistelConfig)
        | given_fields(args, EraConfig)
        | given_fields(args, BlockConfig)
    )
    config = config_from_args(args, ShuffleReportConfig, options=options)
    result = shuffle_report(config)
    lags = ", ".join(f"{name} {value:+.3f}" for name, value in result["autocorrelation"].items() if value is not None)
    return emit(result, args, f"{result['verdict']}: {config.perm} over {config.steps} steps ({lags})")
