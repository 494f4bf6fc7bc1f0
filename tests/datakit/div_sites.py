"""Web sites of the real web's shape, built in the tests: boilerplate in plain `<div>`s that no tag names.

Five hosts, each with its own template (class names like `c7` or `wrap-2`,
blocks in another order), around known prose paragraphs from the running
Python's `pydoc_data.topics`:

- `shop-example.com` (40 pages, half of them under `www.`), `news.example.net`
  (35), `blog.example.io` (20): navigation, a cookie banner, related links
  (the titles of four other pages of the host), a newsletter box and a footer
  whose year is 2023 on half the pages and 2024 on the others;
- `pair.example.info` (2 pages) and `tiny.example.dev` (1 page) with the same
  kind of boilerplate;
- one paragraph legitimately on two hosts (page 0 of the shop and of the
  news site), and one a blog quotes on two of its own pages;
- two tag pages on the shop (a heading and four links: nothing but
  template) and a short note on the blog (one paragraph of under 320
  characters inside the whole template).

The 98 article pages have 3 known paragraphs each and the note one, so 101
pages hold 295 (`DivSites.paragraphs`; the tag pages hold none).
`BOILERPLATE` maps each kind of boilerplate to the strings that betray it in
extracted text; a related list left behind shows as another page's title
(`DivSites.titles`).
"""

from dataclasses import dataclass
from pathlib import Path

from tests.datakit.web_site import known_paragraphs
from tootsie.corpora.warc_write import WarcRecord, http_response, write_warc

BOILERPLATE = {
    "nav": ("Home Deals Gift cards", "World Politics Sports Culture", "Posts Tags Archive", "Start Pricing Support"),
    "cookie": ("cookies",),
    "related": ("You may also like", "More stories", "Read next", "Popular now"),  # the list's heading
    "newsletter": ("newsletter",),
    "footer": ("All rights reserved",),
}
"""Kind of boilerplate -> strings of it (one per template where they differ); none occurs in a known paragraph."""
SHARED_HOSTS = ("shop-example.com", "news.example.net")
"""The hosts whose page 0 both carry `DivSites.shared_paragraph`."""


@dataclass(frozen=True)
class Template:
    """One host's page layout: its boilerplate blocks' texts and classes, and the order of the blocks."""

    nav: str
    cookie: str
    related_title: str
    newsletter: str
    company: str
    order: tuple[str, ...]


TEMPLATES = {
    "shop-example.com": Template(
        "Home Deals Gift cards Orders Help",
        "This site uses cookies to remember your basket and to measure traffic. Manage your settings any time.",
        "You may also like",
        "Join our newsletter and get 10% off your first order.",
        "Shop Example Ltd",
        ("nav", "cookie", "main", "related", "newsletter", "footer"),
    ),
    "news.example.net": Template(
        "World Politics Sports Culture Opinion",
        "We and our partners use cookies to personalise content and ads. Accept or reject below.",
        "More stories",
        "Get the morning newsletter in your inbox every weekday.",
        "Example News Group",
        ("cookie", "nav", "related", "main", "footer", "newsletter"),
    ),
    "blog.example.io": Template(
        "Posts Tags Archive About me",
        "Hi! This blog sets a few cookies for statistics. Okay?",
        "Read next",
        "Subscribe to the newsletter: one email a month, no spam.",
        "Example Blog",
        ("nav", "main", "newsletter", "related", "footer", "cookie"),
    ),
    "pair.example.info": Template(
        "Start Pricing Support Login",
        "Cookies help us deliver our services. By using them you agree to our use of cookies.",
        "Popular now",
        "Our newsletter brings product news twice a month.",
        "Pair Example Inc",
        ("cookie", "nav", "main", "related", "newsletter", "footer"),
    ),
}
TEMPLATES["tiny.example.dev"] = TEMPLATES["pair.example.info"]
HOST_PAGES = {
    "shop-example.com": 40,
    "news.example.net": 35,
    "blog.example.io": 20,
    "pair.example.info": 2,
    "tiny.example.dev": 1,
}


@dataclass(frozen=True)
class DivSites:
    """The WARC, each page's URL -> its known paragraphs and its title, the cross-host and self-quoted paragraphs."""

    warc: Path
    paragraphs: dict[str, list[str]]
    titles: dict[str, str]
    shared_paragraph: str
    quoted_paragraph: str


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def div_page(host: str, title: str, paragraphs: list[str], related: list[str], year: int) -> str:
    """A page of `host`: its template's `<div>` boilerplate around `title` and `paragraphs`, linking `related`."""
    t = TEMPLATES[host]
    links = "".join(f'<a class="l" href="/p/{w}">{w}</a> ' for w in t.nav.split())
    items = "".join(f'<div class="i"><a href="/r/{i}">{_escape(r)}</a></div>' for i, r in enumerate(related))
    blocks = {
        "nav": f'<div class="wrap-2"><div class="row">{links}</div></div>',
        "cookie": f'<div class="c7" id="x1"><div>{t.cookie}</div><div class="btn">OK</div></div>',
        "main": f'<div class="content"><h1>{_escape(title)}</h1>'
        + "".join(f"<p>{_escape(p)}</p>" for p in paragraphs)
        + "</div>",
        "related": f'<div class="box-r"><div class="h">{t.related_title}</div>{items}</div>',
        "newsletter": f'<div class="box-n"><div>{t.newsletter}</div><input name="e"><div class="btn">Send</div></div>',
        "footer": f'<div class="bottom">© {year} {t.company}. All rights reserved. Privacy · Terms · Imprint</div>',
    }
    body = "".join(blocks[name] for name in t.order)
    head = f'<head><meta charset="utf-8"><title>{_escape(title)}</title></head>'
    return f"<!DOCTYPE html><html>{head}<body>{body}</body></html>"


def build_div_sites(directory: Path, name: str = "divs.warc.gz") -> DivSites:
    """Write the five hosts' 101 pages as one WARC in `directory`.

    A page's title is its first paragraph's first six words and its host;
    its related links are the titles of the next four pages of its host
    (fewer on the small hosts), so each title is on five pages."""
    pool = known_paragraphs(400, shortest=200, longest=1500)[
        ::-1
    ]  # from the end: `web_site`'s pages take theirs from the start
    texts = iter(pool)
    chosen = {host: [[next(texts) for _ in range(3)] for _ in range(count)] for host, count in HOST_PAGES.items()}
    shared = chosen["shop-example.com"][0][0]
    chosen["news.example.net"][0][1] = shared
    quoted = chosen["blog.example.io"][4][0]
    chosen["blog.example.io"][9][2] = quoted
    records, paragraphs, titles = [], {}, {}
    for host, pages in chosen.items():
        names = [f"{' '.join(page[0].split()[:6])} ({host})" for page in pages]
        for index, page in enumerate(pages):
            prefix = "www." if host == "shop-example.com" and index % 2 else ""
            url = f"https://{prefix}{host}/articles/{index}"
            others = dict.fromkeys((index + j) % len(pages) for j in range(1, 5))
            related = [names[i] for i in others if i != index]
            html = div_page(host, names[index], page, related, year=2023 + index % 2).encode("utf-8")
            records.append(WarcRecord("response", url, http_response(html)))
            paragraphs[url], titles[url] = page, names[index]
    shop = [f"{' '.join(page[0].split()[:6])} (shop-example.com)" for page in chosen["shop-example.com"]]
    for index, tag in enumerate(("sale", "new")):  # index pages: a heading and links, nothing of their own
        url = f"https://shop-example.com/tag/{tag}"
        html = div_page("shop-example.com", f"Tag: {tag}", [], shop[4 * index : 4 * index + 4], year=2024)
        records.append(WarcRecord("response", url, http_response(html.encode("utf-8"))))
        paragraphs[url], titles[url] = [], f"Tag: {tag}"
    note = next(p for p in pool[3 * sum(HOST_PAGES.values()) :] if len(p) < 320)
    url = "https://blog.example.io/notes/short"  # one short paragraph among the whole template
    html = div_page("blog.example.io", "A short note", [note], [], year=2024)
    records.append(WarcRecord("response", url, http_response(html.encode("utf-8"))))
    paragraphs[url], titles[url] = [note], "A short note"
    return DivSites(
        warc=write_warc(directory / name, records),
        paragraphs=paragraphs,
        titles=titles,
        shared_paragraph=shared,
        quoted_paragraph=quoted,
    )
