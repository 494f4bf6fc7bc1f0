"""The dedup stage marks exact, paragraph and fuzzy duplicates in co-partitioned attribute shards, resumably."""

import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.datakit import dedup as dedup_module
from tootsie.datakit.consolidate import ConsolidateConfig, consolidate
from tootsie.datakit.dedup import (
    ATTRIBUTE_SCHEMA,
    WORK_DIR,
    DedupConfig,
    dedup,
    dedup_filters,
    first_occurrence,
    line_spans,
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
    dedup(DedupConfig(input=corpus, lines=True, engine=ENGINE), str(tmp_path / "inline"))
    pool = EngineConfig(workers=2, progress=False)
    dedup(DedupConfig(input=corpus, lines=True, engine=pool), str(tmp_path / "pool"))
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


def test_line_spans_are_whole_lines_with_their_newline() -> None:
    text = "first\n  indented  \n\n \t\nlast"
    assert [text[s:e] for s, e in line_spans(text)] == ["first\n", "  indented  \n", "last"]
    assert line_spans("") == [] and line_spans("\n \n") == [] and line_spans("one\n") == [(0, 4)]


NAV = "Home | Docs | Blog"
LINE_SHARDS = [
    [f"{NAV}\nFirst page text.\nShared line.", "Second page.\n  Shared line.  \nShared line.\n"],
    [f"Third page.\n{NAV}\n\nOwn words.", f"{NAV}\nShared line."],
]


def test_lines_seen_earlier_are_marked_and_cut(tmp_path: Path) -> None:
    corpus = _write_docs(tmp_path / "docs", LINE_SHARDS)
    config = DedupConfig(input=corpus, fuzzy=False, paragraphs=False, lines=True, engine=ENGINE)
    stats = dedup(config, str(tmp_path / "attrs"))
    rows = _rows(tmp_path / "attrs")
    texts = [t for shard in LINE_SHARDS for t in shard]
    marked = [[text[s:e] for s, e in row["duplicate_line_spans"]] for text, row in zip(texts, rows, strict=True)]
    assert marked == [[], ["  Shared line.  \n", "Shared line.\n"], [f"{NAV}\n"], [f"{NAV}\n", "Shared line."]]
    assert rows[3]["duplicate_line_fraction"] == 1.0 and rows[0]["duplicate_line_fraction"] == 0.0
    assert rows[2]["duplicate_line_fraction"] == pytest.approx(len(NAV + "\n") / len(texts[2]))
    assert all(row["duplicate_paragraph_spans"] == [] for row in rows)  # paragraphs=False: the column stays, empty
    assert (stats["lines"], stats["duplicate_lines"]) == (11, 5)
    assert stats["duplicate_line_chars"] == sum(len(m) for found in marked for m in found)
    filters = dedup_filters(str(tmp_path / "attrs"), fuzzy=False, remove_lines=True)
    cut = consolidate(ConsolidateConfig(input=corpus, attributes=filters, engine=ENGINE), str(tmp_path / "cut"))
    kept = [row["text"] for row in _rows(tmp_path / "cut")]
    assert kept == [texts[0], "Second page.\n", "Third page.\n\nOwn words."]
    assert cut["removed_by"]["empty_after_span_removal"] == 1  # the last document was nothing but repeats


def test_lines_are_off_unless_asked_for(corpus: str, tmp_path: Path) -> None:
    stats = dedup(DedupConfig(input=corpus, fuzzy=False, engine=ENGINE), str(tmp_path / "out"))
    assert stats["lines"] == 0 and all(row["duplicate_line_spans"] == [] for row in _rows(tmp_path / "out"))
    assert [f.column for f in dedup_filters("d", fuzzy=False, remove_lines=True)][-1] == "duplicate_line_spans"


POOL = ["alpha", "beta gamma", "Home | About", "delta", "  alpha", "beta gamma  ", ""]
documents = st.lists(st.lists(st.sampled_from(POOL), min_size=1, max_size=6).map("\n".join), min_size=1, max_size=5)


@settings(max_examples=25, deadline=None)
@given(shards=st.lists(documents, min_size=1, max_size=4), order=st.randoms(use_true_random=False))
def test_every_marked_line_repeats_an_earlier_one_and_each_distinct_line_survives_once(shards, order) -> None:
    """In corpus order a line is marked exactly when an equal (trimmed) line came before; in any shard order the cut
    corpus holds every distinct line exactly once."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, permuted in (("given", shards), ("shuffled", order.sample(shards, len(shards)))):
            corpus = _write_docs(Path(tmp) / name, permuted)
            config = DedupConfig(input=corpus, fuzzy=False, paragraphs=False, lines=True, engine=ENGINE)
            dedup(config, str(Path(tmp) / f"{name}-attrs"))
            seen: set[str] = set()
            kept: list[str] = []
            texts = [t for shard in permuted for t in shard]
            for text, row in zip(texts, _rows(Path(tmp) / f"{name}-attrs"), strict=True):
                marked = {tuple(span) for span in row["duplicate_line_spans"]}
                for start, end in line_spans(text):
                    line = text[start:end].strip()
                    assert ((start, end) in marked) == (line in seen), (line, seen)
                    seen.add(line)
                    kept += [] if (start, end) in marked else [line]
            assert len(kept) == len(set(kept)) == len(seen)
