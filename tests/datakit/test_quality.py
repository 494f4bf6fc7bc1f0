"""Every quality rule fails its target text and passes clean prose; the stage writes co-partitioned attributes."""

import base64
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tootsie.datakit.consolidate import AttributeFilter
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.ids import content_id
from tootsie.datakit.quality import (
    RULE_SETS,
    QualityConfig,
    QualityRules,
    attribute_schema,
    evaluate,
    quality,
    quality_filters,
)
from tootsie.datakit.quality_rules import (
    C4Config,
    CompressionConfig,
    GopherQualityConfig,
    GopherRepetitionConfig,
    c4_lines,
    compression_ratio,
    gopher_quality,
    gopher_repetition,
    ngram_char_fractions,
)
from tootsie.datakit.stats import STATS_FILE

PROSE = (
    "The river rose slowly through the night, and by morning the low fields near the village were under water. "
    "Farmers moved their cattle to the hills before the roads closed. Children watched from the church steps as "
    "boats replaced carts in the main street. The mayor said that help would arrive with the afternoon train. "
    "Nobody had seen a flood of this size since the winter of 1952. Engineers will inspect the old bridge once "
    "the current weakens. Until then, families have been asked to stay with relatives on higher ground."
)
ENGINE = EngineConfig(workers=1, retries=0, progress=False)


def _failed(text: str, rules: QualityRules | None = None) -> set[str]:
    return {rule for rule, ok in evaluate(text, rules or QualityRules()).passed.items() if not ok}


def test_clean_prose_passes_every_rule() -> None:
    assert _failed(PROSE) == set()


def test_gopher_word_count_and_mean_length() -> None:
    assert "gopher_word_count" in _failed("A short note with a few words in it.")
    signals, passed = gopher_quality("supercalifragilistic " * 60, GopherQualityConfig())
    assert signals["gopher_mean_word_length"] == 20 and not passed["gopher_mean_word_length"]


def test_gopher_symbols_bullets_and_ellipsis_lines() -> None:
    hashes = PROSE + " #tag" * 20
    assert _failed(hashes) >= {"gopher_symbol_word_ratio"}
    bullets = "\n".join(f"• item number {i} in the list of things to bring" for i in range(20))
    signals, passed = gopher_quality(bullets, GopherQualityConfig())
    assert signals["gopher_bullet_lines_fraction"] == 1.0 and not passed["gopher_bullet_lines"]
    trailing = "\n".join(f"and then the story went on and on {i}..." for i in range(10))
    signals, passed = gopher_quality(trailing, GopherQualityConfig())
    assert signals["gopher_ellipsis_lines_fraction"] == 1.0 and not passed["gopher_ellipsis_lines"]
    assert not passed["gopher_symbol_word_ratio"]


def test_gopher_alpha_words_and_stop_words() -> None:
    numbers = " ".join(str(i) for i in range(100)) + " the cat and the dog"
    _, passed = gopher_quality(numbers, GopherQualityConfig())
    assert not passed["gopher_alpha_words"]
    no_stop = " ".join(["apple banana cherry orange"] * 20)
    signals, passed = gopher_quality(no_stop, GopherQualityConfig())
    assert signals["gopher_stop_words"] == 0 and not passed["gopher_stop_words"]
    signals, passed = gopher_quality(no_stop + " The end with", GopherQualityConfig())
    assert signals["gopher_stop_words"] == 2 and passed["gopher_stop_words"]  # case-insensitive count


def test_repeated_lines_and_paragraphs_fail_duplication_rules() -> None:
    lines = "\n".join(["Click here to subscribe to our newsletter today."] * 20)
    signals, passed = gopher_repetition(lines, GopherRepetitionConfig())
    assert signals["rep_dup_line_fraction"] == pytest.approx(19 / 20)
    assert not passed["rep_dup_line_fraction"] and not passed["rep_dup_line_char_fraction"]
    paragraphs = "\n\n".join([PROSE, "A different paragraph follows here.", PROSE, PROSE])
    signals, passed = gopher_repetition(paragraphs, GopherRepetitionConfig())
    assert signals["rep_dup_paragraph_fraction"] == 0.5 and not passed["rep_dup_paragraph_fraction"]
    assert not passed["rep_dup_paragraph_char_fraction"]


def test_ngram_fractions_on_known_texts() -> None:
    words = "a b a b a b c d".split()
    fractions = ngram_char_fractions(words, (2,), (5,))
    assert fractions["rep_top_2gram_char_fraction"] == pytest.approx(3 * 2 / 8)  # "a b" three times, 2 chars each
    assert fractions["rep_dup_5gram_char_fraction"] == 0.0  # no 5-gram occurs twice
    repeated = "one two three four five six".split() * 2
    fractions = ngram_char_fractions(repeated, (2,), (5,))
    assert fractions["rep_dup_5gram_char_fraction"] == 1.0  # every word lies in a repeated 5-gram
    assert ngram_char_fractions(["solo"], (2,), (5,)) == {
        "rep_top_2gram_char_fraction": 0.0,
        "rep_dup_5gram_char_fraction": 0.0,
    }
    spam = PROSE + " " + " ".join(["buy cheap pills now"] * 25)
    assert {"rep_top_2gram_char_fraction", "rep_dup_5gram_char_fraction"} <= _failed(spam)


def test_c4_removes_lines_as_exact_spans() -> None:
    bad = ["Menu", "Please enable JavaScript to view this site.", "Read our privacy policy for details.", "ok!"]
    text = PROSE + "\n" + "\n".join(bad) + "\n" + PROSE
    signals, passed, reasons = c4_lines(text, C4Config())
    start = len(PROSE) + 1
    assert signals["c4_removed_spans"] == [[start, start + sum(len(line) + 1 for line in bad)]]
    assert reasons == {"no_terminal_punctuation": 1, "javascript": 1, "policy": 1, "too_few_words": 1}
    assert passed == {"c4_lorem_ipsum": True, "c4_curly_bracket": True, "c4_min_sentences": True}


def test_c4_page_rules_and_citations() -> None:
    assert "c4_lorem_ipsum" in _failed(PROSE + "\nLorem ipsum dolor sit amet, consectetur.")
    assert "c4_curly_bracket" in _failed(PROSE + "\nThe set {1, 2} has two members.")
    no_curly = QualityRules(c4=C4Config(drop_curly_bracket=False))
    assert "c4_curly_bracket_pass" not in attribute_schema(no_curly).names
    assert "c4_min_sentences" in _failed("One sentence only, with some words in it.")
    signals, _, _ = c4_lines("It was built in 1890.[3] It fell in 1920[citation needed].", C4Config())
    assert signals["c4_removed_spans"] == [[21, 24], [40, 57]]


def test_compression_ratio_separates_random_from_repeated() -> None:
    config = CompressionConfig()
    random_text = base64.b64encode(random.Random(0).randbytes(6000)).decode()
    repeated = PROSE * 40
    assert compression_ratio(random_text, config)[0]["compression_ratio"] > 0.72
    assert compression_ratio(repeated, config)[0]["compression_ratio"] < 0.1
    assert not compression_ratio(random_text, config)[1]["compression_ratio"]
    assert not compression_ratio(repeated, config)[1]["compression_ratio"]
    assert compression_ratio(PROSE, config)[1]["compression_ratio"]
    assert compression_ratio("x" * 100, config)[1]["compression_ratio"]  # under min_bytes: not judged
    zstd = CompressionConfig(codec="zstd", level=3)
    assert compression_ratio(repeated, zstd)[0]["compression_ratio"] < 0.1


def test_code_rules_keep_python_source() -> None:
    code = "\n".join(
        f"def handler_{i}(request):\n    return {{'status': {i}, 'body': request.body}}\n" for i in range(30)
    )
    assert {"c4_min_sentences", "gopher_stop_words"} <= _failed(code)  # lines ending in ":" or "}" are all cut
    assert _failed(code, QualityRules.for_code()) == set()
    assert QualityRules.for_code().rules == ("gopher_word_count", "compression_ratio")


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: GopherQualityConfig(min_words=200, max_words=100), "min_words=200 exceeds max_words=100"),
        (lambda: GopherQualityConfig(min_alpha_words_fraction=1.5), "min_alpha_words_fraction must be a fraction"),
        (lambda: GopherRepetitionConfig(max_dup_ngram_char_fraction=((5, 0.1), (5, 0.2))), "distinct"),
        (lambda: C4Config(min_sentences=0), "min_sentences must be >= 1 or None"),
        (lambda: CompressionConfig(codec="lzma"), "codec must be 'zlib' or 'zstd'"),
        (lambda: CompressionConfig(min_ratio=0.8, max_ratio=0.5), "must be below max_ratio"),
        (lambda: QualityRules(gopher=None, repetition=None, c4=None, compression=None), "no active rule"),
    ],
)
def test_configs_reject_bad_values_with_the_field_name(build, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()


def _write_docs(directory, shards: list[list[str]]) -> None:
    directory.mkdir(parents=True)
    for index, texts in enumerate(shards):
        table = pa.table(
            {
                "id": [content_id(t) for t in texts],
                "text": texts,
                "source_id": [f"s{index}-{i}" for i in range(len(texts))],
            }
        )
        pq.write_table(table, directory / f"part-{index:05d}.parquet")


@pytest.mark.parametrize("workers", [1, 2])
def test_stage_writes_co_partitioned_attributes_and_counts(tmp_path, workers: int) -> None:
    repeated = "\n".join(["Buy now and save big on every order today."] * 20)
    _write_docs(tmp_path / "docs", [[PROSE, repeated, "Too short."], [PROSE + " Also fine."]])
    engine = EngineConfig(workers=workers, retries=0, progress=False)
    stats = quality(QualityConfig(input=str(tmp_path / "docs"), engine=engine), str(tmp_path / "q"))
    first = pq.read_table(tmp_path / "q" / "part-00000.parquet")
    docs = pq.read_table(tmp_path / "docs" / "part-00000.parquet")
    assert first.column("id").to_pylist() == docs.column("id").to_pylist()
    assert first.column("quality_pass").to_pylist() == [True, False, False]
    assert first.column("rep_dup_line_fraction_pass").to_pylist() == [True, False, True]
    assert first.schema == attribute_schema(QualityRules())
    assert stats["docs"] == 4 and stats["kept"] == 2
    assert stats["rejected"]["rep_dup_line_fraction"] == 1 and stats["rejected"]["gopher_word_count"] == 1
    assert stats["c4_lines_removed"] == {"too_few_words": 1}
    # The repeated page fails 11 rules and the short one 3; each is dropped once, under its first rule.
    assert sum(stats["rejected"].values()) == 14
    assert (stats["total"], stats["dropped"]) == (4, {"rep_dup_line_fraction": 1, "gopher_word_count": 1})
    assert json.loads((tmp_path / "q" / STATS_FILE).read_text()) == stats
    assert not (tmp_path / "q" / ".quality").exists()


def test_stage_rerun_is_idempotent_and_empty_shards_keep_their_schema(tmp_path) -> None:
    _write_docs(tmp_path / "docs", [[PROSE], []])
    config = QualityConfig(input=str(tmp_path / "docs"), rules=QualityRules.for_code(), engine=ENGINE)
    first = quality(config, str(tmp_path / "q"))
    tables = [pq.read_table(p) for p in sorted((tmp_path / "q").glob("part-*.parquet"))]
    assert quality(config, str(tmp_path / "q")) == first
    assert [pq.read_table(p) for p in sorted((tmp_path / "q").glob("part-*.parquet"))] == tables
    assert tables[1].num_rows == 0 and tables[1].schema == attribute_schema(QualityRules.for_code())


def test_quality_filters_cut_c4_lines_only_when_the_c4_family_ran() -> None:
    verdict = AttributeFilter("quality", "q", "quality_pass", drop_value=False)
    assert quality_filters("q") == quality_filters("q", rules=RULE_SETS["prose"]())
    assert quality_filters("q")[0] == verdict and quality_filters("q")[1].column == "c4_removed_spans"
    assert quality_filters("q", rules=RULE_SETS["code"]()) == (verdict,)
