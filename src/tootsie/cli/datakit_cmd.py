"""`tootsie datakit ...`: each datakit stage as a standalone command.

Every command prints a short human summary, or with `--json` one JSON object
of counts as the last line of stdout (the contract tooling reads). Engine
flags (`--workers`, `--max-failed-shards`) never change outputs.
"""

import argparse
import json
from pathlib import Path
from typing import TypeVar

from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, save_tokenizer, train_bpe
from tootsie.errors import TootsieError

C = TypeVar("C")


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie datakit` and its stage commands."""
    datakit = subparsers.add_parser("datakit", help="data pipeline stages: normalize, tokenizer training, tokenize")
    stages = datakit.add_subparsers(dest="stage", required=True, metavar="STAGE")

    command = _stage(stages, "normalize", "raw JSONL/Parquet/text → Parquet documents with xxh3 ids, exact-deduplicated", run_normalize)
    command.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories or globs")
    command.add_argument("--text-field", default="text", help="text field of the records (default: text)")
    command.add_argument("--id-field", default="id", help="original id field, kept as source_id (default: id)")

    command = _stage(stages, "train-tokenizer", "train a byte-level BPE tokenizer on document directories", run_train_tokenizer)
    command.add_argument("inputs", nargs="+", metavar="DIR", help="document directories")
    command.add_argument("--vocab-size", type=int, required=True, help="vocabulary size, specials and bytes included")

    command = _stage(stages, "tokenize", "document directory → token cache (tokens.bin, offsets.bin, ledger.json)", run_tokenize)
    command.add_argument("input", metavar="DIR", help="document directory")
    command.add_argument("--tokenizer", required=True, metavar="FILE", help="a local tokenizer.json")
    command.add_argument("--no-bos", action="store_true", help="do not prepend BOS to documents")
    command.add_argument("--no-eos", action="store_true", help="do not append EOS to documents")


def _stage(stages: "argparse._SubParsersAction[argparse.ArgumentParser]", name: str, help_text: str, handler: object) -> argparse.ArgumentParser:
    parser = stages.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("--out", required=True, metavar="PATH", help="output directory (a file for train-tokenizer)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--max-failed-shards", type=int, default=0, help="shards allowed to fail before the stage fails")
    parser.add_argument("--json", action="store_true", help="print one JSON object of counts as the last line")
    parser.set_defaults(handler=handler)
    return parser


def build(config_class: type[C], **fields: object) -> C:
    """Construct a config from flags, turning its validation error into a one-line user error."""
    try:
        return config_class(**fields)
    except ValueError as error:
        raise TootsieError(f"{config_class.__name__}: {error}") from None


def engine_of(args: argparse.Namespace) -> EngineConfig:
    """The engine settings given on the command line."""
    workers = {} if args.workers is None else {"workers": args.workers}
    return build(EngineConfig, max_failed_shards=args.max_failed_shards, progress=not args.json, **workers)


def emit(result: dict[str, object], args: argparse.Namespace, headline: str) -> int:
    """Print the result as JSON (last line) or as a headline plus indented counts."""
    if args.json:
        print(json.dumps(result))
    else:
        print(headline)
        for key, value in result.items():
            print(f"  {key}: {value}")
    return 0


def run_normalize(args: argparse.Namespace) -> int:
    """`tootsie datakit normalize`."""
    config = build(NormalizeConfig, inputs=tuple(args.inputs), text_field=args.text_field, id_field=args.id_field, engine=engine_of(args))
    stats = normalize(config, args.out)
    return emit(stats, args, f"normalized into {args.out}")


def run_train_tokenizer(args: argparse.Namespace) -> int:
    """`tootsie datakit train-tokenizer`."""
    config = build(TokenizerTrainConfig, inputs=tuple(args.inputs), vocab_size=args.vocab_size)
    out = Path(args.out)
    if out.is_dir():
        out = out / "tokenizer.json"
    return emit(save_tokenizer(train_bpe(config), out), args, f"tokenizer written to {out}")


def run_tokenize(args: argparse.Namespace) -> int:
    """`tootsie datakit tokenize`."""
    config = build(TokenizeConfig, input=args.input, tokenizer=args.tokenizer, add_bos=not args.no_bos, add_eos=not args.no_eos, engine=engine_of(args))
    ledger = tokenize_documents(config, args.out)
    return emit({"docs": ledger["num_docs"], "tokens": ledger["num_tokens"], "dtype": ledger["dtype"]}, args, f"token cache written to {args.out}")
