"""`tootsie train`: train from a YAML/JSON config; rerun on the same `--out` to resume.

    tootsie train --config FILE --out DIR [--profile A:B] [--tracker NAME]... [--allow-config-change]
    tootsie train example-config [--prefix DIR] [--moe] > train.yaml      (old shape: train --example-config)

`--profile A:B` traces steps [A, B) with the JAX profiler and `--tracker
tensorboard` / `--tracker wandb` adds a tracker; neither changes the weights.
Every tracker's extra is checked before training starts. `example-config`
prints a complete config for a tiny model on the demo corpus
(`demos.train_demo`; `--moe`: an 8-expert, k = 2 mixture of experts), building
the demo's token caches first if they are not there.

A config with `train:` and `rl:` sections is an RL run (`tootsie.rl.config`)
and trains as `tootsie rl --config` does. `sft`, `dpo` and `rl` have the same shape, built here: `NAME
--config FILE --out DIR` trains exactly as `train` does, and each mode is a
verb (`NAME example-config`, `NAME evaluate`) whose old flag spelling
(`NAME --example-config`, `NAME --evaluate`) `rewrite_verbs` turns into the
verb before parsing.
"""

import argparse
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tootsie.cli.options import add_output_flags, rewrite_mode_flags
from tootsie.cli.output import print_json, quiet_progress, say
from tootsie.configfile import dump_config, load_config, to_plain
from tootsie.errors import TootsieError
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.monitor.trackers import TRACKERS, require_trackers
from tootsie.train.divergence import read_divergence

if TYPE_CHECKING:
    from tootsie.demos.stdlib_demo import DemoSettings
    from tootsie.train.config import TrainConfig

EXAMPLE_CONFIG = "example-config"
EVALUATE = "evaluate"


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie train` and its `example-config` verb."""
    verbs = add_training_command(subparsers, "train", "train a model from a config file (rerun to resume)")
    example = add_example_verb(
        verbs, "print a complete config for a tiny model on the demo corpus", print_example_config, tiny=False
    )
    example.add_argument(
        "--moe", action="store_true", help="a mixture of experts (8 experts, k = 2) instead of the dense Llama"
    )


def rewrite_aliases(argv: list[str]) -> list[str]:
    """`train --example-config ...` → `train example-config ...`."""
    return rewrite_verbs(argv, "train", (EXAMPLE_CONFIG,))


def rewrite_verbs(argv: list[str], command: str, verbs: Sequence[str]) -> list[str]:
    """`argv` with `COMMAND --VERB ...` (the old mode-flag shape) rewritten as `COMMAND VERB ...`."""
    return rewrite_mode_flags(argv, (command,), {f"--{verb}": (command, verb) for verb in verbs})


def add_training_command(
    subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]", name: str, help_text: str
) -> "argparse._SubParsersAction[argparse.ArgumentParser]":
    """Add `tootsie NAME`, which trains `--config` into `--out`; return its verbs, for the modes to add."""
    parser = subparsers.add_parser(name, help=help_text)
    parser.add_argument("--config", metavar="FILE", help="a YAML or JSON TrainConfig")
    parser.add_argument(
        "--out", metavar="DIR", help="output directory (checkpoints/, metrics.jsonl); resumed if it has checkpoints"
    )
    parser.add_argument(
        "--profile",
        type=profile_window,
        metavar="A:B",
        help="capture a JAX profiler trace of steps [A, B) into OUT/profile/ (open in ui.perfetto.dev)",
    )
    parser.add_argument(
        "--tracker",
        action="append",
        default=[],
        choices=sorted(TRACKERS),
        help="also log to this tracker with its default settings (repeatable)",
    )
    parser.add_argument(
        "--allow-config-change",
        action="store_true",
        help="resume even though hashed config fields changed (the diff is recorded in OUT/config_changes.jsonl)",
    )
    add_output_flags(parser)
    parser.set_defaults(handler=train_command)
    return parser.add_subparsers(dest="verb", metavar="VERB")


def add_example_verb(
    verbs: "argparse._SubParsersAction[argparse.ArgumentParser]",
    help_text: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    tiny: bool,
) -> argparse.ArgumentParser:
    """Add the `example-config` verb: `--prefix` where the demo's steps live (and `--tiny` for its test size)."""
    example = verbs.add_parser(EXAMPLE_CONFIG, help=help_text)
    example.add_argument(
        "--prefix",
        metavar="DIR",
        help="where the demo's steps live or are built (default: where `tootsie demo` puts them)",
    )
    if tiny:
        example.add_argument("--tiny", action="store_true", help="use the demo's --tiny settings")
    add_output_flags(example)
    example.set_defaults(handler=handler)
    return example


def add_evaluate_verb(
    verbs: "argparse._SubParsersAction[argparse.ArgumentParser]",
    help_text: str,
    handler: Callable[[argparse.Namespace], int],
) -> None:
    """Add the `evaluate` verb: the run's `--config` and `--out`, compared with its warm start."""
    evaluate = verbs.add_parser(EVALUATE, help=help_text)
    evaluate.add_argument("--config", required=True, metavar="FILE", help="the config that was trained")
    evaluate.add_argument("--out", required=True, metavar="DIR", help="the run's output directory")
    add_output_flags(evaluate)
    evaluate.set_defaults(handler=handler)


def profile_window(text: str) -> tuple[int, int]:
    """Parse `A:B` (0 <= A < B) into the step window of `--profile`."""
    start, _, end = text.partition(":")
    try:
        window = (int(start), int(end))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A:B with integer steps, got {text!r}") from None
    if not 0 <= window[0] < window[1]:
        raise argparse.ArgumentTypeError(f"expected 0 <= A < B, got {text!r}")
    return window


def train_command(args: argparse.Namespace) -> int:
    """Train `--config` into `--out` (the config's trackers and profile window extended by the flags)."""
    if not args.config or not args.out:
        raise TootsieError(
            f"tootsie {args.command} needs --config FILE and --out DIR to train"
            f" (or `tootsie {args.command} {EXAMPLE_CONFIG}` to get a config)"
        )
    from tootsie.eval.training import run_training
    from tootsie.rl.loop import is_rl_config_file
    from tootsie.train.config import TrainConfig

    if is_rl_config_file(args.config):
        return rl_train_command(args)
    config = with_flags(load_config(args.config, TrainConfig, root="train"), args)
    with quiet_progress(args):
        state = run_training(config, args.out, allow_config_change=args.allow_config_change)
    if state is None:  # config.divergence stopped the run; diverged.json says why
        diverged = read_divergence(args.out) or {}
        result = {"step": diverged.get("step"), "loss": diverged.get("loss"), "diverged": diverged.get("reason")}
    else:
        records = read_metrics(Path(args.out) / METRICS_FILE).records
        result = {"step": state.step, "loss": records[-1].get("loss") if records else None}
    if args.json:
        print_json(result | {"out": str(Path(args.out).resolve())})
    elif state is None:
        say(args, f"the run diverged after step {result['step']}: {result['diverged']}; outputs in {args.out}")
    else:
        say(args, f"trained to step {state.step} (loss {result['loss']}); outputs in {args.out}")
    return 0


def with_flags(config: "TrainConfig", args: argparse.Namespace) -> "TrainConfig":
    """`config` with the `--tracker` trackers it lacks and the `--profile` window; every tracker's extra checked."""
    added = tuple(
        TRACKERS[kind]()
        for kind in dict.fromkeys(args.tracker)
        if not any(isinstance(t, TRACKERS[kind]) for t in config.trackers)
    )
    config = replace(config, trackers=config.trackers + added, profile_steps=args.profile or config.profile_steps)
    require_trackers(config.trackers)
    return config


def rl_train_command(args: argparse.Namespace) -> int:
    """Train an RL config (`train:` and `rl:` sections) into `--out`; the flags extend its train section."""
    from tootsie.rl.loop import load_rl_config, run_rl

    config = load_rl_config(args.config)
    config = replace(config, train=with_flags(config.train, args))
    with quiet_progress(args):
        state = run_rl(config, args.out, allow_config_change=args.allow_config_change)
    records = read_metrics(Path(args.out) / METRICS_FILE).records
    rewards = [r["rl/reward_mean"] for r in records if "rl/reward_mean" in r]
    result = {"step": state.step, "reward_mean": rewards[-1] if rewards else None}
    if args.json:
        print_json(result | {"out": str(Path(args.out).resolve())})
    else:
        say(args, f"trained to step {state.step} (last reward mean {result['reward_mean']}); outputs in {args.out}")
    return 0


def print_example_config(args: argparse.Namespace) -> int:
    """Print the example config, building the demo corpus if needed."""
    from tootsie.demos.train_demo import train_example

    return print_built_config(args, lambda: train_example(demo_prefix(args.prefix), moe=args.moe))


def print_built_config(args: argparse.Namespace, build: Callable[[], object]) -> int:
    """Build a config (its executor steps quiet with --quiet) and print it as YAML, or as one JSON object with
    --json; both load with `--config`."""
    with quiet_progress(args):
        config = build()
    if args.json:
        print_json(to_plain(config))
    else:
        print(dump_config(config), end="")
    return 0


def demo_prefix(prefix: str | None) -> str:
    """`--prefix`, else the prefix `tootsie demo` writes to by default."""
    from tootsie.cli.demo_cmd import DEFAULT_OUT

    return prefix or DEFAULT_OUT


def demo_settings(tiny: bool) -> "DemoSettings":
    """The demo's settings an example config builds on: its test size with `--tiny`, else the full demo."""
    from tootsie.demos.stdlib_demo import TINY, DemoSettings

    return TINY if tiny else DemoSettings()
