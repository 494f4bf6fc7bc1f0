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

Example: a WARC with a request, a 200 `text/html` response and a 404 response
yields one `WebPage` and counts `not_response: 1`, `status_404: 1`.
"""

import posixpath
import re
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


class WebPage(NamedTuple):
    """One decoded HTML page and where it came from."""

    html: str
    url: str
    date: str | None
    record_id: str


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


def read_web_pages(path: str, max_bytes: int, reject: Reject, name: str | None = None) -> Iterator[WebPage]:
    """Yield the HTML pages of one WARC or HTML file; every other record goes to `reject(reason)`.

    An HTML file's URL and record id are `name` (its name relative to its input, `expand_web_inputs`), else `path`."""
    if posixpath.basename(path).lower().endswith(HTML_SUFFIXES):
        with fsspec.open(path, "rb") as handle:
            html = page_of(handle.read(max_bytes + 1), None, max_bytes, reject)
        if html is not None:
            yield WebPage(html=html, url=name or path, date=None, record_id=name or path)
        return
    warc = web_module("fastwarc.warc")
    with fsspec.open(path, "rb") as handle:
        for record in warc.ArchiveIterator(handle, parse_http=True, stream_detect=True):
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
