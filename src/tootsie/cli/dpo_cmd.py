"""`tootsie dpo`: the preference-tuning example and its before/after figure.

    tootsie dpo example-config --sft DIR [--prefix P] [--tiny] > dpo.yaml   (old shape: dpo --example-config)
    tootsie dpo --config dpo.yaml --out DIR                                 (the same as tootsie train)
    tootsie dpo evaluate --config dpo.yaml --out DIR [--json]               (old shape: dpo --evaluate)

`example-config` builds (through the executor, once) a preference set from
stdlib docstrings, its pair caches and the SFT model's reference log-probs,
and prints a TrainConfig that DPO-tunes the SFT run's newest checkpoint
(`demos.dpo_demo`). `evaluate` prints held-out preference accuracy of the SFT
model and the DPO model, and the DPO model's reward margin and reward
accuracy (`eval.dpo_eval`).
"""

import argparse
from pathlib import Path

from tootsie.cli import train_cmd
from tootsie.cli.output import print_json, say
from tootsie.configfile import load_config
from tootsie.errors import TootsieError

DEFAULT_SFT = "runs/sft"
"""The SFT run docs/post-training.md trains (`tootsie train --config sft.yaml --out runs/sft`)."""


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie dpo` and its verbs."""
    verbs = train_cmd.add_training_command(
        subparsers, "dpo", "DPO on preference pairs: example config, training, evaluation"
    )
    example_help = "print a config that DPO-tunes the demo SFT run on a local preference set (built if missing)"
    example = train_cmd.add_example_verb(verbs, example_help, print_example_config, tiny=True)
    example.add_argument(
        "--sft", default=DEFAULT_SFT, metavar="DIR", help="the SFT run (or checkpoint) to tune (%(default)s)"
    )
    train_cmd.add_evaluate_verb(
        verbs, "held-out preference accuracy of the SFT model and of the DPO run", evaluate_command
    )


def rewrite_aliases(argv: list[str]) -> list[str]:
    """`dpo --example-config ...` and `dpo --evaluate ...` → `dpo example-config ...`, `dpo evaluate ...`."""
    return train_cmd.rewrite_verbs(argv, "dpo", (train_cmd.EXAMPLE_CONFIG, train_cmd.EVALUATE))


def print_example_config(args: argparse.Namespace) -> int:
    """Print the DPO example config, building the preference caches and reference log-probs if needed."""
    if "://" not in args.sft and not Path(args.sft).exists():
        raise TootsieError(
            f"--sft {args.sft} does not exist: train the SFT run first (tootsie sft example-config > sft.yaml; "
            f"tootsie train --config sft.yaml --out {args.sft}), or pass --sft DIR"
        )
    from tootsie.demos.dpo_demo import DpoSettings, dpo_example

    prefix, settings = train_cmd.demo_prefix(args.prefix), train_cmd.demo_settings(args.tiny)
    return train_cmd.print_built_config(args, lambda: dpo_example(prefix, args.sft, settings, DpoSettings()))


def evaluate_command(args: argparse.Namespace) -> int:
    """Print held-out preference accuracy of the SFT and DPO models, per preference cache."""
    from tootsie.eval.dpo_eval import evaluate_dpo
    from tootsie.train.config import TrainConfig

    results = evaluate_dpo(load_config(args.config, TrainConfig, root="train"), args.out)
    if args.json:
        print_json(results)
        return 0
    for name, metrics in results.items():
        say(
            args,
            f"{name} ({metrics['pairs']} held-out pairs): preference accuracy SFT {metrics['reference_accuracy']:.3f}"
            f" → DPO {metrics['policy_accuracy']:.3f}; DPO reward margin {metrics['reward_margin']:.3f},"
            f" reward accuracy {metrics['reward_accuracy']:.3f}",
        )
    return 0
