"""Entry point of the `tootsie` console script: a table of commands, each imported only when it runs.

`COMMANDS` maps a command name to its module and one-line help. `tootsie
--help` lists the table without importing any command module; `tootsie X ...`
imports X's module alone and calls its `register(subparsers)`, which adds X's
parser (and maybe its siblings in the same module) and sets `handler` to a
function `(args) -> int` returning the exit code; a module may also define
`rewrite_aliases(argv)`, which turns an old command shape into today's
(`options.rewrite_mode_flags`) before parsing. So `tootsie datakit ...`
never pays for JAX, and neither do datakit's worker processes, which the
"spawn" start method begins by re-importing this module. docs/cli.md
describes the command shape and how a new command derives its flags.
"""

import argparse
import importlib
import sys

from tootsie import __version__
from tootsie.errors import PREEMPTED_EXIT_CODE, Preempted, TootsieError

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("tootsie.cli.executor_cmd", "run an experiment file's steps, skipping finished ones"),
    "status": ("tootsie.cli.executor_cmd", "show the status of an experiment file's steps"),
    "verify": ("tootsie.cli.verify_cmd", "rerun finished steps into scratch and check they write the same bytes"),
    "demo": ("tootsie.cli.demo_cmd", "run the end-to-end demo (no network, a few minutes on 2 CPU cores)"),
    "datakit": (
        "tootsie.cli.datakit_cmd",
        "data pipeline stages: normalize, filter, dedup, decontaminate, tokenize",
    ),
    "data": (
        "tootsie.cli.data_cmd",
        "data-layer diagnostics: inspect caches and mixtures, shuffle quality, throughput",
    ),
    "train": ("tootsie.cli.train_cmd", "train a model from a config file (rerun to resume)"),
    "sft": ("tootsie.cli.sft_cmd", "supervised fine-tuning on chat data: example config, evaluation"),
    "dpo": ("tootsie.cli.dpo_cmd", "DPO on preference pairs: example config, evaluation"),
    "rl": ("tootsie.cli.rl_cmd", "RL with verifiable rewards (RLOO/GRPO, distillation): example config, evaluation"),
    "checkpoint": ("tootsie.cli.checkpoint_cmd", "checkpoint maintenance: convert the old format"),
    "eval": ("tootsie.cli.eval_cmd", "evaluate checkpoints: bits-per-byte per domain"),
    "generate": ("tootsie.cli.generate_cmd", "continue a prompt or answer a chat message (KV-cache decoding)"),
    "chat": ("tootsie.cli.generate_cmd", "talk to a checkpoint in the terminal (/exit to leave)"),
    "monitor": ("tootsie.cli.monitor_cmd", "diagnose runs from their metrics: loss spikes"),
    "report": ("tootsie.cli.report_cmd", "write a self-contained report.html of a run"),
    "dashboard": ("tootsie.cli.dashboard_cmd", "serve a live local dashboard of training runs"),
    "export": ("tootsie.cli.release_cmd", "export a checkpoint to another format"),
    "import": ("tootsie.cli.release_cmd", "import a checkpoint from another format"),
    "release": ("tootsie.cli.release_cmd", "HF folder + model card + mixture manifest + metrics history of a run"),
    "scaling": ("tootsie.cli.scaling_cmd", "isoflop sweeps, scaling-law fits, predictions and preregistrations"),
    "phenomena": ("tootsie.cli.phenomena_cmd", "the retrospectives' failures reproduced at toy scale: list, run"),
    "plan": ("tootsie.cli.plan_cmd", "plan a run before launching it (memory per device)"),
}
"""Command name → (module whose `register` adds it, one-line help for `tootsie --help`)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with `command`'s module registered (None: every module) and every other command as a stub.

    A stub carries the table's help, so `tootsie --help` and a misspelt name's
    error list every command without importing any command module.
    """
    parser = argparse.ArgumentParser(prog="tootsie", description="A fully-open LLM training lab.")
    parser.add_argument("--version", action="version", version=f"tootsie {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in dict.fromkeys(module for name, (module, _) in COMMANDS.items() if command in (None, name)):
        importlib.import_module(module).register(subparsers)
    for name, (_, help_text) in COMMANDS.items():
        if name not in subparsers.choices:
            subparsers.add_parser(name, help=help_text)
    return parser


def command_of(argv: list[str]) -> str:
    """The command `argv` names: its first word that is not an option ("" when there is none)."""
    return next((word for word in argv if not word.startswith("-")), "")


def with_aliases(argv: list[str]) -> list[str]:
    """`argv` after its command module's `rewrite_aliases(argv)`, which turns an old shape into today's
    (`sft --evaluate` → `sft evaluate`); unchanged when the module has none."""
    command = command_of(argv)
    if command not in COMMANDS:
        return argv
    rewrite = getattr(importlib.import_module(COMMANDS[command][0]), "rewrite_aliases", None)
    return argv if rewrite is None else rewrite(argv)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """`argv` parsed (old shapes included), importing only the named command's module."""
    argv = with_aliases(argv)
    command = command_of(argv)
    return build_parser(command if command in COMMANDS else "").parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Parse `argv`, run the chosen command, and turn user errors into one line on stderr.

    Exit codes: 0 success, 1 a failed step, 2 a user error, 75 preempted (SIGTERM; rerun to resume), 130 Ctrl-C.
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return args.handler(args)
    except TootsieError as error:
        print(f"tootsie: {error}", file=sys.stderr)
        return 2
    except Preempted as stop:
        print(f"tootsie: {stop}", file=sys.stderr)
        return PREEMPTED_EXIT_CODE
    except KeyboardInterrupt:
        print("tootsie: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
