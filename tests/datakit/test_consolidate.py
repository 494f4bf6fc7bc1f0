"""Consolidate drops and cuts exactly what attributes say, counts it per filter, and refuses misaligned attributes."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tootsie.datakit.consolidate import AttributeFilter, ConsolidateConfig, consolidate, merge_spans, remove_spans
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.ids import content_id
from tootsie.datakit.quality import QualityConfig, quality, quality_filters
from tootsie.datakit.stats import STATS_FILE
from tootsie.errors import TootsieError

ENGINE = EngineConfig(workers=1, retries=0, progress=False)
SPANS = pa.list_(pa.list_(pa.int64()))
PROSE = (
    "The river rose slowly through the night, and by morning the low fields near the village were under water. "
    "Farmers moved their cattle to the hills before the roads closed. Children watched from the church steps as "
    "boats replaced carts in the main street. The mayor said that help would arrive with the afternoon train. "
    "Nobody had seen a flood of this size since the winter of 1952. Engineers will inspect the old bridge once "
    "the current weakens. Until then, families have been asked to stay with relatives on higher ground."
)
SHARDS = [
    ["alpha doc", "beta doc\nboilerplate line\n", "gamma doc", "delta doc"],
    ["epsilon doc", "zeta doc", "   cut me   "],
]


def test_merge_spans_sorts_and_merges_overlapping_and_touching() -> None:
    assert merge_spans([[8, 10], [0, 2], [1, 4], [4, 5], [20, 20]]) == [[0, 5], [8, 10], [20, 20]]
    assert merge_spans([[0, 10], [2, 3]]) == [[0, 10]]
    assert merge_spans([]) == []


def test_remove_spans_matches_a_character_mask() -> None:
    rng = random.Random(0)
    for _ in range(200):
        text = "".join(rng.choice("ab c\né") for _ in range(rng.randint(0, 40)))
        spans = [sorted([rng.randint(0, len(text)), rng.randint(0, len(text))]) for _ in range(rng.randint(0, 4))]
        cut = {i for start, end in spans for i in range(start, end)}
        assert remove_spans(text, merge_spans(spans)) == "".join(c for i, c in enumerate(text) if i not in cut)


def _write(directory, name: str, columns: dict, schema: pa.Schema | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=schema), directory / name)


def _corpus(tmp_path) -> None:
    """Documents plus dedup-like, decontamination-like and span attributes, co-partitioned."""
    for index, texts in enumerate(SHARDS):
        name = f"part-{index:05d}.parquet"
        ids = [content_id(t) for t in texts]
        _write(tmp_path / "docs", name, {"id": ids, "text": texts, "source_id": [f"src-{t[:3]}" for t in texts]})
        _write(tmp_path / "dedup", name, {"id": ids, "exact_duplicate": [t.startswith("gamma") for t in texts]})
        _write(
            tmp_path / "decon",
            name,
            {
                "id": ids,
                "max_overlap": [
                    0.9 if t.startswith("delta") else (None if t.startswith("zeta") else 0.1) for t in texts
                ],
            },
        )
        spans = [
            [[9, 26]] if t.startswith("beta") else [[3, 7], [6, 9]] if t.startswith("   cut") else [] for t in texts
        ]
        _write(
            tmp_path / "para",
            name,
            {"id": ids, "duplicate_paragraph_spans": spans},
            pa.schema([("id", pa.string()), ("duplicate_paragraph_spans", SPANS)]),
        )


def _filters(tmp_path) -> tuple[AttributeFilter, ...]:
    return (
        AttributeFilter("exact_dedup", str(tmp_path / "dedup"), "exact_duplicate", drop_value=True),
        AttributeFilter("decontamination", str(tmp_path / "decon"), "max_overlap", drop_above=0.5),
        AttributeFilter("paragraph_dedup", str(tmp_path / "para"), "duplicate_paragraph_spans", remove_spans=True),
    )


def test_consolidate_counts_each_filter_and_rewrites_changed_documents(tmp_path) -> None:
    _corpus(tmp_path)
    stats = consolidate(
        ConsolidateConfig(input=str(tmp_path / "docs"), attributes=_filters(tmp_path), engine=ENGINE),
        str(tmp_path / "out"),
    )
    assert stats["removed_by"] == {
        "exact_dedup": 1,
        "decontamination": 1,
        "paragraph_dedup": 0,
        "empty_after_span_removal": 1,
    }
    assert stats["chars_removed_by"] == {
        "exact_dedup": 9,
        "decontamination": 9,
        "paragraph_dedup": 17 + 6,
        "empty_after_span_removal": 6,
    }
    assert stats["input_docs"] - stats["output_docs"] == sum(stats["removed_by"].values())
    assert stats["input_chars"] - stats["output_chars"] == sum(stats["chars_removed_by"].values())
    assert (stats["total"], stats["kept"], stats["dropped"]) == (
        stats["input_docs"],
        stats["output_docs"],
        stats["removed_by"],
    )
    first = pq.read_table(tmp_path / "out" / "part-00000.parquet").to_pylist()
    assert [row["text"] for row in first] == ["alpha doc", "beta doc\n"]
    beta = first[1]
    assert (
        beta["id"] == content_id("beta doc\n")
        and beta["parent_id"] == content_id(SHARDS[0][1])
        and beta["source_id"] == "src-bet"
    )
    assert first[0]["id"] == first[0]["parent_id"] == content_id("alpha doc")
    second = pq.read_table(tmp_path / "out" / "part-00001.parquet")
    assert second.column("text").to_pylist() == ["epsilon doc", "zeta doc"]  # a null max_overlap keeps the doc
    assert json.loads((tmp_path / "out" / STATS_FILE).read_text()) == stats
    assert not (tmp_path / "out" / ".consolidate").exists()


def test_a_document_dropped_by_two_filters_counts_under_the_first(tmp_path) -> None:
    _corpus(tmp_path)
    both = AttributeFilter("again", str(tmp_path / "dedup"), "exact_duplicate", drop_value=True)
    config = ConsolidateConfig(input=str(tmp_path / "docs"), attributes=(*_filters(tmp_path)[:1], both), engine=ENGINE)
    assert consolidate(config, str(tmp_path / "out"))["removed_by"] == {
        "exact_dedup": 1,
        "again": 0,
        "empty_after_span_removal": 0,
    }


def test_rerun_is_idempotent(tmp_path) -> None:
    _corpus(tmp_path)
    config = ConsolidateConfig(input=str(tmp_path / "docs"), attributes=_filters(tmp_path), engine=ENGINE)
    first = consolidate(config, str(tmp_path / "out"))
    tables = [pq.read_table(p) for p in sorted((tmp_path / "out").glob("part-*.parquet"))]
    assert consolidate(config, str(tmp_path / "out")) == first
    assert [pq.read_table(p) for p in sorted((tmp_path / "out").glob("part-*.parquet"))] == tables


def test_quality_attributes_drive_consolidation(tmp_path) -> None:
    texts = [PROSE.replace(" Nobody", "\nSubscribe\nNobody"), "\n".join(["Same line repeated here."] * 30)]
    _write(
        tmp_path / "docs",
        "part-00000.parquet",
        {"id": [content_id(t) for t in texts], "text": texts, "source_id": ["a", "b"]},
    )
    quality(QualityConfig(input=str(tmp_path / "docs"), engine=ENGINE), str(tmp_path / "q"))
    filters = quality_filters(str(tmp_path / "q"))
    assert filters == (
        AttributeFilter("quality", str(tmp_path / "q"), "quality_pass", drop_value=False),
        AttributeFilter("c4_lines", str(tmp_path / "q"), "c4_removed_spans", remove_spans=True),
    )
    stats = consolidate(
        ConsolidateConfig(input=str(tmp_path / "docs"), attributes=filters, engine=ENGINE), str(tmp_path / "out")
    )
    assert stats["removed_by"]["quality"] == 1 and stats["chars_removed_by"]["c4_lines"] == len("Subscribe\n")
    assert pq.read_table(tmp_path / "out" / "part-00000.parquet").column("text").to_pylist() == [
        PROSE.replace(" Nobody", "\nNobody")
    ]


def test_misaligned_attributes_name_both_files(tmp_path) -> None:
    _corpus(tmp_path)
    table = pq.read_table(tmp_path / "dedup" / "part-00001.parquet")
    pq.write_table(table.take([1, 0, 2]), tmp_path / "dedup" / "part-00001.parquet")
    config = ConsolidateConfig(input=str(tmp_path / "docs"), attributes=_filters(tmp_path), engine=ENGINE)
    with pytest.raises(
        TootsieError,
        match=r"dedup/part-00001.parquet is not co-partitioned with document shard .*docs/part-00001.parquet: row 0",
    ):
        consolidate(config, str(tmp_path / "out"))
    pq.write_table(table.slice(0, 2), tmp_path / "dedup" / "part-00001.parquet")
    with pytest.raises(
        TootsieError, match=r"dedup/part-00001.parquet has 2 rows but document shard .*docs/part-00001.parquet has 3"
    ):
        consolidate(config, str(tmp_path / "out2"))


def test_missing_shard_wrong_type_and_bad_spans_are_clear_errors(tmp_path) -> None:
    _corpus(tmp_path)
    docs = str(tmp_path / "docs")
    (tmp_path / "decon" / "part-00001.parquet").unlink()
    with pytest.raises(TootsieError, match="attribute shard .*decon/part-00001.parquet is missing"):
        consolidate(ConsolidateConfig(input=docs, attributes=_filters(tmp_path), engine=ENGINE), str(tmp_path / "a"))
    wrong = AttributeFilter("oops", str(tmp_path / "dedup"), "exact_duplicate", drop_above=0.5)
    with pytest.raises(TootsieError, match="exact_duplicate.* is bool, but this filter needs a number"):
        consolidate(ConsolidateConfig(input=docs, attributes=(wrong,), engine=ENGINE), str(tmp_path / "b"))
    ids = [content_id(t) for t in SHARDS[0]]
    _write(
        tmp_path / "para",
        "part-00000.parquet",
        {"id": ids, "duplicate_paragraph_spans": [[[0, 99]], [], [], []]},
        pa.schema([("id", pa.string()), ("duplicate_paragraph_spans", SPANS)]),
    )
    with pytest.raises(TootsieError, match=r"span \[0, 99\] is not \[start, end\)"):
        consolidate(
            ConsolidateConfig(input=docs, attributes=_filters(tmp_path)[2:], engine=ENGINE), str(tmp_path / "c")
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"drop_value": True, "remove_spans": True}, "exactly one of"),
        ({}, "exactly one of"),
        ({"drop_value": True, "name": "empty_after_span_removal"}, "reserved"),
    ],
)
def test_filters_need_exactly_one_mode(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AttributeFilter(**({"name": "f", "attributes": "a", "column": "c"} | kwargs))


def test_filter_names_must_be_unique() -> None:
    twice = AttributeFilter("f", "a", "c", drop_value=True)
    with pytest.raises(ValueError, match="unique"):
        ConsolidateConfig(input="docs", attributes=(twice, twice))
