"""`tootsie eval VERB`: score a checkpoint.

    tootsie eval bpb --checkpoint RUN --data [NAME=]CACHE... --tokenizer FILE [--ema]
    tootsie eval lm-eval --checkpoint RUN --tokenizer FILE --tasks NAME[,NAME]... [--include-path DIR]...
    tootsie eval suite | mirror | bpb-suite ...          (cli.eval_suite_cmd, cli.bpb_suite_cmd)

`bpb` is bits-per-byte on held-out token caches, per domain and averaged
(`eval.checkpoint_eval.CheckpointBPBConfig`); `lm-eval` runs lm-eval-harness
tasks whose data are local files (`eval.lm_eval_step.LMEvalConfig`; needs
`tootsie[lmeval]`, checked before anything else). Each verb's flags, with
their defaults and help, come from its config's fields; lm-eval's `--ema` is
short for `--weights ema`.
"""

import argparse
import tempfile

from tootsie.cli import bpb_suite_cmd, crosscheck_cmd, eval_suite_cmd, eval_table_cmd
from tootsie.cli.options import add_config_flags, add_output_flags, config_from_args, field_docs
from tootsie.cli.output import emit
from tootsie.eval.checkpoint_eval import CheckpointBPBConfig
from tootsie.eval.lm_eval_step import WEIGHTS, LMEvalConfig

CHECKPOINT_METAVARS = {"checkpoint": "RUN", "tokenizer": "FILE"}


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie eval` and its verbs."""
    evaluate = subparsers.add_parser("eval", help="evaluate checkpoints: BPB, lm-eval tasks, benchmark suites")
    verbs = evaluate.add_subparsers(dest="eval_command", required=True, metavar="VERB")
    bpb = verbs.add_parser("bpb", help="bits-per-byte of a checkpoint on held-out token caches (micro and macro)")
    add_config_flags(bpb, CheckpointBPBConfig, metavars={**CHECKPOINT_METAVARS, "data": "[NAME=]CACHE"})
    add_output_flags(bpb)
    bpb.set_defaults(handler=run_bpb)
    _register_lm_eval(verbs)
    eval_suite_cmd.register(verbs)
    bpb_suite_cmd.register(verbs)
    eval_table_cmd.register(verbs)
    crosscheck_cmd.register(verbs)


def _register_lm_eval(verbs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    lm = verbs.add_parser(
        "lm-eval",
        help="a checkpoint on lm-eval-harness tasks from local data files (log-likelihood, rolling, greedy generation)",
    )
    add_config_flags(
        lm,
        LMEvalConfig,
        exclude=("tasks",),
        renames={"include_paths": "include_path"},
        choices={"weights": WEIGHTS},
        metavars={**CHECKPOINT_METAVARS, "include_paths": "DIR", "limit": "N", "num_fewshot": "K"},
    )
    lm.add_argument(
        "--tasks",
        required=True,
        nargs="+",
        metavar="NAME[,NAME]",
        help=f"{field_docs(LMEvalConfig)['tasks']} Built in: tootsie_pysyntax, tootsie_pylines, tootsie_zen.",
    )
    _add_ema_alias(lm)
    add_output_flags(lm)
    lm.set_defaults(handler=run_lm_eval_command)


def _add_ema_alias(parser: argparse.ArgumentParser) -> None:
    """`--ema`: short for `--weights ema` (LMEvalConfig names the weights to load)."""
    parser.add_argument(
        "--ema",
        dest="weights",
        action="store_const",
        const="ema",
        default=argparse.SUPPRESS,
        help="evaluate the checkpoint's EMA weights (--weights ema)",
    )


def run_bpb(args: argparse.Namespace) -> int:
    """`tootsie eval bpb`."""
    from tootsie.eval.checkpoint_eval import checkpoint_bpb

    result = checkpoint_bpb(config_from_args(args, CheckpointBPBConfig))
    return emit(result, args, f"bits per byte of {result['checkpoint']} ({result['weights']} weights)")


def run_lm_eval_command(args: argparse.Namespace) -> int:
    """`tootsie eval lm-eval`."""
    from tootsie.eval.lm_eval_step import run_lm_eval

    tasks = tuple(name.strip() for value in args.tasks for name in value.split(",") if name.strip())
    config = config_from_args(args, LMEvalConfig, tasks=tasks)
    with tempfile.TemporaryDirectory(prefix="tootsie-lm-eval-") as work_dir:
        result = run_lm_eval(config, work_dir)
    return emit(result, args, f"lm-eval tasks on {result['checkpoint']} ({result['weights']} weights)")
