"""Language ID is right on a multilingual set of real translated text, and consolidate keeps chosen languages.

The set comes from packages the test environment installs: lm-eval (the `all`
extra) ships Meta's translated MMLU few-shot questions for Llama 3 in German,
Spanish, French, Hindi, Italian, Portuguese and Thai
(`lm_eval/tasks/llama3/instruct/mmlu_<lang>/*.yaml`); English is the running
Python's own reference-manual prose (`pydoc_data.topics`). A document is one
question with its four answer choices (a few hundred characters: harder than a
web page).
"""

from dataclasses import replace
from pathlib import Path

import lm_eval
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.datakit.web_site import known_paragraphs
from tootsie.datakit.consolidate import ConsolidateConfig, consolidate
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.ids import content_id
from tootsie.datakit.langid import LangidConfig, LanguageModel, langid, langid_filters
from tootsie.datakit.normalize import DOCUMENT_SCHEMA
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.errors import TootsieError

TRANSLATED = ("de", "es", "fr", "hi", "it", "pt", "th")
PER_LANGUAGE = 40
INLINE = EngineConfig(workers=1, progress=False)


class _TaskLoader(yaml.SafeLoader):
    """lm-eval's task YAML with its `!function` tags read as plain strings."""


_TaskLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def translated_questions(lang: str, limit: int) -> list[str]:
    """Up to `limit` distinct few-shot questions (with their choices) of lm-eval's Llama 3 MMLU in `lang`."""
    root = Path(lm_eval.__file__).parent / "tasks" / "llama3" / "instruct" / f"mmlu_{lang}"
    found: dict[str, None] = {}
    for path in sorted(root.glob(f"mmlu_{lang}_*.yaml")):
        task = yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskLoader)
        for sample in task.get("fewshot_config", {}).get("samples", []):
            choices = "\n".join(str(choice) for choice in sample["input_choice_list"].values())
            found[f"{sample['input_question']}\n{choices}"] = None
    return list(found)[:limit]


def multilingual_set() -> list[tuple[str, str]]:
    """(language, text) pairs: PER_LANGUAGE documents for English and each translated language."""
    pairs = [("en", text) for text in known_paragraphs(PER_LANGUAGE)]
    for lang in TRANSLATED:
        questions = translated_questions(lang, PER_LANGUAGE)
        assert len(questions) == PER_LANGUAGE, f"lm-eval ships {len(questions)} {lang} questions"
        pairs += [(lang, text) for text in questions]
    return pairs


def _write_docs(directory: Path, texts: list[str]) -> None:
    half = len(texts) // 2
    for index, part in enumerate((texts[:half], texts[half:])):
        table = pa.table(
            {"id": [content_id(t) for t in part], "text": part, "source_id": [str(i) for i in range(len(part))]},
            schema=DOCUMENT_SCHEMA,
        )
        write_table_atomic(table, directory / f"part-{index:05d}.parquet")


def test_langid_right_on_multilingual_set_and_consolidate_keeps_languages(tmp_path) -> None:
    pairs = multilingual_set()
    _write_docs(tmp_path / "docs", [text for _, text in pairs])
    stats = langid(LangidConfig(input=str(tmp_path / "docs"), engine=INLINE), str(tmp_path / "lang"))
    labels = [
        row for part in sorted((tmp_path / "lang").glob("part-*.parquet")) for row in pq.read_table(part).to_pylist()
    ]
    right = sum(row["lang"] == lang for row, (lang, _) in zip(labels, pairs, strict=True))
    assert right / len(pairs) >= 0.95, f"{right} of {len(pairs)} right"
    for lang in ("en", *TRANSLATED):
        assert stats["languages"][lang] >= 0.9 * PER_LANGUAGE
    assert sum(stats["languages"].values()) == stats["docs"] == len(pairs)
    assert all(0.0 < row["lang_score"] <= 1.0 for row in labels)

    filters = langid_filters(str(tmp_path / "lang"), ("de", "fr"), min_score=0.5)
    kept = consolidate(
        ConsolidateConfig(input=str(tmp_path / "docs"), attributes=filters, engine=INLINE), str(tmp_path / "out")
    )
    expected = sum(row["lang"] in ("de", "fr") and row["lang_score"] >= 0.5 for row in labels)
    assert kept["output_docs"] == expected
    assert kept["removed_by"]["langid"] == sum(row["lang"] not in ("de", "fr") for row in labels)


def test_no_letters_is_unknown() -> None:
    model = LanguageModel()
    assert model.identify("1234 5678 !!") == ("unknown", 0.0)
    assert model.identify("") == ("unknown", 0.0)
    lang, score = model.identify("Der schnelle braune Fuchs springt über den faulen Hund, und alle sehen zu.")
    assert lang == "de" and score > 0.5


def test_keep_values_needs_a_string_column(tmp_path) -> None:
    _write_docs(tmp_path / "docs", ["Ein deutscher Satz über das Wetter.", "An English sentence about the weather."])
    langid(LangidConfig(input=str(tmp_path / "docs"), engine=INLINE), str(tmp_path / "lang"))
    (bad,) = langid_filters(str(tmp_path / "lang"), ("en",))
    with pytest.raises(TootsieError, match="needs a string"):
        consolidate(
            ConsolidateConfig(
                input=str(tmp_path / "docs"), attributes=(replace(bad, column="lang_score"),), engine=INLINE
            ),
            str(tmp_path / "out"),
        )


def test_attribute_shards_are_the_same_bytes_on_every_run(tmp_path) -> None:
    """lingua's confidences vary in their last bit from call to call; the rounded scores do not."""
    _write_docs(tmp_path / "docs", [text for _, text in multilingual_set()])
    config = LangidConfig(input=str(tmp_path / "docs"), engine=INLINE)
    for run in ("first", "second"):
        langid(config, str(tmp_path / run))
    for shard in ("part-00000.parquet", "part-00001.parquet"):
        assert (tmp_path / "first" / shard).read_bytes() == (tmp_path / "second" / shard).read_bytes()
