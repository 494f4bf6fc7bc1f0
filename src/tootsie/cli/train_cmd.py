"""`tootsie train`: train from a YAML/JSON config; rerun on the same `--out` to resume.

`--profile A:B` traces steps [A, B) with the JAX profiler and `--tracker
tensorboard` / `--tracker wandb` adds a tracker; neither changes the weights.
Every tracker's extra is checked before training starts.

`--example-config` prints a complete config for a tiny model on the demo
corpus (a minute or two on 2 CPU cores, checkpoints every few steps), building
the demo's token caches through the executor first if they are not there.
"""

import argparse
import json
from dataclasses import replace
from pathlib import Path

from tootsie.cli.demo_cmd import DEFAULT_OUT
from tootsie.cli.output import add_quiet_argument, quiet_progress
from tootsie.configfile import dump_config, load_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.demos.stdlib_demo import SOURCES, DemoSettings, build_data_steps
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.executor import failure_summary, run_experiment
from tootsie.models.llama import LlamaConfig
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.monitor.trackers import TRACKERS, require_trackers
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig

EXAMPLE_STEPS = 60


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the `train` command."""
    parser = subparsers.add_parser("train", help="train a model from a config file (rerun to resume)")
    parser.add_argument("--config", metavar="FILE", help="a YAML or JSON TrainConfig")
    parser.add_argument(
        "--out", metavar="DIR", help="output directory (checkpoints/, metrics.jsonl); resumed if it has checkpoints"
    )
    parser.add_argument(
        "--example-config", action="store_true", help="print a complete config for a tiny model on the demo corpus"
    )
    parser.add_argument(
        "--prefix",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"with --example-config: where the demo corpus lives or is built (default {DEFAULT_OUT})",
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
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (final step and loss) as the last line"
    )
    add_quiet_argument(parser)
    parser.set_defaults(handler=train_command)


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
    """Print the example config, or train `--config` into `--out`."""
    if args.example_config:
        with quiet_progress(args):
            config = example_config(args.prefix)
        print(dump_config(config), end="")
        return 0
    if not args.config or not args.out:
        raise TootsieError("tootsie train needs --config FILE and --out DIR (or --example-config to get a config)")
    config = load_config(args.config, TrainConfig, root="train")
    added = tuple(
        TRACKERS[kind]()
        for kind in dict.fromkeys(args.tracker)
        if not any(isinstance(t, TRACKERS[kind]) for t in config.trackers)
    )
    config = replace(config, trackers=config.trackers + added, profile_steps=args.profile or config.profile_steps)
    require_trackers(config.trackers)
    with quiet_progress(args):
        state = run_training(config, args.out, allow_config_change=args.allow_config_change)
    lines = (Path(args.out) / METRICS_FILE).read_text(encoding="utf-8").splitlines()
    final = json.loads(lines[-1]) if lines else {}
    result = {"step": state.step, "loss": final.get("loss"), "out": str(Path(args.out).resolve())}
    print(
        json.dumps(result)
        if args.json
        else f"trained to step {state.step} (loss {final.get('loss')}); outputs in {args.out}"
    )
    return 0


def example_config(prefix: str) -> TrainConfig:
    """A tiny Llama on the demo's train caches, which are built through the executor if missing."""
    settings = DemoSettings()
    _, cache_steps = build_data_steps(settings)
    caches = {source: cache_steps[source, "train"] for source in SOURCES}
    report = run_experiment(list(caches.values()), prefix)
    if not report.ok:
        raise TootsieError(f"building the demo corpus failed: {failure_summary(report)}")
    paths = {step.name: step.output_path for step in report.steps}
    model = LlamaConfig(
        vocab_size=settings.vocab_size, hidden_dim=64, intermediate_dim=256, num_layers=2, num_heads=4, num_kv_heads=2
    )
    data = MixtureConfig(
        caches={source: paths[step.name] for source, step in caches.items()},
        stages=(MixtureStage(0, {"code": 0.5, "prose": 0.5}),),
        seq_len=128,
        batch_schedule=BatchSchedule.constant(8),
    )
    schedule = WSDConfig(peak_lr=3e-3, warmup_steps=6, decay_steps=12, total_steps=EXAMPLE_STEPS)
    return TrainConfig(
        model=model,
        data=data,
        num_steps=EXAMPLE_STEPS,
        schedule=schedule,
        checkpoints=CheckpointConfig(every_steps=10, every_minutes=None),
    )
