"""Language identification as an attribute: `lang` (ISO 639-1) and `lang_score` for every document.

For each document shard `part-NNNNN.parquet` of `config.input`, the stage
writes `<output>/part-NNNNN.parquet` with the same rows in the same order:
`id`, `lang` (a two-letter code, or "unknown" for text with no letters) and
`lang_score` (the model's confidence in that language, 0..1, rounded to
`SCORE_DECIMALS` places; 0 for "unknown"). Consolidate keeps given languages
above a score with `langid_filters`.

The model is lingua (`lingua-language-detector`, Apache-2.0, maintained, 75
languages): its n-gram models are compiled into the wheel, so nothing is
downloaded and nothing is unpickled at run time, and its confidence values are
probabilities over the languages (they sum to 1), which a `min_score` can
threshold. It runs in low-accuracy mode (trigrams only; about 2.5 ms for a
2 KB text on one core here, 75 MB resident). On the multilingual test set
(`tests/datakit/test_langid.py`: 320 documents, 8 languages) lingua is right on
316; resiliparse's `detect_fast`, which returns an out-of-place rank rather
than a probability, on 252 (it reads Hindi as Nepali, Marathi or Sanskrit).
`langid.py` and `py3langid` ship their models as pickles; fastText's lid.176
must be downloaded.

lingua's confidences differ in their last bits from one call to the next on
the same text (by up to 3.3e-16 over 80 license texts and docstrings here),
so `lang_score` is rounded to 6 decimals and the attribute shards are the same
bytes on every run (a value would have to sit within about 1e-16 of a
rounding edge to flip).

lingua comes with the `web` extra; langid checks it before it starts, and as
a step declares `web`, so a missing one fails in one line before anything runs.

`stats.json`: `{"docs", "languages": {code: docs}, "shards", "failed_shards"}`
and the shared `total` / `kept` / `dropped`, where a document of "unknown"
language counts as dropped (`unknown_language`).

Example: a shard with "Das ist ein deutscher Satz." and "1234" gives rows
`("de", 0.99...)` and `("unknown", 0.0)`; `languages` is `{"de": 1, "unknown": 1}`.
"""

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tootsie.configfile import unhashed
from tootsie.datakit.attribute_stage import documents, run_attribute_stage
from tootsie.datakit.consolidate import AttributeFilter
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.stats import StageStats
from tootsie.executor.step import requires_extras
from tootsie.extras import import_extra, require_modules

ATTRIBUTE_SCHEMA = pa.schema([("id", pa.string()), ("lang", pa.string()), ("lang_score", pa.float64())])
UNKNOWN = "unknown"
SCORE_DECIMALS = 6
"""Decimals kept of lingua's confidence: its last bits vary from call to call, these never do in practice."""
PURPOSE = "language ID (datakit langid)"


@dataclass(frozen=True)
class LangidConfig:
    """Which documents to label, and how much of each the model reads."""

    input: str
    """A document directory (Parquet shards with `id` and `text`)."""
    max_chars: int = 10_000
    """Only the first this many characters of a document are read (the model's time grows with length)."""
    batch_rows: int = unhashed(1024)
    """Rows read from a shard at a time."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Parallelism, retries and failure budget (not hashed)."""

    def __post_init__(self) -> None:
        for name in ("max_chars", "batch_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"LangidConfig.{name} must be >= 1, got {getattr(self, name)!r}")


class LanguageModel:
    """lingua's detector over all its languages, in low-accuracy mode; `identify(text)` gives (code, score)."""

    def __init__(self) -> None:
        lingua = import_extra("lingua", extra="web", purpose=PURPOSE)
        self._detector = lingua.LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode().build()

    def identify(self, text: str) -> tuple[str, float]:
        """The likeliest language's ISO 639-1 code and its (rounded) confidence; ("unknown", 0.0) for text with no
        letters."""
        values = self._detector.compute_language_confidence_values(text)
        if not values or values[0].value <= 0.0:
            return UNKNOWN, 0.0
        return values[0].language.iso_code_639_1.name.lower(), round(float(values[0].value), SCORE_DECIMALS)


def annotate_languages(batches: Iterator[pa.RecordBatch], config: LangidConfig) -> tuple[pa.Table, dict[str, Any]]:
    """Label one shard's documents: the attribute table and its counts (languages; "unknown" counts as dropped)."""
    model = LanguageModel()
    columns: dict[str, list[Any]] = {"id": [], "lang": [], "lang_score": []}
    languages: Counter[str] = Counter()
    stage = StageStats()
    for doc_id, text in documents(batches):
        lang, score = model.identify(text[: config.max_chars])
        columns["id"].append(doc_id)
        columns["lang"].append(lang)
        columns["lang_score"].append(score)
        languages[lang] += 1
        if lang == UNKNOWN:
            stage.drop("unknown_language")
        else:
            stage.keep()
    return pa.table(columns, schema=ATTRIBUTE_SCHEMA), {"languages": dict(languages), **stage.to_json()}


def require_model(*, purpose: str) -> None:
    """Raise MissingExtra (naming the `web` extra) when lingua is not installed."""
    require_modules(("lingua",), extra="web", purpose=purpose)


@requires_extras("web")
def langid(config: LangidConfig, output_path: str) -> dict[str, Any]:
    """Write co-partitioned language attributes for `config.input` plus `stats.json`; return the stats."""
    require_model(purpose=PURPOSE)
    return run_attribute_stage(config, output_path, name="langid", annotate=annotate_languages, details=_details)


def _details(counts: dict[str, Any]) -> dict[str, Any]:
    languages = counts.get("languages", {})
    return {"languages": dict(sorted(languages.items(), key=lambda item: (-item[1], item[0])))}


def langid_filters(attributes: str, languages: tuple[str, ...], min_score: float = 0.0) -> tuple[AttributeFilter, ...]:
    """Consolidate filters keeping documents in `languages` (ISO 639-1 codes) whose `lang_score` is >= `min_score`."""
    keep = AttributeFilter("langid", attributes, "lang", keep_values=tuple(languages))
    if min_score <= 0.0:
        return (keep,)
    return keep, AttributeFilter("lang_score", attributes, "lang_score", drop_below=min_score)
