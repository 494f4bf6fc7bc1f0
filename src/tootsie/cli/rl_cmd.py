"""`tootsie rl`: RL with verifiable rewards on the arithmetic task, its example config and its before/after figure.

    tootsie rl example-config [--prefix DIR] [--tiny] [--distill] > rl.yaml   (old shape: rl --example-config)
    tootsie rl --config rl.yaml --out DIR                                     (the same as tootsie train)
    tootsie rl evaluate --config rl.yaml --out DIR [--json]                   (old shape: rl --evaluate)

`example-config` builds (through the executor, once) the starting policy, a
small model SFT'd to the arithmetic answer format, and prints an RL config
that trains it with RLOO against its own copy as the KL reference
(`demos.rl_demo`); `--distill` builds a larger teacher too and prints an
on-policy distillation config instead. Training reruns resume. `evaluate`
prints held-out exact match before and after, the difference's paired
bootstrap interval and the run's KL against its stated bound (`rl.evaluate`).
"""

import argparse

from tootsie.cli import train_cmd
from tootsie.cli.output import print_json, quiet_progress, say


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie rl` and its verbs."""
    verbs = train_cmd.add_training_command(
        subparsers, "rl", "RL with verifiable rewards (RLOO/GRPO, distillation): example config, training, evaluation"
    )
    example_help = "print an RL config over the arithmetic task, building its SFT'd starting policy if missing"
    example = train_cmd.add_example_verb(verbs, example_help, print_example_config, tiny=True)
    example.add_argument(
        "--distill", action="store_true", help="on-policy distillation from a larger SFT'd teacher instead of RLOO"
    )
    train_cmd.add_evaluate_verb(
        verbs, "held-out exact match before and after RL, with a bootstrap interval", evaluate_command
    )


def rewrite_aliases(argv: list[str]) -> list[str]:
    """`rl --example-config ...` and `rl --evaluate ...` → `rl example-config ...`, `rl evaluate ...`."""
    return train_cmd.rewrite_verbs(argv, "rl", (train_cmd.EXAMPLE_CONFIG, train_cmd.EVALUATE))


def print_example_config(args: argparse.Namespace) -> int:
    """Print the RL example config, building the starting policy (and teacher) if needed."""
    from tootsie.demos.rl_demo import TINY, RLDemoSettings, rl_example

    prefix, settings = train_cmd.demo_prefix(args.prefix), TINY if args.tiny else RLDemoSettings()
    return train_cmd.print_built_config(args, lambda: rl_example(prefix, settings, distill=args.distill))


def evaluate_command(args: argparse.Namespace) -> int:
    """Print held-out exact match before and after, and the interval on the difference."""
    from tootsie.rl.evaluate import evaluate_rl
    from tootsie.rl.loop import load_rl_config

    with quiet_progress(args):
        result = evaluate_rl(load_rl_config(args.config), args.out)
    if args.json:
        print_json(result)
    else:
        low, high = result["interval"]
        say(
            args,
            f"held-out exact match: {result['exact_match_before']:.3f} → {result['exact_match_after']:.3f} "
            f"({result['difference']:+.3f}, {result['confidence']:.0%} interval [{low:+.3f}, {high:+.3f}]) "
            f"over {result['heldout_tasks']} tasks; largest rl/kl {result['kl_max']} (bound {result['kl_bound']})",
        )
    return 0
