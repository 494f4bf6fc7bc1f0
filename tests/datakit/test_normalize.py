"""Normalize keeps every valid record once and counts every rejection by reason."""

import gzip
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.two_prefixes import run_under_two_prefixes
from tootsie.datakit import normalize as normalize_module
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.ids import content_id
from tootsie.datakit.normalize import ChunkWriter, NormalizeConfig, has_whitespace_run, normalize
from tootsie.datakit.split import SplitConfig, split_documents
from tootsie.datakit.stats import STATS_FILE
from tootsie.errors import TootsieError
from tootsie.executor import Step
from tootsie.executor.manifest import differing

INLINE = EngineConfig(workers=1, progress=False)


def _write_messy_jsonl(path) -> list[str]:
    valid = [f"document number {i} with some words" for i in range(20)]
    lines = [json.dumps({"id": f"v{i}", "text": t}).encode() for i, t in enumerate(valid)]
    lines += [
        b'{"id": "broken", "text": "no closing',
        b'{"id": "bad-utf8", "text": "\xff\xfe"}',
        json.dumps({"id": "empty", "text": "   \n"}).encode(),
        json.dumps({"id": "ws", "text": "a" + " " * 50_000 + "b"}).encode(),
        json.dumps({"id": "no-text", "body": "x"}).encode(),
        json.dumps({"id": "dup", "text": valid[3]}).encode(),
        json.dumps({"id": "nfd", "text": unicodedata.normalize("NFD", "café crème")}).encode(),
        json.dumps({"id": "nfc", "text": "café crème"}).encode(),
    ]
    with gzip.open(path, "wb") as handle:
        handle.write(b"\n".join(lines) + b"\n")
    return valid + ["café crème"]


def test_messy_input_keeps_valid_records_and_counts_rejections(tmp_path) -> None:
    expected = _write_messy_jsonl(tmp_path / "in.jsonl.gz")
    stats = normalize(
        NormalizeConfig(inputs=(str(tmp_path / "in.jsonl.gz"),), max_whitespace_run=1000, engine=INLINE),
        str(tmp_path / "out"),
    )
    table = pq.read_table(tmp_path / "out" / "part-00000.parquet")
    assert table.column("text").to_pylist() == expected
    assert table.column("id").to_pylist() == [content_id(t) for t in expected]
    assert stats["rejected"] == {
        "broken_json": 1,
        "invalid_utf8": 1,
        "empty": 1,
        "whitespace_run": 1,
        "missing_text": 1,
    }
    assert stats["exact_duplicates"] == 2 and stats["output_docs"] == len(expected)
    assert stats["input_docs"] == stats["output_docs"] + stats["exact_duplicates"] + sum(stats["rejected"].values())
    assert (stats["total"], stats["kept"]) == (stats["input_docs"], stats["output_docs"])
    assert stats["dropped"] == {**stats["rejected"], "exact_duplicate": 2}
    assert json.loads((tmp_path / "out" / STATS_FILE).read_text()) == stats


def test_shards_split_at_target_size(tmp_path) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"{i} " * 50}) + "\n" for i in range(30)))
    normalize(
        NormalizeConfig(inputs=(str(tmp_path / "in.jsonl"),), shard_bytes=1000, engine=INLINE), str(tmp_path / "out")
    )
    shards = sorted((tmp_path / "out").glob("part-*.parquet"))
    assert len(shards) > 3
    assert sum(pq.read_metadata(s).num_rows for s in shards) == 30


def test_missing_input_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(TootsieError, match="input not found"):
        normalize(NormalizeConfig(inputs=(str(tmp_path / "nope.jsonl"),)), str(tmp_path / "out"))


def test_split_is_disjoint_complete_and_deterministic(tmp_path) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(400)))
    normalize(NormalizeConfig(inputs=(str(tmp_path / "in.jsonl"),), engine=INLINE), str(tmp_path / "docs"))
    counts = split_documents(SplitConfig(input=str(tmp_path / "docs"), heldout_fraction=0.2), str(tmp_path / "a"))
    split_documents(SplitConfig(input=str(tmp_path / "docs"), heldout_fraction=0.2), str(tmp_path / "b"))
    ids = {s: set(pq.read_table(tmp_path / "a" / s).column("id").to_pylist()) for s in ("train", "heldout")}
    again = {s: set(pq.read_table(tmp_path / "b" / s).column("id").to_pylist()) for s in ("train", "heldout")}
    assert ids == again and not ids["train"] & ids["heldout"]
    assert counts["train"] + counts["heldout"] == 400 and 40 < counts["heldout"] < 120
    assert (counts["total"], counts["kept"], counts["dropped"]) == (400, 400, {})
    assert json.loads((tmp_path / "a" / STATS_FILE).read_text()) == counts


def test_ten_thousand_messy_records_with_a_50mb_whitespace_run(tmp_path) -> None:
    """The issue's bad-input file: every valid record comes through, every rejection is counted."""
    valid = [f"record {i}: the quick brown fox {i * 7}" for i in range(9_990)]
    lines = [json.dumps({"id": i, "text": t}).encode() for i, t in enumerate(valid)]
    lines += [b'{"text": "broken'] * 3 + [b'{"text": "\xc3\x28"}'] * 3 + [json.dumps({"text": ""}).encode()] * 3
    lines.insert(5000, json.dumps({"text": "x" + " " * 50_000_000 + "y"}).encode())
    (tmp_path / "messy.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    stats = normalize(
        NormalizeConfig(inputs=(str(tmp_path / "messy.jsonl"),), engine=EngineConfig(workers=2, progress=False)),
        str(tmp_path / "out"),
    )
    assert stats["input_docs"] == 10_000 and stats["output_docs"] == 9_990
    assert stats["rejected"] == {"broken_json": 3, "invalid_utf8": 3, "empty": 3, "too_large": 1}
    texts = [
        t
        for part in sorted((tmp_path / "out").glob("part-*.parquet"))
        for t in pq.read_table(part).column("text").to_pylist()
    ]
    assert texts == valid


def test_exact_duplicates_across_input_files_keep_the_first(tmp_path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "shared"}) + "\n" + json.dumps({"text": "only a"}) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "only b"}) + "\n" + json.dumps({"text": "shared"}) + "\n")
    stats = normalize(
        NormalizeConfig(inputs=(str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")), engine=INLINE),
        str(tmp_path / "out"),
    )
    texts = [pq.read_table(p).column("text").to_pylist() for p in sorted((tmp_path / "out").glob("part-*.parquet"))]
    assert texts == [["shared", "only a"], ["only b"]] and stats["exact_duplicates"] == 1


def test_inputs_behind_fsspec_urls_and_globs(tmp_path) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/raw/a.jsonl", b'{"text": "from memory a"}\n')
    fs.pipe("/raw/sub/b.jsonl", b'{"text": "from memory b"}\n{"text": "from memory a"}\n')
    (tmp_path / "c.txt").write_text("a local text file")
    stats = normalize(
        NormalizeConfig(inputs=("memory://raw", str(tmp_path / "*.txt")), engine=INLINE), str(tmp_path / "out")
    )
    texts = [
        t
        for part in sorted((tmp_path / "out").glob("part-*.parquet"))
        for t in pq.read_table(part).column("text").to_pylist()
    ]
    assert sorted(texts) == ["a local text file", "from memory a", "from memory b"] and stats["exact_duplicates"] == 1


@dataclass(frozen=True)
class CopyConfig:
    """Where the step's copy of the shared document comes from."""

    source: str


def write_copy(config: CopyConfig, output_path: str) -> None:
    """A step whose output holds the same text as a fixed input file, under another id."""
    (Path(output_path) / "docs.jsonl").write_text(json.dumps({"id": config.source, "text": "shared"}) + "\n")


def test_input_order_is_the_config_order_under_any_prefix(tmp_path) -> None:
    fixed = tmp_path / "b-fixed"
    fixed.mkdir()
    (fixed / "docs.jsonl").write_text(json.dumps({"id": "fixed", "text": "shared"}) + "\n")
    copy = Step("copy", write_copy, CopyConfig(source="step"))
    both = Step("normalized", normalize, NormalizeConfig(inputs=(copy.ref("docs.jsonl"), str(fixed)), engine=INLINE))
    runs = run_under_two_prefixes(both, tmp_path)  # by absolute path, "a/..." < "b-fixed" < "elsewhere/..."
    assert differing(runs[0][2], runs[1][2]) == []
    for _, out, _ in runs:
        [row] = pq.read_table(sorted(out.glob("part-*.parquet"))[0]).to_pylist()
        assert row["source_id"] == "step"  # the first input's copy, as listed


@given(
    text=st.text(alphabet=st.sampled_from(["a", " ", "\n", "\t", "\u00a0", "é", "\u3000", "\U0001f600", "\x1c"])),
    longer_than=st.integers(1, 6),
)
def test_whitespace_runs_are_found_as_the_regex_finds_them(text: str, longer_than: int) -> None:
    for sample in (text, "".join(c for c in text if c.isascii())):  # the NumPy path and the ASCII path
        assert has_whitespace_run(sample, longer_than) == bool(re.search(rf"\s{{{longer_than + 1}}}", sample))


def test_chunk_writer_row_groups_and_nulls_read_back_as_written(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(normalize_module, "ROW_GROUP_CHARS", 10)
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("title", pa.string())])
    rows = [{"id": str(i), "text": f"text número {i}", "title": None if i % 3 else f"t{i}"} for i in range(25)]
    writer = ChunkWriter(tmp_path / "chunks", schema, shard_bytes=200)
    for row in rows:
        writer.add(row)
    chunks = writer.close()
    files = sorted((tmp_path / "chunks").glob("chunk-*.parquet"))
    assert chunks == len(files) == 2 and pq.ParquetFile(files[0]).num_row_groups > 1
    assert [row for f in files for row in pq.read_table(f).to_pylist()] == rows
    assert sorted(p.name for p in (tmp_path / "chunks").iterdir()) == [f.name for f in files]  # no temporary left
