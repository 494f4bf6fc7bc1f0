"""`tootsie eval bpb-suite`: per-domain bits-per-byte of a checkpoint on a directory of held-out domains.

Each file or folder of `--suite` is a domain; its token cache is an executor
step under `--prefix`, built once and reused (see `tootsie.eval.bpb_suite`).
A local clone of the allenai/paloma dataset (`<source>/val/*.jsonl.gz`) is
detected and scored the way Paloma defines its figures (`tootsie.eval.paloma`,
docs/paloma.md); `--layout` forces either reading.
"""

import argparse

from tootsie.cli.options import add_output_flags
from tootsie.cli.output import emit
from tootsie.errors import TootsieError


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
        help="held-out domains: one .txt/.jsonl/.parquet file or folder per domain, or a Paloma mirror",
    )
    suite.add_argument(
        "--layout",
        choices=("auto", "folders", "paloma"),
        default="auto",
        help="how --suite is read: detected (default), one domain per entry, or Paloma's release layout",
    )
    paloma = suite.add_argument_group("Paloma layout (docs/paloma.md)")
    paloma.add_argument("--split", choices=("val", "test"), default="val", help="the split folder to score")
    paloma.add_argument(
        "--subsets", default=None, metavar="A,B", help="sources to score, e.g. c4_en,m2d2_s2orc_unsplit (default: all)"
    )
    paloma.add_argument(
        "--max-documents", type=int, default=None, help="documents per subdomain, the first ones (default: all)"
    )
    paloma.add_argument(
        "--prefix-token",
        choices=("bos", "eos"),
        default="bos",
        help="the token a document's first token is predicted from (Paloma's code uses EOS; tootsie trains on BOS)",
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
    suite.add_argument(
        "--max-sequences", type=int, default=None, help="packed sequences per domain, folders layout (default: all)"
    )
    suite.add_argument("--ema", action="store_true", help="evaluate the checkpoint's EMA weights")
    add_output_flags(suite)
    suite.set_defaults(handler=run)


LAYOUT_FLAGS = {
    "paloma": {"split": "val", "subsets": None, "max_documents": None, "prefix_token": "bos"},
    "folders": {"prefix": None, "max_sequences": None},
}
"""The flags only one layout reads, with their defaults: set for the other layout, they would do nothing."""


def refuse_other_layout_flags(args: argparse.Namespace, layout: str) -> None:
    """Refuse a flag that only the other layout reads (e.g. --max-sequences on a Paloma mirror), naming it."""
    other = "folders" if layout == "paloma" else "paloma"
    given = [name for name, default in LAYOUT_FLAGS[other].items() if getattr(args, name) != default]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise TootsieError(
            f"{flags}: only the {other} layout reads this, and {args.suite} is read as the {layout} layout;"
            f" drop it, or pass --layout {other} if the suite is really that layout"
        )


def run(args: argparse.Namespace) -> int:
    """`tootsie eval bpb-suite`."""
    from tootsie.eval.bpb_suite import run_bpb_suite, run_paloma_suite, suite_layout

    weights = "ema" if args.ema else "model"
    layout = suite_layout(args.suite, args.layout)
    refuse_other_layout_flags(args, layout)
    if layout == "paloma":
        result = run_paloma_suite(
            args.checkpoint,
            args.suite,
            tokenizer=args.tokenizer,
            seq_len=args.seq_len,
            split=args.split,
            sources=tuple(args.subsets.split(",")) if args.subsets else None,
            max_documents=args.max_documents,
            prefix_token=args.prefix_token,
            weights=weights,
        )
        return emit(result, args, f"Paloma {args.split} figures of {result['checkpoint']} ({weights})")
    result = run_bpb_suite(
        args.checkpoint,
        args.suite,
        prefix=args.prefix,
        tokenizer=args.tokenizer,
        seq_len=args.seq_len,
        max_sequences=args.max_sequences,
        weights=weights,
    )
    return emit(result, args, f"bits per byte of {result['checkpoint']} on {result['suite']} ({result['weights']})")
