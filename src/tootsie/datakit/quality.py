"""Quality attributes: heuristic signals and rule verdicts for every document, co-partitioned with them.

For each document shard `part-NNNNN.parquet` of `config.input`, the stage
writes `<output>/part-NNNNN.parquet` with the same rows in the same order: `id`,
one column per signal value (see `quality_rules`), one boolean `<rule>_pass`
per active rule, and `quality_pass` (every active rule passed). Documents are
never rewritten: consolidate drops on `quality_pass == False` (or on any single
`<rule>_pass`, or on a signal threshold) and cuts `c4_removed_spans` out.

`stats.json` counts what the rules would drop (docs/style.md rule 10):
`{"docs", "kept", "rejected": {rule: docs failing it}, "c4_lines_removed":
{reason: lines}, "c4_chars_removed", "rules", "shards", "failed_shards"}`. A
document failing two rules counts under both, so the `rejected` counts can sum
to more than `docs - kept`. The shared `total` / `kept` / `dropped`
(`tootsie.datakit.stats`) count each failing document once, under the first
rule it fails in `QualityRules.rules` order, so `total - kept ==
sum(dropped.values())`.

Rule sets: `QualityRules()` runs every family with the papers' thresholds and
is meant for prose. Source code fails most prose rules by construction (no
terminal punctuation, few stop words, `{` and `#` everywhere), so for a code
source use `QualityRules.for_code()`: word count and compression ratio only.
Run the stage once per source with the rule set that fits it (the demo keeps
its sources in separate document directories). Any single rule or family can
be switched off in the config (threshold or family set to None).

Example: a shard of 3 documents, one a line repeated 20 times, gives an
attribute shard of 3 rows whose second row has `rep_dup_line_fraction_pass`
False and `quality_pass` False; stats.json has
`rejected["rep_dup_line_fraction"] == 1`.
"""

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa

from tootsie.configfile import unhashed
from tootsie.datakit.attribute_stage import documents, run_attribute_stage
from tootsie.datakit.consolidate import AttributeFilter
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.quality_rules import (
    C4_SIGNALS,
    GOPHER_SIGNALS,
    C4Config,
    CompressionConfig,
    GopherQualityConfig,
    GopherRepetitionConfig,
    c4_lines,
    compression_ratio,
    gopher_quality,
    gopher_repetition,
)
from tootsie.datakit.stats import StageStats


class DocQuality(NamedTuple):
    """Everything the rules say about one document."""

    signals: dict[str, Any]
    passed: dict[str, bool]
    lines_removed: Counter[str]


@dataclass(frozen=True)
class QualityRules:
    """Which rule families run; None switches a whole family off. Defaults: every family, for prose."""

    gopher: GopherQualityConfig | None = field(default_factory=GopherQualityConfig)
    """Gopher quality rules."""
    repetition: GopherRepetitionConfig | None = field(default_factory=GopherRepetitionConfig)
    """Gopher repetition rules."""
    c4: C4Config | None = field(default_factory=C4Config)
    """C4 line removals and page rules."""
    compression: CompressionConfig | None = field(default_factory=CompressionConfig)
    """Compression-ratio bounds."""

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError(
                f"QualityRules has no active rule ({self!r}); enable a family, e.g. QualityRules.for_code()"
            )

    @classmethod
    def for_code(cls) -> "QualityRules":
        """Word-count and compression rules only: the prose rules misfire on source code."""
        length_only = GopherQualityConfig(
            min_mean_word_length=None,
            max_mean_word_length=None,
            max_symbol_word_ratio=None,
            max_bullet_lines_fraction=None,
            max_ellipsis_lines_fraction=None,
            min_alpha_words_fraction=None,
            min_stop_words=None,
        )
        return cls(gopher=length_only, repetition=None, c4=None, compression=CompressionConfig())

    @property
    def rules(self) -> tuple[str, ...]:
        """Names of every active rule, family by family."""
        return tuple(
            rule
            for family in (self.gopher, self.repetition, self.c4, self.compression)
            if family is not None
            for rule in family.rules
        )

    @property
    def signals(self) -> dict[str, pa.DataType]:
        """Signal columns of the enabled families and their types."""
        out: dict[str, pa.DataType] = {}
        out |= GOPHER_SIGNALS if self.gopher is not None else {}
        out |= self.repetition.signals if self.repetition is not None else {}
        out |= C4_SIGNALS if self.c4 is not None else {}
        out |= {"compression_ratio": pa.float64()} if self.compression is not None else {}
        return out


RULE_SETS: dict[str, Callable[[], QualityRules]] = {"prose": QualityRules, "code": QualityRules.for_code}
"""Named rule sets: every family (prose), or word count and compression only (code)."""


def evaluate(text: str, rules: QualityRules) -> DocQuality:
    """Run every enabled family on `text`."""
    signals: dict[str, Any] = {}
    passed: dict[str, bool] = {}
    lines_removed: Counter[str] = Counter()
    families = (
        (rules.gopher, gopher_quality),
        (rules.repetition, gopher_repetition),
        (rules.c4, c4_lines),
        (rules.compression, compression_ratio),
    )
    for family, run in families:
        if family is not None:
            family_signals, family_passed, *removed = run(text, family)  # c4_lines also gives the removed lines
            signals |= family_signals
            passed |= family_passed
            lines_removed.update(*removed)
    return DocQuality(signals, passed, lines_removed)


@dataclass(frozen=True)
class QualityConfig:
    """Which documents to score and with which rules."""

    input: str
    """A document directory (Parquet shards with `id` and `text`)."""
    rules: QualityRules = field(default_factory=QualityRules)
    """Rule families and thresholds; `QualityRules.for_code()` for source code."""
    batch_rows: int = unhashed(1024)
    """Rows read from a shard at a time."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Parallelism, retries and failure budget (not hashed)."""

    def __post_init__(self) -> None:
        if self.batch_rows < 1:
            raise ValueError(f"QualityConfig.batch_rows must be >= 1, got {self.batch_rows!r}")


def attribute_schema(rules: QualityRules) -> pa.Schema:
    """Columns of a quality attribute shard: id, signals, `<rule>_pass` per rule, `quality_pass`."""
    fields = [pa.field("id", pa.string())]
    fields += [pa.field(name, kind) for name, kind in rules.signals.items()]
    fields += [pa.field(f"{rule}_pass", pa.bool_()) for rule in rules.rules]
    return pa.schema([*fields, pa.field("quality_pass", pa.bool_())])


def annotate_quality(batches: Iterator[pa.RecordBatch], config: QualityConfig) -> tuple[pa.Table, dict[str, Any]]:
    """Score one shard's documents: the attribute table and its counts (rejections per rule, C4 lines removed)."""
    rules = config.rules
    schema = attribute_schema(rules)
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    rejected = Counter(dict.fromkeys(rules.rules, 0))
    lines_removed: Counter[str] = Counter()
    stage = StageStats()
    for doc_id, text in documents(batches):
        result = evaluate(text, rules)
        columns["id"].append(doc_id)
        for name, value in result.signals.items():
            columns[name].append(value)
        for rule, ok in result.passed.items():
            columns[f"{rule}_pass"].append(ok)
            rejected[rule] += not ok
        columns["quality_pass"].append(all(result.passed.values()))
        lines_removed.update(result.lines_removed)
        first_failed = next((rule for rule in rules.rules if not result.passed[rule]), None)
        if first_failed is None:
            stage.keep()
        else:
            stage.drop(first_failed)
    counts = {
        "rejected": dict(rejected),
        "c4_lines_removed": dict(lines_removed),
        "c4_chars_removed": sum(columns.get("c4_chars_removed", [])),
        **stage.to_json(),
    }
    return pa.table(columns, schema=schema), counts


def quality(config: QualityConfig, output_path: str) -> dict[str, Any]:
    """Write co-partitioned quality attributes for `config.input` plus `stats.json`; return the stats."""

    def details(counts: dict[str, Any]) -> dict[str, Any]:
        rejected = counts.get("rejected", {})
        return {
            "rejected": {rule: rejected.get(rule, 0) for rule in config.rules.rules},
            "c4_lines_removed": dict(sorted(counts.get("c4_lines_removed", {}).items())),
            "c4_chars_removed": counts.get("c4_chars_removed", 0),
            "rules": list(config.rules.rules),
        }

    return run_attribute_stage(config, output_path, name="quality", annotate=annotate_quality, details=details)


def quality_filters(attributes: str, *, rules: QualityRules | None = None) -> tuple[AttributeFilter, ...]:
    """Consolidate filters applying a quality stage's verdicts: drop documents failing `quality_pass`, and cut the
    C4-removed lines when `rules` (default `QualityRules()`, the stage's rules) ran the C4 family."""
    rules = QualityRules() if rules is None else rules
    verdict = AttributeFilter("quality", attributes, "quality_pass", drop_value=False)
    if rules.c4 is None:
        return (verdict,)
    return verdict, AttributeFilter("c4_lines", attributes, "c4_removed_spans", remove_spans=True)
