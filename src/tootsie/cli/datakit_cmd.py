"""`tootsie datakit STAGE ...`: each datakit stage as a standalone command, its flags derived from its config.

Every stage takes `--out`, `--json` and `--quiet`; a stage that runs shard by
shard also takes the engine's `--workers` and `--max-failed-shards` (neither
changes outputs). The other flags are the fields of the stage's config
(`NormalizeConfig`, `DedupConfig`, ...) with its defaults and field
docstrings (`cli.options`); the handlers, in `cli.datakit_stages`, build the
config, call the stage and print its counts (with `--json`, one JSON object
as the last line of stdout).

`extract` removes site boilerplate unless `--no-site-boilerplate`, with the
rule's flags (`--min-pages`, `--min-fraction`, ...) beside its own; the
`site-boilerplate` command runs that stage alone on a document directory.

Kept old shapes: `extract --engine E` is `--extractor E`; `decontaminate
--eval/--overlap` are `--eval-files/--threshold`; `tokenize --no-bos/--no-eos`
are `--no-add-bos/--no-add-eos`; `tokenize --format chat` is `tokenize-chat`.

Nothing here imports JAX (tests/cli/test_cli_imports.py), so parsing is fast
and the "spawn" workers of a stage start light.
"""

import argparse
from collections.abc import Callable
from typing import NamedTuple

from tootsie.cli import datakit_stages as run
from tootsie.cli.options import add_config_flags, add_output_flags, rewrite_mode_flags
from tootsie.datakit.classify import ClassifyConfig
from tootsie.datakit.decontaminate import DecontaminateConfig
from tootsie.datakit.dedup import DedupConfig
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig
from tootsie.datakit.html_extract import ENGINES, FORMATS
from tootsie.datakit.langid import LangidConfig
from tootsie.datakit.normalize import NormalizeConfig
from tootsie.datakit.quality import RULE_SETS, QualityConfig
from tootsie.datakit.site_boilerplate import SiteBoilerplateConfig, SiteBoilerplateStageConfig
from tootsie.datakit.tokenize import ChatTokenizeConfig, TokenizeConfig
from tootsie.datakit.tokenizer import TokenizerTrainConfig
from tootsie.datakit.train_classifier import TrainClassifierConfig

Parser = argparse.ArgumentParser


class Stage(NamedTuple):
    """One datakit command: its help, the flags of its own, its handler, and whether it runs shards."""

    help: str
    flags: Callable[[Parser], None]
    handler: Callable[[argparse.Namespace], int]
    sharded: bool = True


def _docs(config: type, *, positional: str, metavar: str, exclude: tuple[str, ...] = ()) -> Callable[[Parser], None]:
    """Flags of a stage config whose document input is one positional argument (its engine comes separately)."""
    return lambda parser: add_config_flags(
        parser, config, exclude=("engine", *exclude), positional=(positional,), metavars={positional: metavar}
    )


def _extract(parser: Parser) -> None:
    add_config_flags(
        parser,
        ExtractConfig,
        exclude=("engine", "site_boilerplate"),
        positional=("inputs",),
        metavars={"inputs": "INPUT"},
        aliases={"extractor": ("--engine",)},
        choices={"extractor": ENGINES, "format": FORMATS},
    )
    parser.add_argument(
        "--no-site-boilerplate",
        dest="site_boilerplate",
        action="store_false",
        help="keep the lines repeated across a site's pages (by default they are removed; see --min-pages)",
    )
    add_config_flags(parser, SiteBoilerplateConfig)


def _site_boilerplate(parser: Parser) -> None:
    # The document directory comes positional, as for every stage, or as --input DIR.
    parser.add_argument("input", nargs="?", metavar="DIR", default=argparse.SUPPRESS, help="document directory")
    parser.add_argument("--input", dest="input", metavar="DIR", default=argparse.SUPPRESS, help="the same, as a flag")
    add_config_flags(
        parser,
        SiteBoilerplateStageConfig,
        exclude=("engine", "input", "max_doc_bytes", "max_whitespace_run"),
        flatten=("rule",),
    )


def _filter(parser: Parser) -> None:
    add_config_flags(
        parser, QualityConfig, exclude=("engine", "rules"), positional=("input",), metavars={"input": "DIR"}
    )
    parser.add_argument(
        "--rules",
        choices=tuple(RULE_SETS),
        default="prose",
        help="rule set: every family (prose) or length + compression (code)",
    )


def _dedup(parser: Parser) -> None:
    # Exact-only unless --fuzzy, as the command always was (DedupConfig, for steps, defaults to fuzzy); --lines
    # marks the lines seen earlier in the corpus and cuts them.
    add_config_flags(
        parser,
        DedupConfig,
        only=("input", "fuzzy", "threshold", "lines"),
        positional=("input",),
        metavars={"input": "DIR"},
        defaults={"fuzzy": False},
    )
    parser.add_argument(
        "--remove-paragraphs", action="store_true", help="also cut paragraphs seen earlier in the corpus"
    )


def _decontaminate(parser: Parser) -> None:
    add_config_flags(
        parser,
        DecontaminateConfig,
        exclude=("engine",),
        positional=("input",),
        metavars={"input": "DIR", "eval_files": "FILE"},
        aliases={"eval_files": ("--eval",), "threshold": ("--overlap",)},
    )


def _tokenize(parser: Parser) -> None:
    add_config_flags(
        parser,
        TokenizeConfig,
        exclude=("engine",),
        positional=("input",),
        metavars={"input": "DIR", "tokenizer": "PATH"},
        false_flags={"add_bos": ("--no-bos",), "add_eos": ("--no-eos",)},
    )


STAGES: dict[str, Stage] = {
    "normalize": Stage(
        "raw JSONL/Parquet/text → Parquet documents with xxh3 ids, exact-deduplicated",
        _docs(NormalizeConfig, positional="inputs", metavar="INPUT"),
        run.normalize_command,
    ),
    "extract": Stage(
        "web archives (.warc, .warc.gz) and .html files → main-content Parquet documents (normalize's schema + url,"
        " title, date)",
        _extract,
        run.extract_command,
    ),
    "site-boilerplate": Stage(
        "documents with a url column (e.g. extracted elsewhere) → the same without the lines repeated across a"
        " site's pages; report in OUT/site_boilerplate.json",
        _site_boilerplate,
        run.site_boilerplate_command,
    ),
    "langid": Stage(
        "language ID → attribute Parquet (id, lang, lang_score); counts per language",
        _docs(LangidConfig, positional="input", metavar="DOCS"),
        run.langid_command,
    ),
    "filter": Stage(
        "heuristic quality filters (Gopher, C4 lines, compression) → kept documents; attributes in OUT/attributes",
        _filter,
        run.filter_command,
    ),
    "dedup": Stage(
        "exact (and with --fuzzy, MinHash-LSH) duplicates removed, with --lines repeated lines cut;"
        " attributes in OUT/attributes",
        _dedup,
        run.dedup_command,
    ),
    "decontaminate": Stage(
        "n-gram overlap with eval sets → attribute Parquet (id, contaminated, max_overlap, matched_eval_ids)",
        _decontaminate,
        run.decontaminate_command,
    ),
    "consolidate": Stage(
        "apply attribute columns to documents: drop flagged documents, cut spans",
        run.add_consolidate_flags,
        run.consolidate_command,
    ),
    "train-classifier": Stage(
        "train a hashed word+bigram linear quality classifier (fastText family) on positive vs negative documents",
        lambda parser: add_config_flags(parser, TrainClassifierConfig, exclude=("features",)),
        run.train_classifier_command,
        sharded=False,
    ),
    "classify": Stage(
        "score documents with a trained classifier → a quality_score attribute",
        _docs(ClassifyConfig, positional="input", metavar="DOCS"),
        run.classify_command,
    ),
    "train-tokenizer": Stage(
        "train a byte-level BPE tokenizer on document directories",
        _docs(TokenizerTrainConfig, positional="inputs", metavar="DIR"),
        run.train_tokenizer_command,
        sharded=False,
    ),
    "tokenize": Stage(
        "document directory → token cache (tokens.bin, offsets.bin, ledger.json)", _tokenize, run.tokenize_command
    ),
    "tokenize-chat": Stage(
        "JSONL conversations (a file or a folder of them) → token cache with a loss mask on assistant turns",
        _docs(ChatTokenizeConfig, positional="input", metavar="FILE_OR_DIR"),
        run.tokenize_chat_command,
        sharded=False,
    ),
}
"""Stage command name → what it is, how its flags are made and what runs it."""


def register(subparsers: "argparse._SubParsersAction[Parser]") -> None:
    """Add `tootsie datakit` and its stage commands."""
    datakit = subparsers.add_parser(
        "datakit", help="data pipeline stages: normalize, filter, dedup, decontaminate, tokenize"
    )
    stages = datakit.add_subparsers(dest="stage", required=True, metavar="STAGE")
    for name, stage in STAGES.items():
        parser = stages.add_parser(name, help=stage.help, description=stage.help)
        stage.flags(parser)
        parser.add_argument(
            "--out", required=True, metavar="PATH", help="output directory (a file for train-tokenizer)"
        )
        if stage.sharded:
            add_config_flags(parser, EngineConfig, only=("workers", "max_failed_shards"))
        add_output_flags(parser)
        parser.set_defaults(handler=run.checking_urls(stage.handler))


def rewrite_aliases(argv: list[str]) -> list[str]:
    """Old shapes: `datakit tokenize ... --format chat` is `datakit tokenize-chat ...`; `--format text` is plain."""
    return rewrite_mode_flags(
        argv,
        ("datakit", "tokenize"),
        {"--format=chat": ("datakit", "tokenize-chat"), "--format=text": ("datakit", "tokenize")},
    )
