"""`tootsie sft`: the supervised fine-tuning example and its before/after figure.

`tootsie sft --example-config > sft.yaml` builds (through the executor, once)
the demo's base model and a chat set from stdlib docstrings, and prints a
TrainConfig that fine-tunes the base on it; `tootsie train --config sft.yaml
--out DIR` runs it. `tootsie sft --evaluate --config sft.yaml --out DIR`
prints the held-out assistant-token loss of the warm-start checkpoint and of
the fine-tuned run.
"""

import argparse
import json

from tootsie.cli.demo_cmd import DEFAULT_OUT
from tootsie.configfile import dump_config, load_config
from tootsie.demos.sft_demo import SftSettings, sft_example
from tootsie.demos.stdlib_demo import TINY, DemoSettings
from tootsie.errors import TootsieError
from tootsie.eval.sft_eval import evaluate_sft
from tootsie.train.config import TrainConfig


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `sft` command."""
    parser = subparsers.add_parser("sft", help="supervised fine-tuning on chat data: example config, evaluation")
    parser.add_argument(
        "--example-config",
        action="store_true",
        help="print a config that fine-tunes the demo's final checkpoint on a local chat set (built if missing)",
    )
    parser.add_argument(
        "--prefix", default=DEFAULT_OUT, metavar="DIR", help=f"where the demo lives or is built (default {DEFAULT_OUT})"
    )
    parser.add_argument("--tiny", action="store_true", help="with --example-config: use the demo's --tiny settings")
    parser.add_argument(
        "--evaluate", action="store_true", help="held-out assistant-token loss of the base and of --out"
    )
    parser.add_argument("--config", metavar="FILE", help="with --evaluate: the SFT config that was trained")
    parser.add_argument("--out", metavar="DIR", help="with --evaluate: the SFT run's output directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(handler=sft_command)


def sft_command(args: argparse.Namespace) -> int:
    """Print the example config, or compare base and SFT held-out assistant-token loss."""
    if args.example_config:
        settings = TINY if args.tiny else DemoSettings()
        print(dump_config(sft_example(args.prefix, settings, SftSettings())), end="")
        return 0
    if not (args.evaluate and args.config and args.out):
        raise TootsieError("tootsie sft needs --example-config, or --evaluate --config FILE --out DIR")
    config = load_config(args.config, TrainConfig, root="train")
    result = evaluate_sft(config, args.out)
    print(
        json.dumps(result)
        if args.json
        else f"held-out assistant-token loss: base {result['base']:.4f} → SFT {result['sft']:.4f} nats/token"
    )
    return 0
