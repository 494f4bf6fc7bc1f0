"""`tootsie eval bpb-suite`: per-domain bits-per-byte of a checkpoint on a directory of held-out domains.

Each file or folder of `--suite` is a domain; its token cache is an executor
step under `--prefix`, built once and reused (see `tootsie.eval.bpb_suite`).
"""

import argparse

from tootsie.cli.options import add_output_flags
from tootsie.cli.output import emit


def register(verbs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `bpb-suite` to the `tootsie eval` subcommands."""
    suite = verbs.add_parser(
        "bpb-suite",
        help="Paloma-style BPB: a checkpoint on every domain of a held-out directory (micro and macro averages)",
    )
    suite.add_argument(
        "--checkpoint",
        required=True,
        metavar="RUN",
        help="a checkpoint, or a training output directory (its newest checkpoint)",
    )
    suite.add_argument(
        "--suite",
        required=True,
        metavar="DIR",
        help="held-out domains: one .txt/.jsonl/.parquet file or folder per domain",
    )
    suite.add_argument(
        "--tokenizer",
        default=None,
        metavar="FILE",
        help="the tokenizer.json the model was trained with (default: the run's recorded eval tokenizer)",
    )
    suite.add_argument(
        "--prefix",
        default=None,
        metavar="DIR",
        help="where the domain token caches are built and reused (default: $TOOTSIE_PREFIX, else ./out)",
    )
    suite.add_argument(
        "--seq-len", type=int, default=None, help="tokens per evaluated sequence (default: the run's, else 128)"
    )
    suite.add_argument("--max-sequences", type=int, default=None, help="sequences per domain (default: all)")
    suite.add_argument("--ema", action="store_true", help="evaluate the checkpoint's EMA weights")
    add_output_flags(suite)
    suite.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """`tootsie eval bpb-suite`."""
    from tootsie.eval.bpb_suite import run_bpb_suite

    result = run_bpb_suite(
        args.checkpoint,
        args.suite,
        prefix=args.prefix,
        tokenizer=args.tokenizer,
        seq_len=args.seq_len,
        max_sequences=args.max_sequences,
        weights="ema" if args.ema else "model",
    )
    return emit(result, args, f"bits per byte of {result['checkpoint']} on {result['suite']} ({result['weights']})")
