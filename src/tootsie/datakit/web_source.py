"""Read HTML pages out of web archives (`.warc`, `.warc.gz`) and `.html` files, local or behind fsspec URLs.

A WARC holds request, response, metadata and other records; only HTTP 200
responses whose content type is `text/html` (or `application/xhtml+xml`) are
pages. Every other record is counted by reason through a callback and never
raises, so one odd record costs a count, not the shard:

- `not_response` (a request, warcinfo, metadata... record), `not_http`,
  `status_<code>` (e.g. `status_404`), `not_html` (another content type);
- `too_large` (payload over `max_bytes`), `empty` (no payload), `broken_html`
  (binary bytes: a NUL in the payload);
- `decode_error`: the declared charset is unknown or does not decode the bytes.

Decoding follows the page: the charset declared in the HTTP `Content-Type`
header, else in a `<meta charset>` / `http-equiv` tag near the top, decoded
strictly; with none declared, resiliparse detects it (uchardet, WHATWG names)
and decodes with fallbacks. A page keeps its URL, its WARC date (ISO 8601) and
its WARC record id; an `.html` file has its name as URL and record id and no
date: the name its input gives it (`readers.expand_named_inputs`: the input as
given plus the file's path inside it, a step's output named `<name>-<hash>/...`),
never where the prefix or the checkout lies. fastwarc (the reader resiliparse and DCLM use) parses the WARC.

A large `.warc.gz` is read in byte ranges (`web_ranges`), so one big archive
spreads over several workers: ranges of `max(RANGE_MIN_BYTES, size /
MAX_RANGES)` bytes of the compressed file, a function of the file alone (never
of the workers), and a range reads the records whose gzip member starts in it.
A worker finds its first record by looking for the next gzip member that
inflates to `WARC/` (Hadoop's split sync, applied to Common Crawl's layout of
one gzip member per record), so no index pass over the file is needed. A file
whose first two records share one gzip member (a whole-file gzip), a plain
`.warc` and an `.html` file are read whole.

Example: a WARC with a request, a 200 `text/html` response and a 404 response
yields one `WebPage` and counts `not_response: 1`, `status_404: 1`; a 40 MB
`.warc.gz` of one member per record gives 40 ranges of 1 MB, and reading them
one after another yields the pages of reading it whole, in the same order.
"""

import functools
import posixpath
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import fsspec

from tootsie.datakit.readers import expand_named_inputs
from tootsie.extras import import_extra

WARC_SUFFIXES = (".warc", ".warc.gz")
HTML_SUFFIXES = (".html", ".htm")
HTML_TYPES = ("text/html", "application/xhtml+xml")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
Reject = Callable[[str], None]
RANGE_MIN_BYTES = 1 << 20
"""Smallest range a `.warc.gz` is split into: about 200 pages of Common Crawl, a second or two of extraction."""
MAX_RANGES = 64
"""Most ranges per file (a 1 GB Common Crawl WARC: 64 ranges of 16 MB), bounding tasks and output parts per file."""
_GZIP_MAGIC = b"\x1f\x8b\x08"
_SYNC_WINDOW = 1 << 20  # bytes read at a time while looking for the next gzip member
_SYNC_PEEK = 4096  # compressed bytes inflated to check that a candidate member starts with "WARC/"


class WebRange(NamedTuple):
    """One unit of extraction work: a file, its name relative to its input, and the byte range of records to read."""

    path: str
    name: str
    start: int = 0
    """First byte of the range: records whose gzip member starts at or after it."""
    stop: int | None = None
    """Records whose member starts before this byte; None: to the end of the file."""


class WebPage(NamedTuple):
    """One decoded HTML page and where it came from."""

    html: str
    url: str
    date: str | None
    record_id: str


@functools.cache  # one import check per process, not one per page
def web_module(name: str) -> Any:
    """Import an optional web dependency (resiliparse, fastwarc, trafilatura) or say how to install it."""
    return import_extra(name, extra="web", purpose="reading web pages")


def is_web_input(path: str) -> bool:
    """True for a file the web source reads: a WARC (plain or gzip) or an HTML file."""
    return posixpath.basename(path).lower().endswith(WARC_SUFFIXES + HTML_SUFFIXES)


def expand_web_inputs(inputs: tuple[str, ...]) -> list[tuple[str, str]]:
    """`(path, name)` of the WARC/HTML files of files, directories (recursively) and globs, local or fsspec URLs.

    In input order, then by path within the input; `name` is the file's name relative to its input, made portable
    (`readers.expand_named_inputs`)."""
    return expand_named_inputs(inputs, accept=is_web_input, expected=WARC_SUFFIXES + HTML_SUFFIXES)


def web_ranges(inputs: tuple[str, ...]) -> list[tuple[int, WebRange]]:
    """`(file index, range)` of every input file (`expand_web_inputs`), a large one-member-per-record `.warc.gz`
    split into byte ranges, in file order then range order; the split depends on the files alone."""
    return [
        (index, WebRange(path, name, start, stop))
        for index, (path, name) in enumerate(expand_web_inputs(inputs))
        for start, stop in record_ranges(path)
    ]


def record_ranges(path: str) -> list[tuple[int, int | None]]:
    """`[start, stop)` byte ranges that together read every record of `path` once (`[(0, None)]`: read it whole)."""
    if not posixpath.basename(path).lower().endswith(".warc.gz"):
        return [(0, None)]
    fs, local = fsspec.core.url_to_fs(path)
    size = fs.size(local)
    step = max(RANGE_MIN_BYTES, -(-size // MAX_RANGES))
    if size <= step or not _member_per_record(path):
        return [(0, None)]
    starts = list(range(0, size, step))
    return [(start, stop) for start, stop in zip(starts, [*starts[1:], None], strict=True)]


def _member_per_record(path: str) -> bool:
    """True when the second record of a `.warc.gz` starts a gzip member of its own (Common Crawl's layout)."""
    warc = web_module("fastwarc.warc")
    with fsspec.open(path, "rb") as handle:
        positions = []
        for record in warc.ArchiveIterator(handle, parse_http=False):
            positions.append(record.stream_pos)
            if len(positions) == 2:
                break
        if len(positions) < 2 or positions[1] <= positions[0]:
            return False
        handle.seek(positions[1])
        return _is_member_start(handle.read(_SYNC_PEEK))


def _is_member_start(data: bytes) -> bool:
    """Whether `data` begins a gzip member that inflates to a WARC record's first bytes."""
    if not data.startswith(_GZIP_MAGIC):
        return False
    try:
        return zlib.decompressobj(wbits=31).decompress(data, 5) == b"WARC/"
    except zlib.error:
        return False


def _next_member(handle: Any, start: int) -> int | None:
    """Offset of the first gzip member starting a WARC record at or after `start`, or None before the end."""
    offset = start
    while True:
        handle.seek(offset)
        window = handle.read(_SYNC_WINDOW + _SYNC_PEEK)
        found = window.find(_GZIP_MAGIC)
        while 0 <= found < _SYNC_WINDOW:
            if _is_member_start(window[found : found + _SYNC_PEEK]):
                return offset + found
            found = window.find(_GZIP_MAGIC, found + 1)
        if len(window) <= _SYNC_WINDOW:
            return None
        offset += _SYNC_WINDOW


def declared_charset(header_charset: str | None, payload: bytes) -> str | None:
    """The charset the page declares: the HTTP header's, else a `<meta>` tag's in the first 2 KB, else None."""
    if header_charset:
        return header_charset
    found = _META_CHARSET.search(payload[:2048])
    return found.group(1).decode("ascii") if found else None


def decode_page(payload: bytes, header_charset: str | None) -> str | None:
    """The page's text: strict decoding with the declared charset, or detection; None when it cannot decode."""
    encoding = web_module("resiliparse.parse.encoding")
    declared = declared_charset(header_charset, payload)
    if declared is None:
        return encoding.bytes_to_str(payload, encoding.detect_encoding(payload), errors="replace")
    # WHATWG labels first ("latin1" reads as windows-1252), then Python's codec names ("latin-1")
    name = encoding.map_encoding_to_html5(declared, fallback_utf8=False) or declared
    try:
        return payload.decode(name)
    except (LookupError, UnicodeDecodeError):
        return None


def page_of(payload: bytes, header_charset: str | None, max_bytes: int, reject: Reject) -> str | None:
    """Guard and decode one payload; a rejected one goes to `reject(reason)` and gives None."""
    if not payload.strip():
        reject("empty")
    elif len(payload) > max_bytes:
        reject("too_large")
    elif b"\x00" in payload:
        reject("broken_html")
    else:
        html = decode_page(payload, header_charset)
        if html is None:
            reject("decode_error")
        return html
    return None


def read_web_pages(
    path: str, max_bytes: int, reject: Reject, name: str | None = None, start: int = 0, stop: int | None = None
) -> Iterator[WebPage]:
    """Yield the HTML pages of one WARC or HTML file; every other record goes to `reject(reason)`.

    An HTML file's URL and record id are `name` (its name relative to its input, `expand_web_inputs`), else `path`.
    `start` / `stop` read one of `record_ranges(path)` of a `.warc.gz`: the records whose member starts in it."""
    if posixpath.basename(path).lower().endswith(HTML_SUFFIXES):
        with fsspec.open(path, "rb") as handle:
            html = page_of(handle.read(max_bytes + 1), None, max_bytes, reject)
        if html is not None:
            yield WebPage(html=html, url=name or path, date=None, record_id=name or path)
        return
    warc = web_module("fastwarc.warc")
    with fsspec.open(path, "rb") as handle:
        first = _next_member(handle, start) if start else 0
        if first is None or (stop is not None and first >= stop):
            return
        handle.seek(first)
        for record in warc.ArchiveIterator(handle, parse_http=True, stream_detect=True):
            if stop is not None and record.stream_pos >= stop:
                return
            reason = _skip_reason(record, warc.WarcRecordType.response)
            if reason is not None:
                reject(reason)
                continue
            if record.content_length > max_bytes:
                reject("too_large")
                continue
            html = page_of(record.reader.read(), record.http_charset, max_bytes, reject)
            if html is not None:
                date = record.record_date
                yield WebPage(
                    html=html,
                    url=record.headers.get("WARC-Target-URI", ""),
                    date=date.isoformat() if date is not None else None,
                    record_id=(record.record_id or "").strip("<>"),
                )


def _skip_reason(record: Any, response: Any) -> str | None:
    """Why a WARC record is not an HTML page, or None for a 200 text/html response."""
    if record.record_type != response:
        return "not_response"
    if not record.is_http or record.http_headers is None:
        return "not_http"
    status = record.http_headers.status_code
    if status != 200:
        return f"status_{status}"
    content_type = (record.http_content_type or "").split(";")[0].strip().lower()
    return None if content_type in HTML_TYPES else "not_html"
