"""`tootsie sft`: the supervised fine-tuning example and its before/after figure.

    tootsie sft example-config [--prefix DIR] [--tiny] > sft.yaml     (old shape: sft --example-config)
    tootsie sft --config sft.yaml --out DIR                            (the same as tootsie train)
    tootsie sft evaluate --config sft.yaml --out DIR [--json]          (old shape: sft --evaluate)

`example-config` builds (through the executor, once) the demo's base model
and a chat set from stdlib docstrings, and prints a TrainConfig that
fine-tunes the base on it (`demos.sft_demo`). `evaluate` prints the held-out
assistant-token loss of the warm-start checkpoint and of the fine-tuned run
(`eval.sft_eval`).
"""

import argparse

from tootsie.cli import train_cmd
from tootsie.cli.output import print_json, say
from tootsie.configfile import load_config


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie sft` and its verbs."""
    verbs = train_cmd.add_training_command(
        subparsers, "sft", "supervised fine-tuning on chat data: example config, training, evaluation"
    )
    example_help = "print a config that fine-tunes the demo's final checkpoint on a local chat set (built if missing)"
    train_cmd.add_example_verb(verbs, example_help, print_example_config, tiny=True)
    train_cmd.add_evaluate_verb(verbs, "held-out assistant-token loss of the base and of the SFT run", evaluate_command)


def rewrite_aliases(argv: list[str]) -> list[str]:
    """`sft --example-config ...` and `sft --evaluate ...` → `sft example-config ...`, `sft evaluate ...`."""
    return train_cmd.rewrite_verbs(argv, "sft", (train_cmd.EXAMPLE_CONFIG, train_cmd.EVALUATE))


def print_example_config(args: argparse.Namespace) -> int:
    """Print the SFT example config, building the base model and chat caches if needed."""
    from tootsie.demos.sft_demo import SftSettings, sft_example

    prefix, settings = train_cmd.demo_prefix(args.prefix), train_cmd.demo_settings(args.tiny)
    return train_cmd.print_built_config(args, lambda: sft_example(prefix, settings, SftSettings()))


def evaluate_command(args: argparse.Namespace) -> int:
    """Print the held-out assistant-token loss of the base and of the SFT run."""
    from tootsie.eval.sft_eval import evaluate_sft
    from tootsie.train.config import TrainConfig

    result = evaluate_sft(load_config(args.config, TrainConfig, root="train"), args.out)
    if args.json:
        print_json(result)
    else:
        say(args, f"held-out assistant-token loss: base {result['base']:.4f} → SFT {result['sft']:.4f} nats/token")
    return 0
