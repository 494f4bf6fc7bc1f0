"""A large `.warc.gz` is read in byte ranges that together yield every record once, in order, whatever the split."""

import gzip
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tootsie.corpora.warc_write import WarcRecord, http_response, record_bytes, write_warc
from tootsie.datakit import web_source
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract
from tootsie.datakit.parquet_io import parquet_files
from tootsie.datakit.web_source import read_web_pages, record_ranges

PARAGRAPH = "Every page of this archive carries one paragraph of its own, long enough to be main content: "


def _records(pages: int) -> list[WarcRecord]:
    records = []
    for i in range(pages):
        html = f"<html><head><title>P{i}</title></head><body><p>{PARAGRAPH}{i} {'word ' * (i % 50)}</p></body></html>"
        records.append(WarcRecord("request", f"https://site/{i}", b"GET / HTTP/1.1\r\n\r\n"))
        records.append(WarcRecord("response", f"https://site/{i}", http_response(html.encode())))
    records.append(WarcRecord("response", "https://site/missing", http_response(b"gone", status=404)))
    return records


def _read(path: Path, ranges: list[tuple[int, int | None]]) -> tuple[list[str], list[str]]:
    urls, rejected = [], []
    for start, stop in ranges:
        urls += [page.url for page in read_web_pages(str(path), 10**6, rejected.append, start=start, stop=stop)]
    return urls, rejected


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_source, "RANGE_MIN_BYTES", 4_000)


def test_ranges_read_every_record_once_in_order(tmp_path: Path, small_ranges: None) -> None:
    warc = write_warc(tmp_path / "crawl.warc.gz", _records(120))
    ranges = record_ranges(str(warc))
    assert len(ranges) > 5 and ranges[0][0] == 0 and ranges[-1][1] is None
    assert all(stop == next_start for (_, stop), (next_start, _) in zip(ranges, ranges[1:], strict=False))
    assert _read(warc, ranges) == _read(warc, [(0, None)])
    assert _read(warc, ranges)[1] == ["not_response"] * 120 + ["status_404"]


def test_whole_file_gzip_and_plain_warc_are_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_source, "RANGE_MIN_BYTES", 1_000)
    records = _records(40)
    one_member = tmp_path / "one.warc.gz"
    one_member.write_bytes(gzip.compress(b"".join(record_bytes(r) for r in records)))
    plain = write_warc(tmp_path / "plain.warc", records)
    assert one_member.stat().st_size > 1_000 and record_ranges(str(one_member)) == [(0, None)]
    assert record_ranges(str(plain)) == [(0, None)]


def test_extract_writes_the_same_documents_split_or_whole_and_for_any_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_warc(tmp_path / "in" / "crawl.warc.gz", _records(120))
    write_warc(tmp_path / "in" / "small.warc.gz", _records(3))

    def documents(out: Path, workers: int) -> tuple[list[dict], dict]:
        engine = EngineConfig(workers=workers, progress=False)
        stats = extract(ExtractConfig(inputs=(str(tmp_path / "in"),), engine=engine), str(out))
        return [row for path in parquet_files(out) for row in pq.read_table(path).to_pylist()], stats

    whole, whole_stats = documents(tmp_path / "whole", 1)
    monkeypatch.setattr(web_source, "RANGE_MIN_BYTES", 4_000)
    split, split_stats = documents(tmp_path / "split", 1)
    pool, _ = documents(tmp_path / "pool", 2)
    assert split == whole and pool == split and len(whole) == 123 - 3  # the 3 small pages repeat 3 of the 120
    assert split_stats["shards"] > whole_stats["shards"] == 2
    assert {k: split_stats[k] for k in ("input_records", "output_docs", "rejected")} == {
        k: whole_stats[k] for k in ("input_records", "output_docs", "rejected")
    }
    assert [p.read_bytes() for p in parquet_files(tmp_path / "pool")] == [
        p.read_bytes() for p in parquet_files(tmp_path / "split")
    ]
