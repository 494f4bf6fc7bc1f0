"""`tootsie datakit ...`: each datakit stage as a standalone command.

Every command prints a short human summary, or with `--json` one JSON object
of counts as the last line of stdout (the contract tooling reads). Engine
flags (`--workers`, `--max-failed-shards`) never change outputs.

Before a command reads anything it checks the extras it needs (`extract`:
its engine's modules of the `web` extra; `langid`: lingua; any s3:// path:
the `s3` extra), so a missing one is one line naming `pip install
"tootsie[EXTRA]"`, never a failed shard.
"""

import argparse
from collections.abc import Callable
from pathlib import Path

from tootsie.cli.output import build, emit
from tootsie.datakit.classify import ClassifyConfig, classify
from tootsie.datakit.consolidate import AttributeFilter, ConsolidateConfig, consolidate
from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate
from tootsie.datakit.dedup import DedupConfig, dedup
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract, require_extractor
from tootsie.datakit.html_extract import ENGINES, FORMATS
from tootsie.datakit.langid import LangidConfig, langid, require_model
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.quality import QualityConfig, QualityRules, quality
from tootsie.datakit.tokenize import ChatTokenizeConfig, TokenizeConfig, tokenize_chat, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, save_tokenizer, train_bpe
from tootsie.datakit.train_classifier import TrainClassifierConfig, train_classifier
from tootsie.errors import TootsieError
from tootsie.extras import require_for_urls


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `tootsie datakit` and its stage commands."""
    datakit = subparsers.add_parser(
        "datakit", help="data pipeline stages: normalize, filter, dedup, decontaminate, tokenize"
    )
    stages = datakit.add_subparsers(dest="stage", required=True, metavar="STAGE")

    command = _stage(
        stages,
        "normalize",
        "raw JSONL/Parquet/text → Parquet documents with xxh3 ids, exact-deduplicated",
        run_normalize,
    )
    command.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories or globs")
    command.add_argument("--text-field", default="text", help="text field of the records (default: text)")
    command.add_argument("--id-field", default="id", help="original id field, kept as source_id (default: id)")

    command = _stage(
        stages,
        "extract",
        "web archives (.warc, .warc.gz) and .html files → main-content Parquet documents (normalize's schema + url,"
        " title, date)",
        run_extract,
    )
    command.add_argument("inputs", nargs="+", metavar="INPUT", help="WARC or HTML files, directories or globs")
    command.add_argument("--format", choices=FORMATS, default="text", help="text (default) or markdown")
    command.add_argument("--engine", choices=ENGINES, default="resiliparse", help="extractor (default: resiliparse)")

    command = _stage(
        stages, "langid", "language ID → attribute Parquet (id, lang, lang_score); counts per language", run_langid
    )
    command.add_argument("input", metavar="DOCS", help="document directory")

    command = _stage(
        stages,
        "filter",
        "heuristic quality filters (Gopher, C4 lines, compression) → kept documents; attributes in OUT/attributes",
        run_filter,
    )
    command.add_argument("input", metavar="DIR", help="document directory")
    command.add_argument(
        "--rules",
        choices=("prose", "code"),
        default="prose",
        help="rule set: all families (prose) or length + compression (code)",
    )

    command = _stage(
        stages,
        "dedup",
        "exact (and with --fuzzy, MinHash-LSH) duplicates removed; attributes in OUT/attributes",
        run_dedup,
    )
    command.add_argument("input", metavar="DIR", help="document directory")
    command.add_argument(
        "--fuzzy", action="store_true", help="also find near-duplicates with MinHash LSH (286 perms, 26 bands, 5-grams)"
    )
    command.add_argument(
        "--threshold",
        type=float,
        default=0.8,
        help="estimated Jaccard at or above which near-duplicates merge (default 0.8)",
    )
    command.add_argument(
        "--remove-paragraphs", action="store_true", help="also cut paragraphs seen earlier in the corpus"
    )

    command = _stage(
        stages,
        "decontaminate",
        "n-gram overlap with eval sets → attribute Parquet (id, contaminated, max_overlap, matched_eval_ids)",
        run_decontaminate,
    )
    command.add_argument("input", metavar="DIR", help="document directory")
    command.add_argument("--eval", nargs="+", required=True, metavar="FILE", help="eval sets: JSONL (.gz) or Parquet")
    command.add_argument("--eval-field", default="question", help="text field of the eval items (default: question)")
    command.add_argument("--eval-id-field", default="id", help="id field of the eval items (default: id)")
    command.add_argument("--ngram", type=int, default=13, help="word n-gram length (default 13)")
    command.add_argument(
        "--overlap",
        type=float,
        default=0.5,
        help="fraction of an item's n-grams that marks a document contaminated (default 0.5)",
    )

    command = _stage(
        stages,
        "consolidate",
        "apply attribute columns to documents: drop flagged documents, cut spans",
        run_consolidate,
    )
    command.add_argument("input", metavar="DIR", help="document directory")
    command.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="ATTR_DIR:COLUMN",
        help="drop documents whose boolean column is true (repeatable)",
    )
    command.add_argument(
        "--drop-false",
        action="append",
        default=[],
        metavar="ATTR_DIR:COLUMN",
        help="drop documents whose boolean column is false, e.g. quality_pass",
    )
    command.add_argument(
        "--remove-spans",
        action="append",
        default=[],
        metavar="ATTR_DIR:COLUMN",
        help="cut the [start, end) spans of a spans column",
    )
    command.add_argument(
        "--keep-values",
        action="append",
        default=[],
        metavar="ATTR_DIR:COLUMN=V[,V]",
        help="keep only documents whose string column is one of the values, e.g. langid/lang=en,de",
    )
    command.add_argument(
        "--min-score",
        action="append",
        default=[],
        metavar="ATTR_DIR:COLUMN=VALUE",
        help="drop documents whose numeric column is below VALUE, e.g. classify/quality_score=0.5",
    )
    command.add_argument(
        "--top-fraction",
        action="append",
        default=[],
        metavar="ATTR_DIR:COLUMN=FRACTION",
        help="keep the documents whose score is in the top FRACTION over all shards",
    )
    command.add_argument(
        "--buckets",
        action="append",
        default=[],
        metavar="ATTR_DIR:COLUMN=N:KEEP[,KEEP]",
        help="cut the score into N quantile buckets over all shards, keep the listed ones (0 = lowest)",
    )

    command = _stage(
        stages,
        "train-classifier",
        "train a hashed word+bigram linear quality classifier (fastText family) on positive vs negative documents",
        run_train_classifier,
    )
    command.add_argument("--positive", nargs="+", required=True, metavar="DOCS", help="document directories scored 1")
    command.add_argument("--negative", nargs="+", required=True, metavar="DOCS", help="document directories scored 0")
    command.add_argument("--heldout-fraction", type=float, default=0.1, help="share held out by id (default 0.1)")
    command.add_argument("--seed", type=int, default=0, help="chooses the held-out documents (default 0)")
    command.add_argument("--steps", type=int, default=200, help="full-batch Adam steps (default 200)")

    command = _stage(
        stages, "classify", "score documents with a trained classifier → a quality_score attribute", run_classify
    )
    command.add_argument("input", metavar="DOCS", help="document directory")
    command.add_argument(
        "--model", required=True, metavar="MODEL", help="train-classifier output (or its .safetensors)"
    )

    command = _stage(
        stages, "train-tokenizer", "train a byte-level BPE tokenizer on document directories", run_train_tokenizer
    )
    command.add_argument("inputs", nargs="+", metavar="DIR", help="document directories")
    command.add_argument("--vocab-size", type=int, required=True, help="vocabulary size, specials and bytes included")

    command = _stage(
        stages, "tokenize", "document directory → token cache (tokens.bin, offsets.bin, ledger.json)", run_tokenize
    )
    command.add_argument("input", metavar="DIR", help="document directory (chat: a JSONL file or a folder of them)")
    command.add_argument(
        "--format",
        choices=("text", "chat"),
        default="text",
        help="text: Parquet documents; chat: JSONL conversations, cached with a loss mask on assistant turns",
    )
    command.add_argument(
        "--chat-template",
        default="llama3",
        metavar="NAME|FILE",
        help="with --format chat: llama3, chatml, or a Jinja template file (default llama3)",
    )
    command.add_argument(
        "--tokenizer",
        required=True,
        metavar="PATH",
        help="a local tokenizer.json, or a folder holding it (and tokenizer_config.json for BOS/EOS)",
    )
    command.add_argument("--no-bos", action="store_true", help="do not prepend BOS to documents")
    command.add_argument("--no-eos", action="store_true", help="do not append EOS to documents")


Handler = Callable[[argparse.Namespace], int]


def _stage(
    stages: "argparse._SubParsersAction[argparse.ArgumentParser]", name: str, help_text: str, handler: Handler
) -> argparse.ArgumentParser:
    parser = stages.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("--out", required=True, metavar="PATH", help="output directory (a file for train-tokenizer)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument(
        "--max-failed-shards", type=int, default=0, help="shards allowed to fail before the stage fails"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object of counts as the last line")
    parser.set_defaults(handler=_checking_urls(handler))
    return parser


def _checking_urls(handler: Handler) -> Handler:
    """`handler`, after checking that every URL among the arguments has its fsspec backend (s3:// needs `s3`)."""

    def run(args: argparse.Namespace) -> int:
        values = [v for value in vars(args).values() for v in (value if isinstance(value, list) else [value])]
        require_for_urls([v for v in values if isinstance(v, str)], purpose=f"datakit {args.stage}")
        return handler(args)

    return run


def engine_of(args: argparse.Namespace) -> EngineConfig:
    """The engine settings given on the command line."""
    workers = {} if args.workers is None else {"workers": args.workers}
    return build(EngineConfig, max_failed_shards=args.max_failed_shards, progress=not args.json, **workers)


def run_normalize(args: argparse.Namespace) -> int:
    """`tootsie datakit normalize`."""
    config = build(
        NormalizeConfig,
        inputs=tuple(args.inputs),
        text_field=args.text_field,
        id_field=args.id_field,
        engine=engine_of(args),
    )
    stats = normalize(config, args.out)
    return emit(stats, args, f"normalized into {args.out}")


def run_extract(args: argparse.Namespace) -> int:
    """`tootsie datakit extract`: the main content of web pages as normalized documents."""
    require_extractor(args.engine, purpose=f"datakit extract --engine {args.engine}")
    config = build(
        ExtractConfig, inputs=tuple(args.inputs), extractor=args.engine, format=args.format, engine=engine_of(args)
    )
    return emit(extract(config, args.out), args, f"extracted web documents into {args.out}")


def run_langid(args: argparse.Namespace) -> int:
    """`tootsie datakit langid`: language attributes (documents are not rewritten)."""
    require_model(purpose="datakit langid")
    config = build(LangidConfig, input=args.input, engine=engine_of(args))
    return emit(langid(config, args.out), args, f"language attributes in {args.out}")


def run_filter(args: argparse.Namespace) -> int:
    """`tootsie datakit filter`: quality attributes, then the kept documents."""
    out, engine = Path(args.out), engine_of(args)
    rules = QualityRules.for_code() if args.rules == "code" else QualityRules()
    stats = quality(build(QualityConfig, input=args.input, rules=rules, engine=engine), str(out / "attributes"))
    filters = [AttributeFilter("quality", str(out / "attributes"), "quality_pass", drop_value=False)]
    if rules.c4 is not None:
        filters.append(AttributeFilter("c4_lines", str(out / "attributes"), "c4_removed_spans", remove_spans=True))
    kept = consolidate(build(ConsolidateConfig, input=args.input, attributes=tuple(filters), engine=engine), str(out))
    return emit(
        {
            "docs": stats["docs"],
            "kept": stats["kept"],
            "rejected": stats["rejected"],
            "output_docs": kept["output_docs"],
        },
        args,
        f"filtered documents in {out}",
    )


def run_dedup(args: argparse.Namespace) -> int:
    """`tootsie datakit dedup`: duplicate attributes, then the deduplicated documents."""
    out, engine = Path(args.out), engine_of(args)
    stats = dedup(
        build(DedupConfig, input=args.input, fuzzy=args.fuzzy, threshold=args.threshold, engine=engine),
        str(out / "attributes"),
    )
    filters = [AttributeFilter("exact_duplicate", str(out / "attributes"), "exact_duplicate", drop_value=True)]
    if args.fuzzy:
        filters.append(AttributeFilter("fuzzy_duplicate", str(out / "attributes"), "fuzzy_duplicate", drop_value=True))
    if args.remove_paragraphs:
        filters.append(
            AttributeFilter(
                "duplicate_paragraphs", str(out / "attributes"), "duplicate_paragraph_spans", remove_spans=True
            )
        )
    kept = consolidate(build(ConsolidateConfig, input=args.input, attributes=tuple(filters), engine=engine), str(out))
    result = {
        "docs": stats["docs"],
        "exact_duplicates": stats["exact_duplicates"],
        "fuzzy_duplicates": stats["fuzzy_duplicates"],
        "output_docs": kept["output_docs"],
    }
    return emit(result, args, f"deduplicated documents in {out}")


def run_decontaminate(args: argparse.Namespace) -> int:
    """`tootsie datakit decontaminate`: contamination attributes and report (documents are not rewritten)."""
    config = build(
        DecontaminateConfig,
        input=args.input,
        eval_files=tuple(args.eval),
        eval_field=args.eval_field,
        eval_id_field=args.eval_id_field,
        ngram=args.ngram,
        threshold=args.overlap,
        engine=engine_of(args),
    )
    return emit(decontaminate(config, args.out), args, f"contamination attributes and report.json in {args.out}")


def _attribute_flag(value: str, flag: str) -> tuple[str, str]:
    directory, _, column = value.rpartition(":")
    if not directory or not column:
        raise TootsieError(
            f"{flag} {value!r}: expected ATTR_DIR:COLUMN, e.g. {flag} out/dedup/attributes:exact_duplicate"
        )
    return directory, column


def run_consolidate(args: argparse.Namespace) -> int:
    """`tootsie datakit consolidate`: apply attribute columns given as ATTR_DIR:COLUMN."""
    filters = []
    for flag, values, mode in (
        ("--drop", args.drop, {"drop_value": True}),
        ("--drop-false", args.drop_false, {"drop_value": False}),
        ("--remove-spans", args.remove_spans, {"remove_spans": True}),
    ):
        filters.extend(_attribute_filter(value, flag, "", mode) for value in values)
    for flag, values in (
        ("--min-score", args.min_score),
        ("--top-fraction", args.top_fraction),
        ("--buckets", args.buckets),
    ):
        for value in values:
            spec, _, setting = value.rpartition("=")
            filters.append(_attribute_filter(spec, flag, flag, _score_mode(flag, setting)))
    for value in args.keep_values:
        spec, _, values = value.rpartition("=")
        directory, column = _attribute_flag(spec, "--keep-values")
        keep = tuple(v.strip() for v in values.split(",") if v.strip())
        if not keep:
            raise TootsieError(
                f"--keep-values {value!r}: give the values to keep, e.g. --keep-values langid/lang=en,de"
            )
        name = f"{column}@{Path(directory).parent.name or directory}"
        filters.append(build(AttributeFilter, name=name, attributes=directory, column=column, keep_values=keep))
    if not filters:
        raise TootsieError(
            "consolidate needs at least one --drop, --drop-false, --remove-spans, --keep-values, --min-score,"
            " --top-fraction or --buckets ATTR_DIR:COLUMN[=...]"
        )
    stats = consolidate(
        build(ConsolidateConfig, input=args.input, attributes=tuple(filters), engine=engine_of(args)), args.out
    )
    return emit(stats, args, f"consolidated documents in {args.out}")


def _attribute_filter(value: str, flag: str, suffix: str, mode: dict[str, object]) -> AttributeFilter:
    """The filter of one ATTR_DIR:COLUMN flag value, named `COLUMN@<stage dir><suffix>`."""
    directory, column = _attribute_flag(value, flag)
    name = f"{column}@{Path(directory).parent.name or directory}{suffix}"
    return build(AttributeFilter, name=name, attributes=directory, column=column, **mode)


def _score_mode(flag: str, setting: str) -> dict[str, object]:
    """The AttributeFilter fields of a --min-score, --top-fraction or --buckets setting."""
    try:
        if flag == "--min-score":
            return {"drop_below": float(setting)}
        if flag == "--top-fraction":
            return {"keep_top_fraction": float(setting)}
        count, _, keep = setting.partition(":")
        return {"buckets": int(count), "keep_buckets": tuple(int(b) for b in keep.split(",") if b)}
    except ValueError:
        example = {"--min-score": "=0.5", "--top-fraction": "=0.1"}.get(flag, "=5:3,4")
        raise TootsieError(f"{flag} setting {setting!r} is not a number; write ATTR_DIR:COLUMN{example}") from None


def run_train_classifier(args: argparse.Namespace) -> int:
    """`tootsie datakit train-classifier`."""
    config = build(
        TrainClassifierConfig,
        positive=tuple(args.positive),
        negative=tuple(args.negative),
        heldout_fraction=args.heldout_fraction,
        seed=args.seed,
        steps=args.steps,
    )
    return emit(train_classifier(config, args.out), args, f"classifier written to {args.out}")


def run_classify(args: argparse.Namespace) -> int:
    """`tootsie datakit classify`."""
    config = build(ClassifyConfig, input=args.input, model=args.model, engine=engine_of(args))
    return emit(classify(config, args.out), args, f"quality_score attributes in {args.out}")


def run_train_tokenizer(args: argparse.Namespace) -> int:
    """`tootsie datakit train-tokenizer`."""
    config = build(TokenizerTrainConfig, inputs=tuple(args.inputs), vocab_size=args.vocab_size)
    out = Path(args.out)
    if out.is_dir():
        out = out / "tokenizer.json"
    return emit(save_tokenizer(train_bpe(config), out), args, f"tokenizer written to {out}")


def run_tokenize(args: argparse.Namespace) -> int:
    """`tootsie datakit tokenize`."""
    if args.format == "chat":
        chat = build(ChatTokenizeConfig, input=args.input, tokenizer=args.tokenizer, chat_template=args.chat_template)
        ledger = tokenize_chat(chat, args.out)
        counts = {
            "conversations": ledger["num_docs"],
            "tokens": ledger["num_tokens"],
            "loss_tokens": ledger["loss_tokens"],
            "rejected": ledger["rejected"],
        }
        return emit(counts, args, f"chat token cache with loss mask written to {args.out}")
    config = build(
        TokenizeConfig,
        input=args.input,
        tokenizer=args.tokenizer,
        add_bos=not args.no_bos,
        add_eos=not args.no_eos,
        engine=engine_of(args),
    )
    ledger = tokenize_documents(config, args.out)
    return emit(
        {"docs": ledger["num_docs"], "tokens": ledger["num_tokens"], "dtype": ledger["dtype"]},
        args,
        f"token cache written to {args.out}",
    )
