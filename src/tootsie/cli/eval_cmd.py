"""`tootsie eval bpb`: bits-per-byte of any checkpoint on held-out token caches, per domain and averaged."""

import argparse
import json
from pathlib import Path

from tootsie.cli.output import emit
from tootsie.configfile import from_plain
from tootsie.datakit.tokenizer import load_tokenizer, token_byte_lengths
from tootsie.errors import TootsieError
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.models.llama import LlamaConfig
from tootsie.train.trainer import load_model, resolve_checkpoint


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie eval` and its subcommands."""
    evaluate = subparsers.add_parser("eval", help="evaluate checkpoints: bits-per-byte per domain")
    commands = evaluate.add_subparsers(dest="eval_command", required=True, metavar="COMMAND")
    bpb = commands.add_parser("bpb", help="bits-per-byte of a checkpoint on held-out token caches (micro and macro averages)")
    bpb.add_argument("--checkpoint", required=True, metavar="DIR", help="a checkpoint, or a training output directory (its newest checkpoint)")
    bpb.add_argument("--data", required=True, nargs="+", metavar="[NAME=]CACHE", help="held-out token caches; the domain name defaults to the directory name")
    bpb.add_argument("--tokenizer", required=True, metavar="FILE", help="the tokenizer.json the caches were made with (for byte counts)")
    bpb.add_argument("--seq-len", type=int, default=128, help="tokens per evaluated sequence (default 128)")
    bpb.add_argument("--max-sequences", type=int, default=None, help="sequences per domain (default: all)")
    bpb.add_argument("--ema", action="store_true", help="evaluate the checkpoint's EMA weights")
    bpb.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    bpb.set_defaults(handler=run_bpb)


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
    state = json.loads((checkpoint / "state.json").read_text(encoding="utf-8"))
    if "model" not in state:
        raise TootsieError(f"{checkpoint}/state.json records no model config (written by an older tootsie); retrain or resave the checkpoint")
    model = load_model(from_plain(LlamaConfig, state["model"], "state.json:model"), str(checkpoint), weights="ema" if args.ema else "model")
    byte_lengths = token_byte_lengths(load_tokenizer(args.tokenizer))
    results = {name: domain_bpb(model, cache, byte_lengths, args.seq_len, max_sequences=args.max_sequences) for name, cache in _domains(args.data).items()}
    summary = {"checkpoint": str(checkpoint), "step": state["step"], "weights": "ema" if args.ema else "model", "bpb": summarize(results),
               "bytes": {name: r.bytes for name, r in results.items()}}
    return emit(summary, args, f"bits per byte of {checkpoint} ({summary['weights']} weights)")
