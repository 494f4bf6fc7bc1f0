"""Write WARC/1.1 files of HTTP records: the fixtures of the web tests, the benchmark, and local page dumps.

A record is its WARC headers, a blank line, the block (for a response, the
HTTP status line, headers and body) and two CRLFs (ISO 28500). `write_warc`
gzips each record as its own member, the layout of Common Crawl's `.warc.gz`
files, so a reader can seek to any record; a plain `.warc` is written
uncompressed. The file appears atomically (temporary name, then rename).

Example: `write_warc(path, [WarcRecord("response", "http://a/", http_response(b"<p>hi</p>"))])`
writes one response record that `web_source.read_web_pages` reads back as a page.
"""

import gzip
import hashlib
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WarcRecord:
    """One WARC record: its type, target URI and block bytes."""

    type: str
    """WARC-Type: "response", "request", "warcinfo", "metadata", ..."""
    url: str
    """WARC-Target-URI."""
    block: bytes
    """The record block; for a response, `http_response(...)`."""
    date: str = "2024-05-01T12:00:00Z"
    """WARC-Date (ISO 8601, UTC)."""
    record_id: str | None = None
    """WARC-Record-ID without brackets; None derives a UUID from the URL, type and block."""


def http_response(body: bytes, content_type: str = "text/html; charset=utf-8", status: int = 200) -> bytes:
    """An HTTP/1.1 response message (status line, Content-Type and Content-Length headers, body)."""
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("ascii") + body


def record_bytes(record: WarcRecord) -> bytes:
    """The serialized record: WARC headers, blank line, block, two CRLFs."""
    digest = hashlib.sha1(record.block).hexdigest()
    record_id = record.record_id or f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'{record.type} {record.url} {digest}')}"
    msgtype = "response" if record.type == "response" else "request"
    content_type = f"application/http; msgtype={msgtype}" if record.type in ("response", "request") else "text/plain"
    headers = (
        f"WARC/1.1\r\nWARC-Type: {record.type}\r\nWARC-Record-ID: <{record_id}>\r\nWARC-Date: {record.date}\r\n"
        f"WARC-Target-URI: {record.url}\r\nContent-Type: {content_type}\r\nContent-Length: {len(record.block)}\r\n\r\n"
    )
    return headers.encode("utf-8") + record.block + b"\r\n\r\n"


def write_warc(path: str | Path, records: Iterable[WarcRecord]) -> Path:
    """Write `records` to `path` (.warc.gz: one gzip member per record; .warc: plain), atomically; return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    compress = target.name.endswith(".gz")
    with open(tmp, "wb") as handle:
        for record in records:
            data = record_bytes(record)
            handle.write(gzip.compress(data, mtime=0) if compress else data)
    os.replace(tmp, target)
    return target
