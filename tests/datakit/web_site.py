"""A small web site built in the tests: real paragraphs wrapped in boilerplate repeated on every page, as a WARC.

The known paragraphs are prose the running Python ships (`pydoc_data.topics`,
the reference manual's topics). Every page wraps three of them in the same
boilerplate: a navigation bar, a cookie banner, a "Related articles" link list,
a newsletter box and a footer. The WARC also holds the records an extractor
must refuse, one of each kind, so the stats can be checked reason by reason.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from pydoc_data.topics import topics

from tootsie.corpora.warc_write import WarcRecord, http_response, write_warc

BOILERPLATE_MARKERS = (
    "We use cookies",
    "All rights reserved",
    "Related articles",
    "Subscribe to our newsletter",
    "Home Documentation Blog",
)
LATIN1_PARAGRAPH = (
    "Grüße aus Köln: the café on the corner serves crème brûlée, and the façade of the old Rathaus, with its"
    " naïve paintings of señores and their daughters, is worth the short walk from the station."
)
LATIN1_SECOND = (
    "À la fin de la journée, nous sommes allés au marché où les élèves achètent des gâteaux; on y parle français,"
    " español y português, et l'été dernier la fête a duré jusqu'à minuit."
)
NAV = "".join(
    f'<li><a href="/{w.lower()}">{w}</a></li>' for w in ("Home", "Documentation", "Blog", "About", "Contact", "Login")
)
RELATED = "".join(f'<li><a href="/post/{i}">Related post number {i} about Python</a></li>' for i in range(8))
REJECTED = {
    "not_response": 3,
    "status_404": 1,
    "not_html": 1,
    "broken_html": 1,
    "empty": 1,
    "too_large": 1,
    "decode_error": 1,
}
MAX_HTML_BYTES = 100_000


@dataclass(frozen=True)
class Site:
    """The WARC file, each page's URL → its known paragraphs, and the latin-1 page's URL."""

    warc: Path
    paragraphs: dict[str, list[str]]
    latin1_url: str


def known_paragraphs(count: int, shortest: int = 300, longest: int = 1200) -> list[str]:
    """`count` distinct prose paragraphs of `shortest`-`longest` characters from the pydoc topics, in a fixed order."""
    found: dict[str, None] = {}
    for name in sorted(topics):
        for block in re.split(r"\n\s*\n", topics[name]):
            text = " ".join(block.split())
            if shortest <= len(text) <= longest and text[0].isupper() and text.endswith(".") and ">>>" not in text:
                found[text] = None
    if len(found) < count:
        raise ValueError(f"only {len(found)} paragraphs in pydoc_data.topics, {count} asked")
    return list(found)[:count]


def page_html(title: str, paragraphs: list[str], charset: str = "utf-8") -> str:
    """A page with `paragraphs` as its article, inside the site's boilerplate."""
    escaped = [p.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for p in paragraphs]
    article = "".join(f"<p>{p}</p>" for p in escaped)
    return (
        f'<!DOCTYPE html><html><head><meta charset="{charset}"><title>{title} | Example Docs</title></head><body>'
        f'<header><nav class="navbar"><ul>{NAV}</ul></nav></header>'
        '<div class="cookie-banner" id="cookie-consent"><p>We use cookies to improve your experience on our'
        " site. By continuing to browse you agree to our cookie policy.</p><button>Accept all</button></div>"
        f"<main><article><h1>{title}</h1>{article}</article></main>"
        f'<aside class="sidebar"><h3>Related articles</h3><ul>{RELATED}</ul>'
        '<div class="newsletter">Subscribe to our newsletter for weekly updates.</div></aside>'
        '<footer class="site-footer"><p>© 2024 Example Corp. All rights reserved.</p>'
        '<ul><li><a href="/privacy">Privacy</a></li><li><a href="/terms">Terms</a></li></ul></footer>'
        "</body></html>"
    )


def build_site(directory: Path, pages: int = 40, name: str = "site.warc.gz") -> Site:
    """Write the site's WARC into `directory`: `pages` pages, one latin-1 page and one record of each rejection."""
    texts = known_paragraphs(3 * pages)
    records: list[WarcRecord] = []
    paragraphs: dict[str, list[str]] = {}
    for index in range(pages):
        url = f"https://docs.example.org/page/{index}"
        chosen = texts[3 * index : 3 * index + 3]
        paragraphs[url] = chosen
        if index < 3:
            records.append(WarcRecord("request", url, f"GET /page/{index} HTTP/1.1\r\n\r\n".encode()))
        body = page_html(f"Topic {index}", chosen).encode("utf-8")
        records.append(WarcRecord("response", url, http_response(body)))
    latin1_url = "https://docs.example.org/latin1"
    latin1 = page_html("Köln", [LATIN1_PARAGRAPH, LATIN1_SECOND], charset="iso-8859-1").encode("latin-1")
    records.append(WarcRecord("response", latin1_url, http_response(latin1, "text/html")))
    paragraphs[latin1_url] = [LATIN1_PARAGRAPH]
    big = page_html("Big", ["word " * (MAX_HTML_BYTES // 5)]).encode()
    records += [
        WarcRecord("response", "https://docs.example.org/missing", http_response(b"<p>Not found</p>", status=404)),
        WarcRecord("response", "https://docs.example.org/logo.png", http_response(b"\x89PNG\r\n", "image/png")),
        WarcRecord("response", "https://docs.example.org/binary", http_response(b"<p>\x00\x01\x02</p>")),
        WarcRecord("response", "https://docs.example.org/empty", http_response(b"")),
        WarcRecord("response", "https://docs.example.org/big", http_response(big)),
        WarcRecord("response", "https://docs.example.org/bad", http_response(b"<p>caf\xe9 au lait</p>")),
    ]
    return Site(warc=write_warc(directory / name, records), paragraphs=paragraphs, latin1_url=latin1_url)
