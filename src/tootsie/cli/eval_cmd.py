"""`tootsie eval bpb`: bits-per-byte of any checkpoint on held-out token caches, per domain and averaged.

`tootsie eval lm-eval`: a checkpoint on lm-eval-harness tasks whose data are local files (needs `tootsie[lmeval]`,
checked before anything else).
"""

import argparse
import tempfile
from pathlib import Path

from tootsie.cli import bpb_suite_cmd
from tootsie.cli.eval_suite_cmd import register as register_suite_commands
from tootsie.cli.output import build, emit
from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.tokenizer import load_tokenizer
from tootsie.errors import TootsieError
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.eval.lm_eval_step import LMEvalConfig, run_lm_eval
from tootsie.extras import require
from tootsie.train.checkpoint import model_config_of, read_checkpoint_state
from tootsie.train.loading import load_model, resolve_checkpoint


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie eval` and its subcommands."""
    evaluate = subparsers.add_parser("eval", help="evaluate checkpoints: bits-per-byte per domain")
    commands = evaluate.add_subparsers(dest="eval_command", required=True, metavar="COMMAND")
    bpb = commands.add_parser(
        "bpb", help="bits-per-byte of a checkpoint on held-out token caches (micro and macro averages)"
    )
    bpb.add_argument(
        "--checkpoint",
        required=True,
        metavar="DIR",
        help="a checkpoint, or a training output directory (its newest checkpoint)",
    )
    bpb.add_argument(
        "--data",
        required=True,
        nargs="+",
        metavar="[NAME=]CACHE",
        help="held-out token caches; the domain name defaults to the directory name",
    )
    bpb.add_argument(
        "--tokenizer",
        required=True,
        metavar="FILE",
        help="the tokenizer.json the caches were made with (for byte counts)",
    )
    bpb.add_argument("--seq-len", type=int, default=128, help="tokens per evaluated sequence (default 128)")
    bpb.add_argument("--max-sequences", type=int, default=None, help="sequences per domain (default: all)")
    bpb.add_argument("--ema", action="store_true", help="evaluate the checkpoint's EMA weights")
    bpb.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    bpb.set_defaults(handler=run_bpb)
    lm = commands.add_parser(
        "lm-eval",
        help="a checkpoint on lm-eval-harness tasks from local data files (log-likelihood, rolling, greedy generation)",
    )
    lm.add_argument(
        "--checkpoint",
        required=True,
        metavar="DIR",
        help="a checkpoint, or a training output directory (its newest checkpoint)",
    )
    lm.add_argument("--tokenizer", required=True, metavar="FILE", help="the tokenizer.json the model was trained with")
    lm.add_argument(
        "--tasks",
        required=True,
        metavar="NAME[,NAME]",
        help="task names: built-in tootsie_pysyntax, tootsie_pylines, tootsie_zen, or tasks under --include-path",
    )
    lm.add_argument(
        "--include-path",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory of lm-eval task YAMLs with local data_files (repeatable)",
    )
    lm.add_argument(
        "--limit", type=int, default=None, metavar="N", help="the first N documents of each task (default: all)"
    )
    lm.add_argument(
        "--num-fewshot",
        type=int,
        default=None,
        metavar="K",
        help="few-shot examples per prompt (default: each task's own, zero)",
    )
    lm.add_argument(
        "--max-length",
        type=int,
        default=128,
        metavar="TOKENS",
        help="longest model input, normally the training seq_len (default 128); longer contexts are left-truncated",
    )
    lm.add_argument("--batch-size", type=int, default=8, help="rows per forward pass (default 8)")
    lm.add_argument("--ema", action="store_true", help="evaluate the checkpoint's EMA weights")
    lm.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    lm.set_defaults(handler=run_lm_eval_command)
    register_suite_commands(commands)
    bpb_suite_cmd.register(commands)


def _domains(values: list[str]) -> dict[str, str]:
    domains = {}
    for value in values:
        name, _, path = value.rpartition("=") if "=" in value else (Path(value).name, "", value)
        if name in domains:
            raise TootsieError(f"two caches are both named {name!r}; pass NAME=CACHE to tell them apart")
        domains[name] = path
    return domains


def run_bpb(args: argparse.Namespace) -> int:
    """`tootsie eval bpb`."""
    checkpoint = resolve_checkpoint(args.checkpoint)
    model = load_model(model_config_of(checkpoint), str(checkpoint), weights="ema" if args.ema else "model")
    token_bytes = TokenBytes(load_tokenizer(args.tokenizer))
    results = {
        name: domain_bpb(model, cache, token_bytes, args.seq_len, max_sequences=args.max_sequences)
        for name, cache in _domains(args.data).items()
    }
    summary = {
        "checkpoint": str(checkpoint),
        "step": read_checkpoint_state(checkpoint)["step"],
        "weights": "ema" if args.ema else "model",
        "bpb": summarize(results),
        "bytes": {name: r.bytes for name, r in results.items()},
    }
    return emit(summary, args, f"bits per byte of {checkpoint} ({summary['weights']} weights)")


def run_lm_eval_command(args: argparse.Namespace) -> int:
    """`tootsie eval lm-eval`."""
    require(("lmeval",), purpose="eval lm-eval")
    tasks = tuple(name.strip() for name in args.tasks.split(",") if name.strip())
    config = build(
        LMEvalConfig,
        checkpoint=args.checkpoint,
        tokenizer=args.tokenizer,
        tasks=tasks,
        include_paths=tuple(args.include_path),
        limit=args.limit,
        num_fewshot=args.num_fewshot,
        max_length=args.max_length,
        weights="ema" if args.ema else "model",
        batch_size=args.batch_size,
    )
    with tempfile.TemporaryDirectory(prefix="tootsie-lm-eval-") as work_dir:
        result = run_lm_eval(config, work_dir)
    return emit(result, args, f"lm-eval tasks on {result['checkpoint']} ({result['weights']} weights)")
