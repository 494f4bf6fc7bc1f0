"""`tootsie dpo`: the preference-tuning example and its before/after figure.

`tootsie dpo --example-config --sft DIR > dpo.yaml` builds (through the
executor, once) a preference set from stdlib docstrings, its pair caches and
the SFT model's reference log-probs, and prints a TrainConfig that DPO-tunes
the SFT run's newest checkpoint; `tootsie train --config dpo.yaml --out DIR`
runs it. `tootsie dpo --evaluate --config dpo.yaml --out DIR` prints held-out
preference accuracy of the SFT model and the DPO model, and the DPO model's
reward margin and reward accuracy.
"""

import argparse
import json
from pathlib import Path

from tootsie.cli.demo_cmd import DEFAULT_OUT
from tootsie.configfile import dump_config, load_config
from tootsie.demos.dpo_demo import DpoSettings, dpo_example
from tootsie.demos.stdlib_demo import TINY, DemoSettings
from tootsie.errors import TootsieError
from tootsie.eval.dpo_eval import evaluate_dpo
from tootsie.train.config import TrainConfig

DEFAULT_SFT = "runs/sft"
"""The SFT run docs/post-training.md trains (`tootsie train --config sft.yaml --out runs/sft`)."""


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `dpo` command."""
    parser = subparsers.add_parser("dpo", help="DPO on preference pairs: example config, evaluation")
    parser.add_argument(
        "--example-config",
        action="store_true",
        help="print a config that DPO-tunes the demo SFT run on a local preference set (built if missing)",
    )
    parser.add_argument(
        "--sft", default=DEFAULT_SFT, metavar="DIR", help=f"the SFT run (or checkpoint) to tune (default {DEFAULT_SFT})"
    )
    parser.add_argument(
        "--prefix", default=DEFAULT_OUT, metavar="DIR", help=f"where the demo's steps live or are built ({DEFAULT_OUT})"
    )
    parser.add_argument("--tiny", action="store_true", help="with --example-config: the demo's --tiny settings")
    parser.add_argument(
        "--evaluate", action="store_true", help="held-out preference accuracy of the SFT model and of --out"
    )
    parser.add_argument("--config", metavar="FILE", help="with --evaluate: the DPO config that was trained")
    parser.add_argument("--out", metavar="DIR", help="with --evaluate: the DPO run's output directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(handler=dpo_command)


def dpo_command(args: argparse.Namespace) -> int:
    """Print the example config, or compare SFT and DPO held-out preference accuracy."""
    if args.example_config:
        if "://" not in args.sft and not Path(args.sft).exists():
            raise TootsieError(
                f"--sft {args.sft} does not exist: train the SFT run first (tootsie sft --example-config > sft.yaml; "
                f"tootsie train --config sft.yaml --out {args.sft}), or pass --sft DIR"
            )
        settings = TINY if args.tiny else DemoSettings()
        print(dump_config(dpo_example(args.prefix, args.sft, settings, DpoSettings())), end="")
        return 0
    if not (args.evaluate and args.config and args.out):
        raise TootsieError("tootsie dpo needs --example-config, or --evaluate --config FILE --out DIR")
    config = load_config(args.config, TrainConfig, root="train")
    results = evaluate_dpo(config, args.out)
    if args.json:
        print(json.dumps(results))
    for name, metrics in [] if args.json else results.items():
        print(
            f"{name} ({metrics['pairs']} held-out pairs): preference accuracy SFT {metrics['reference_accuracy']:.3f}"
            f" → DPO {metrics['policy_accuracy']:.3f}; DPO reward margin {metrics['reward_margin']:.3f},"
            f" reward accuracy {metrics['reward_accuracy']:.3f}"
        )
    return 0
