"""Normalize keeps every valid record once and counts every rejection by reason."""

import gzip
import json
import unicodedata

import pyarrow.parquet as pq
import pytest

from tootsie.datakit.ids import content_id
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.split import SplitConfig, split_documents
from tootsie.errors import TootsieError


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
    stats = normalize(NormalizeConfig(inputs=(str(tmp_path / "in.jsonl.gz"),), max_whitespace_run=1000), str(tmp_path / "out"))
    table = pq.read_table(tmp_path / "out" / "part-00000.parquet")
    assert table.column("text").to_pylist() == expected
    assert table.column("id").to_pylist() == [content_id(t) for t in expected]
    assert dict(stats.rejected) == {"broken_json": 1, "invalid_utf8": 1, "empty": 1, "whitespace_run": 1, "missing_text": 1, "exact_duplicate": 2}
    assert stats.input_docs == stats.output_docs + sum(stats.rejected.values())
    written = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert written["exact_duplicates"] == 2 and written["output_docs"] == len(expected)


def test_shards_split_at_target_size(tmp_path) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"{i} " * 50}) + "\n" for i in range(30)))
    normalize(NormalizeConfig(inputs=(str(tmp_path / "in.jsonl"),), shard_bytes=1000), str(tmp_path / "out"))
    shards = sorted((tmp_path / "out").glob("part-*.parquet"))
    assert len(shards) > 3
    assert sum(pq.read_metadata(s).num_rows for s in shards) == 30


def test_missing_input_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(TootsieError, match="input not found"):
        normalize(NormalizeConfig(inputs=(str(tmp_path / "nope.jsonl"),)), str(tmp_path / "out"))


def test_split_is_disjoint_complete_and_deterministic(tmp_path) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(400)))
    normalize(NormalizeConfig(inputs=(str(tmp_path / "in.jsonl"),)), str(tmp_path / "docs"))
    counts = split_documents(SplitConfig(input=str(tmp_path / "docs"), heldout_fraction=0.2), str(tmp_path / "a"))
    split_documents(SplitConfig(input=str(tmp_path / "docs"), heldout_fraction=0.2), str(tmp_path / "b"))
    ids = {s: set(pq.read_table(tmp_path / "a" / s).column("id").to_pylist()) for s in ("train", "heldout")}
    again = {s: set(pq.read_table(tmp_path / "b" / s).column("id").to_pylist()) for s in ("train", "heldout")}
    assert ids == again and not ids["train"] & ids["heldout"]
    assert counts["train"] + counts["heldout"] == 400 and 40 < counts["heldout"] < 120
