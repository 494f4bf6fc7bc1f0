"""The dedup stage marks exact, paragraph and fuzzy duplicates in co-partitioned attribute shards, resumably."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tootsie.datakit import dedup as dedup_module
from tootsie.datakit.dedup import (
    ATTRIBUTE_SCHEMA,
    WORK_DIR,
    DedupConfig,
    dedup,
    dedup_filters,
    first_occurrence,
    paragraph_spans,
)
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.ids import content_id
from tootsie.datakit.stats import STATS_FILE

ENGINE = EngineConfig(workers=1, progress=False)
VOCAB = np.array([f"w{i}" for i in range(20_000)])


def _text(seed: int, n: int = 250) -> str:
    return " ".join(VOCAB[np.random.default_rng(seed).integers(0, len(VOCAB), n)])


def _edit(text: str, positions: tuple[int, ...], word: str = "edited") -> str:
    tokens = text.split()
    for p in positions:
        tokens[p] = word
    return " ".join(tokens)


def _write_docs(directory: Path, shards: list[list[str]]) -> str:
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
    return str(directory)


def _rows(out: Path) -> list[dict]:
    return [row for path in sorted(out.glob("part-*.parquet")) for row in pq.read_table(path).to_pylist()]


def _file_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


PARAGRAPH = "A paragraph that both documents share, word for word."
A, B, C = _text(1), _text(2), _text(3)
B_NEAR = _edit(B, (40, 150))
B_NEARER = _edit(B_NEAR, (90,), "again")
SHARDS = [
    [A, B, f"Intro one.\n\n{PARAGRAPH}\n\nOutro."],
    [C, A, B_NEAR, f"Intro two.\n \n  {PARAGRAPH}  \n\n\n{PARAGRAPH}\n"],
    [B_NEARER, A],
]


@pytest.fixture
def corpus(tmp_path: Path) -> str:
    return _write_docs(tmp_path / "docs", SHARDS)


def test_paragraph_spans_split_on_blank_lines_and_trim_whitespace() -> None:
    text = "  first line\nsame paragraph \n\n\t\n second\n \n\nthird"
    assert [text[s:e] for s, e in paragraph_spans(text)] == ["first line\nsame paragraph", "second", "third"]
    assert paragraph_spans("") == [] and paragraph_spans("\n\n  \n") == []


def test_first_occurrence_points_at_the_earliest_equal_key() -> None:
    hi = np.array([5, 1, 5, 5, 1], dtype=np.uint64)
    lo = np.array([0, 2, 0, 1, 2], dtype=np.uint64)
    np.testing.assert_array_equal(first_occurrence(hi, lo), [0, 1, 0, 3, 1])


def test_marks_exact_fuzzy_and_paragraph_duplicates(corpus: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stats = dedup(DedupConfig(input=corpus, engine=ENGINE), str(out))
    rows = _rows(out)
    texts = [t for shard in SHARDS for t in shard]
    assert [r["exact_duplicate"] for r in rows] == [False, False, False, False, True, False, False, False, True]
    assert [r["fuzzy_duplicate"] for r in rows] == [False, False, False, False, False, True, False, True, False]
    # B (ordinal 1), B_NEAR and B_NEARER (transitively) share B's cluster; the copies of A have none.
    assert [r["fuzzy_cluster"] for r in rows] == [-1, 1, -1, -1, -1, 1, -1, 1, -1]
    assert rows[2]["duplicate_paragraph_spans"] == []
    second = texts[6]
    spans = rows[6]["duplicate_paragraph_spans"]
    assert [second[s:e] for s, e in spans] == [PARAGRAPH, PARAGRAPH]
    assert rows[6]["duplicate_paragraph_fraction"] == pytest.approx(2 * len(PARAGRAPH) / len(second))
    assert rows[4]["duplicate_paragraph_fraction"] == 1.0  # an exact copy repeats its only paragraph
    assert json.loads((out / STATS_FILE).read_text()) == stats
    assert (
        stats["docs"] == 9
        and stats["exact_duplicates"] == 2
        and stats["fuzzy_duplicates"] == 2
        and stats["fuzzy_clusters"] == 1
    )
    assert (stats["total"], stats["kept"], stats["dropped"]) == (9, 5, {"exact_duplicate": 2, "fuzzy_duplicate": 2})
    assert stats["duplicate_paragraphs"] == 4 and stats["failed_shards"] == {}
    assert not (out / WORK_DIR).exists()


def test_attribute_shards_are_co_partitioned_with_the_documents(corpus: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    dedup(DedupConfig(input=corpus, engine=ENGINE), str(out))
    for doc_path in sorted(Path(corpus).glob("part-*.parquet")):
        attributes = pq.read_table(out / doc_path.name)
        assert attributes.schema == ATTRIBUTE_SCHEMA
        assert attributes.column("id").to_pylist() == pq.read_table(doc_path).column("id").to_pylist()


def test_switches_leave_the_columns_in_place(corpus: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stats = dedup(DedupConfig(input=corpus, fuzzy=False, paragraphs=False, engine=ENGINE), str(out))
    rows = _rows(out)
    assert {r["fuzzy_cluster"] for r in rows} == {-1} and not any(r["fuzzy_duplicate"] for r in rows)
    assert all(r["duplicate_paragraph_spans"] == [] and r["duplicate_paragraph_fraction"] == 0.0 for r in rows)
    assert stats["exact_duplicates"] == 2 and stats["fuzzy_duplicates"] == 0


def test_rerun_skips_finished_work_and_rewrites_nothing(
    corpus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    first = dedup(DedupConfig(input=corpus, engine=ENGINE), str(out))
    before = _file_bytes(out)

    def no_work(*args: object) -> None:
        raise AssertionError("a finished shard was processed again")

    monkeypatch.setattr(dedup_module, "dedup_shard", no_work)
    assert dedup(DedupConfig(input=corpus, engine=ENGINE), str(out)) == first
    assert _file_bytes(out) == before


def test_a_run_killed_after_the_map_resumes_to_identical_bytes(
    corpus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean = tmp_path / "clean"
    dedup(DedupConfig(input=corpus, engine=ENGINE), str(clean))
    killed = tmp_path / "killed"
    real_write = dedup_module._write_attributes

    def crash(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(dedup_module, "_write_attributes", crash)
    with pytest.raises(KeyboardInterrupt):
        dedup(DedupConfig(input=corpus, engine=ENGINE), str(killed))
    assert len(list((killed / WORK_DIR / "done").glob("*.json"))) == len(SHARDS)

    def no_work(*args: object) -> None:
        raise AssertionError("a finished shard was processed again")

    monkeypatch.setattr(dedup_module, "_write_attributes", real_write)
    monkeypatch.setattr(dedup_module, "dedup_shard", no_work)
    dedup(DedupConfig(input=corpus, engine=ENGINE), str(killed))
    assert _file_bytes(killed) == _file_bytes(clean)


def test_worker_processes_give_the_same_bytes(corpus: str, tmp_path: Path) -> None:
    dedup(DedupConfig(input=corpus, engine=ENGINE), str(tmp_path / "inline"))
    dedup(DedupConfig(input=corpus, engine=EngineConfig(workers=2, progress=False)), str(tmp_path / "pool"))
    assert _file_bytes(tmp_path / "inline") == _file_bytes(tmp_path / "pool")


def test_a_failed_shard_within_budget_is_reported_and_the_rest_is_written(tmp_path: Path) -> None:
    corpus = _write_docs(tmp_path / "docs", [[A, B], [A]])
    (Path(corpus) / "part-00002.parquet").write_bytes(b"not parquet")
    out = tmp_path / "out"
    stats = dedup(
        DedupConfig(input=corpus, engine=EngineConfig(workers=1, retries=0, max_failed_shards=1, progress=False)),
        str(out),
    )
    assert list(stats["failed_shards"]) == ["part-00002"] and stats["exact_duplicates"] == 1
    assert sorted(p.name for p in out.glob("part-*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    assert (out / WORK_DIR).exists()  # kept so that a rerun redoes only the failed shard


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_threshold_outside_zero_one_is_rejected(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        DedupConfig(input="docs", threshold=threshold)


def test_dedup_filters_name_the_columns_each_choice_applies() -> None:
    assert [f.column for f in dedup_filters("d", fuzzy=False)] == ["exact_duplicate"]
    assert [f.column for f in dedup_filters("d")] == ["exact_duplicate", "fuzzy_duplicate"]
    spans = dedup_filters("d", fuzzy=False, remove_paragraphs=True)[-1]
    assert spans.column == "duplicate_paragraph_spans" and spans.remove_spans and spans.attributes == "d"
