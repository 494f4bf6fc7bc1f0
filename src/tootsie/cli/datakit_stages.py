"""Handlers of `tootsie datakit ...`: build the stage's config from the flags, run the stage, print its counts.

`filter` and `dedup` run their attribute stage, then `consolidate` with the
stage's named filter set (`quality_filters`, `dedup_filters`), so one command
leaves the kept documents in OUT and the attributes in OUT/attributes.
`consolidate` turns its ATTR_DIR:COLUMN[=...] flags into `AttributeFilter`s.

Before a command reads anything it checks the extras it needs (`extract`:
its extractor's modules of the `web` extra; `langid`: lingua; any s3:// path:
the `s3` extra), so a missing one is one line naming `pip install
"tootsie[EXTRA]"`, never a failed shard.
"""

import argparse
import functools
from collections.abc import Callable
from pathlib import Path

from tootsie import storage
from tootsie.cli.options import config_from_args, given_fields
from tootsie.cli.output import build, emit
from tootsie.datakit.classify import ClassifyConfig, classify
from tootsie.datakit.consolidate import AttributeFilter, ConsolidateConfig, consolidate
from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate
from tootsie.datakit.dedup import DedupConfig, dedup, dedup_filters
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract, require_extractor
from tootsie.datakit.langid import LangidConfig, langid, require_model
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.quality import RULE_SETS, QualityConfig, quality, quality_filters
from tootsie.datakit.site_boilerplate import SiteBoilerplateConfig, SiteBoilerplateStageConfig, site_boilerplate
from tootsie.datakit.tokenize import ChatTokenizeConfig, TokenizeConfig, tokenize_chat, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, save_tokenizer, train_bpe
from tootsie.datakit.train_classifier import TrainClassifierConfig, train_classifier
from tootsie.errors import TootsieError
from tootsie.extras import require_for_urls

Handler = Callable[[argparse.Namespace], int]


def checking_urls(handler: Handler) -> Handler:
    """`handler`, after checking that every URL among the arguments has its fsspec backend (s3:// needs `s3`)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        values = [v for value in vars(args).values() for v in (value if isinstance(value, list) else [value])]
        require_for_urls([v for v in values if isinstance(v, str)], purpose=f"datakit {args.stage}")
        return handler(args)

    return run


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The engine settings given on the command line; no progress line with --json or --quiet."""
    return config_from_args(args, EngineConfig, progress=not (args.json or args.quiet))


def normalize_command(args: argparse.Namespace) -> int:
    """`tootsie datakit normalize`."""
    stats = normalize(config_from_args(args, NormalizeConfig, engine=engine_config(args)), args.out)
    return emit(stats, args, f"normalized into {args.out}")


def extract_command(args: argparse.Namespace) -> int:
    """`tootsie datakit extract`: the main content of web pages as normalized documents, site boilerplate removed."""
    rule_flags = given_fields(args, SiteBoilerplateConfig)
    if not args.site_boilerplate and rule_flags:
        flags = ", ".join("--" + name.replace("_", "-") for name in rule_flags)
        raise TootsieError(f"{flags} set the site-boilerplate rule, which --no-site-boilerplate turns off; drop one")
    rule = config_from_args(args, SiteBoilerplateConfig) if args.site_boilerplate else None
    config = config_from_args(args, ExtractConfig, engine=engine_config(args), site_boilerplate=rule)
    require_extractor(config.extractor, purpose=f"datakit extract --extractor {config.extractor}")
    return emit(extract(config, args.out), args, f"extracted web documents into {args.out}")


def site_boilerplate_command(args: argparse.Namespace) -> int:
    """`tootsie datakit site-boilerplate`: a document directory without the lines repeated across a site."""
    if not hasattr(args, "input"):
        raise TootsieError("datakit site-boilerplate needs a document directory: give DIR or --input DIR")
    config = config_from_args(args, SiteBoilerplateStageConfig, input=args.input, engine=engine_config(args))
    stats = site_boilerplate(config, args.out)
    return emit(stats, args, f"documents without site boilerplate in {args.out} (report: site_boilerplate.json)")


def langid_command(args: argparse.Namespace) -> int:
    """`tootsie datakit langid`: language attributes (documents are not rewritten)."""
    config = config_from_args(args, LangidConfig, engine=engine_config(args))
    require_model(purpose="datakit langid")
    return emit(langid(config, args.out), args, f"language attributes in {args.out}")


def filter_command(args: argparse.Namespace) -> int:
    """`tootsie datakit filter`: quality attributes, then the kept documents."""
    engine, attributes, rules = engine_config(args), storage.join(args.out, "attributes"), RULE_SETS[args.rules]()
    config = config_from_args(args, QualityConfig, rules=rules, engine=engine)
    stats = quality(config, attributes)
    filters = quality_filters(attributes, rules=rules)
    kept = consolidate(build(ConsolidateConfig, input=config.input, attributes=filters, engine=engine), args.out)
    counts = {key: stats[key] for key in ("docs", "kept", "rejected")}
    return emit(counts | {"output_docs": kept["output_docs"]}, args, f"filtered documents in {args.out}")


def dedup_command(args: argparse.Namespace) -> int:
    """`tootsie datakit dedup`: duplicate attributes, then the deduplicated documents."""
    engine, attributes = engine_config(args), storage.join(args.out, "attributes")
    config = config_from_args(args, DedupConfig, engine=engine)
    stats = dedup(config, attributes)
    filters = dedup_filters(
        attributes, fuzzy=config.fuzzy, remove_paragraphs=args.remove_paragraphs, remove_lines=config.lines
    )
    kept = consolidate(build(ConsolidateConfig, input=config.input, attributes=filters, engine=engine), args.out)
    line_keys = ("duplicate_lines", "duplicate_line_chars") if config.lines else ()
    keys = ("docs", "exact_duplicates", "fuzzy_duplicates", *line_keys)
    counts = {key: stats[key] for key in keys}
    return emit(counts | {"output_docs": kept["output_docs"]}, args, f"deduplicated documents in {args.out}")


def decontaminate_command(args: argparse.Namespace) -> int:
    """`tootsie datakit decontaminate`: contamination attributes and report (documents are not rewritten)."""
    config = config_from_args(args, DecontaminateConfig, engine=engine_config(args))
    return emit(decontaminate(config, args.out), args, f"contamination attributes and report.json in {args.out}")


CONSOLIDATE_FLAGS = {
    "--drop": ("ATTR_DIR:COLUMN", "drop documents whose boolean column is true (repeatable)"),
    "--drop-false": ("ATTR_DIR:COLUMN", "drop documents whose boolean column is false, e.g. quality_pass"),
    "--remove-spans": ("ATTR_DIR:COLUMN", "cut the [start, end) spans of a spans column"),
    "--min-score": (
        "ATTR_DIR:COLUMN=VALUE",
        "drop documents whose numeric column is below VALUE, e.g. classify/quality_score=0.5",
    ),
    "--top-fraction": (
        "ATTR_DIR:COLUMN=FRACTION",
        "keep the documents whose score is in the top FRACTION over all shards",
    ),
    "--buckets": (
        "ATTR_DIR:COLUMN=N:KEEP[,KEEP]",
        "cut the score into N quantile buckets over all shards, keep the listed ones (0 = lowest)",
    ),
    "--keep-values": (
        "ATTR_DIR:COLUMN=V[,V]",
        "keep only documents whose string column is one of the values, e.g. langid/lang=en,de",
    ),
}
"""consolidate's repeatable filter flags (each value one `AttributeFilter`, applied in this order): metavar, help."""


def add_consolidate_flags(parser: argparse.ArgumentParser) -> None:
    """consolidate's document directory and its filter flags."""
    parser.add_argument("input", metavar="DIR", help="document directory")
    for flag, (metavar, help_text) in CONSOLIDATE_FLAGS.items():
        parser.add_argument(flag, action="append", default=[], metavar=metavar, help=help_text)


def consolidate_command(args: argparse.Namespace) -> int:
    """`tootsie datakit consolidate`: apply attribute columns given as ATTR_DIR:COLUMN[=SETTING]."""
    given = {
        "--drop": args.drop,
        "--drop-false": args.drop_false,
        "--remove-spans": args.remove_spans,
        "--min-score": args.min_score,
        "--top-fraction": args.top_fraction,
        "--buckets": args.buckets,
        "--keep-values": args.keep_values,
    }
    filters = tuple(attribute_filter(flag, value) for flag, values in given.items() for value in values)
    if not filters:
        *first, last = CONSOLIDATE_FLAGS
        raise TootsieError(f"consolidate needs at least one {', '.join(first)} or {last} ATTR_DIR:COLUMN[=...]")
    config = build(ConsolidateConfig, input=args.input, attributes=filters, engine=engine_config(args))
    return emit(consolidate(config, args.out), args, f"consolidated documents in {args.out}")


def attribute_filter(flag: str, value: str) -> AttributeFilter:
    """The filter of one consolidate flag value, named `COLUMN@<stage dir>` (`+flag` for score flags)."""
    spec, setting = (value, "") if flag in ("--drop", "--drop-false", "--remove-spans") else value.rpartition("=")[::2]
    directory, _, column = spec.rpartition(":")
    if not directory or not column:
        raise TootsieError(
            f"{flag} {value!r}: expected ATTR_DIR:COLUMN, e.g. {flag} out/dedup/attributes:exact_duplicate"
        )
    suffix = flag if flag in ("--min-score", "--top-fraction", "--buckets") else ""
    name = f"{column}@{Path(directory).parent.name or directory}{suffix}"
    return build(AttributeFilter, name=name, attributes=directory, column=column, **_mode(flag, setting, value))


def _mode(flag: str, setting: str, value: str) -> dict[str, object]:
    """The AttributeFilter fields that say what the flag does with its column."""
    fixed = {
        "--drop": {"drop_value": True},
        "--drop-false": {"drop_value": False},
        "--remove-spans": {"remove_spans": True},
    }
    if flag in fixed:
        return fixed[flag]
    if flag == "--keep-values":
        keep = tuple(v.strip() for v in setting.split(",") if v.strip())
        if not keep:
            raise TootsieError(
                f"--keep-values {value!r}: give the values to keep, e.g. --keep-values langid/lang=en,de"
            )
        return {"keep_values": keep}
    try:
        if flag == "--min-score":
            return {"drop_below": float(setting)}
        if flag == "--top-fraction":
            return {"keep_top_fraction": float(setting)}
        count, _, keep_buckets = setting.partition(":")
        return {"buckets": int(count), "keep_buckets": tuple(int(b) for b in keep_buckets.split(",") if b)}
    except ValueError:
        example = {"--min-score": "=0.5", "--top-fraction": "=0.1"}.get(flag, "=5:3,4")
        raise TootsieError(f"{flag} setting {setting!r} is not a number; write ATTR_DIR:COLUMN{example}") from None


def train_classifier_command(args: argparse.Namespace) -> int:
    """`tootsie datakit train-classifier` (JAX is imported when it trains, not when the command parses)."""
    config = config_from_args(args, TrainClassifierConfig)
    return emit(train_classifier(config, args.out), args, f"classifier written to {args.out}")


def classify_command(args: argparse.Namespace) -> int:
    """`tootsie datakit classify`."""
    config = config_from_args(args, ClassifyConfig, engine=engine_config(args))
    return emit(classify(config, args.out), args, f"quality_score attributes in {args.out}")


def train_tokenizer_command(args: argparse.Namespace) -> int:
    """`tootsie datakit train-tokenizer`: OUT is the tokenizer.json, or a directory to write it into."""
    out = Path(args.out)
    if out.is_dir():
        out = out / "tokenizer.json"
    tokenizer = train_bpe(config_from_args(args, TokenizerTrainConfig))
    return emit(save_tokenizer(tokenizer, out), args, f"tokenizer written to {out}")


def tokenize_command(args: argparse.Namespace) -> int:
    """`tootsie datakit tokenize`."""
    ledger = tokenize_documents(config_from_args(args, TokenizeConfig, engine=engine_config(args)), args.out)
    counts = {"docs": ledger["num_docs"], "tokens": ledger["num_tokens"], "dtype": ledger["dtype"]}
    return emit(counts, args, f"token cache written to {args.out}")


def tokenize_chat_command(args: argparse.Namespace) -> int:
    """`tootsie datakit tokenize-chat` (also `tokenize --format chat`)."""
    ledger = tokenize_chat(config_from_args(args, ChatTokenizeConfig), args.out)
    counts = {
        "conversations": ledger["num_docs"],
        "tokens": ledger["num_tokens"],
        "loss_tokens": ledger["loss_tokens"],
        "rejected": ledger["rejected"],
    }
    return emit(counts, args, f"chat token cache with loss mask written to {args.out}")
