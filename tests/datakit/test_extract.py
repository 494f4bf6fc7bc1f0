"""Extract: known paragraphs come back out of a WARC, boilerplate does not, and every refused record has a reason."""

from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.datakit.web_site import (
    BOILERPLATE_MARKERS,
    LATIN1_PARAGRAPH,
    MAX_HTML_BYTES,
    REJECTED,
    build_site,
    page_html,
)
from tests.two_prefixes import run_under_two_prefixes
from tootsie.corpora.warc_write import WarcRecord, http_response, write_warc
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract
from tootsie.datakit.html_extract import extract_main, minimal_html_to_markdown
from tootsie.datakit.ids import content_id
from tootsie.datakit.normalize import DOCUMENT_SCHEMA
from tootsie.datakit.parquet_io import parquet_files
from tootsie.executor import Step
from tootsie.executor.manifest import differing

INLINE = EngineConfig(workers=1, progress=False)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _extract(site_warc, out, **fields) -> tuple[dict, list[dict]]:
    config = ExtractConfig(inputs=(str(site_warc),), max_html_bytes=MAX_HTML_BYTES, engine=INLINE, **fields)
    stats = extract(config, str(out))
    rows = [row for path in parquet_files(out) for row in pq.read_table(path).to_pylist()]
    return stats, rows


@pytest.mark.parametrize(
    ("extractor", "fmt"), [("resiliparse", "text"), ("resiliparse", "markdown"), ("trafilatura", "text")]
)
def test_paragraphs_recovered_boilerplate_removed(tmp_path, extractor, fmt) -> None:
    site = build_site(tmp_path)
    stats, rows = _extract(site.warc, tmp_path / "out", extractor=extractor, format=fmt)
    by_url = {row["url"]: _flat(row["text"]) for row in rows}
    known = [(url, p) for url, paragraphs in site.paragraphs.items() for p in paragraphs]
    recovered = sum(_flat(p) in by_url.get(url, "") for url, p in known)
    assert recovered / len(known) >= 0.95, f"{recovered} of {len(known)} paragraphs recovered"
    with_boilerplate = [row["url"] for row in rows if any(m in _flat(row["text"]) for m in BOILERPLATE_MARKERS)]
    assert len(with_boilerplate) <= 0.05 * len(rows), with_boilerplate
    assert LATIN1_PARAGRAPH in by_url[site.latin1_url]
    assert stats["rejected"] == REJECTED
    assert stats["input_records"] == len(site.paragraphs) + sum(REJECTED.values())
    assert stats["output_docs"] == len(rows) == len(site.paragraphs)
    assert stats["total"] == stats["kept"] + sum(stats["dropped"].values())


def test_documents_have_normalize_schema_plus_web_fields(tmp_path) -> None:
    site = build_site(tmp_path, pages=3)
    _, rows = _extract(site.warc, tmp_path / "out")
    table = pq.read_table(parquet_files(tmp_path / "out")[0])
    assert table.schema.names == [*DOCUMENT_SCHEMA.names, "url", "title", "date"]
    first = next(row for row in rows if row["url"].endswith("/page/0"))
    assert first["title"] == "Topic 0 | Example Docs"
    assert first["date"] == "2024-05-01T12:00:00+00:00"
    assert first["source_id"].startswith("urn:uuid:")
    assert all(row["id"] == content_id(row["text"]) for row in rows)


def test_duplicate_pages_and_html_directory(tmp_path) -> None:
    page = page_html("Same", [LATIN1_PARAGRAPH]).encode()
    write_warc(
        tmp_path / "in" / "a.warc",
        [WarcRecord("response", f"http://x/{i}", http_response(page)) for i in range(2)],
    )
    (tmp_path / "in" / "pages").mkdir()
    (tmp_path / "in" / "pages" / "latin.html").write_bytes(
        page_html("Köln", [LATIN1_PARAGRAPH + " Noch einmal."], charset="latin-1").encode("latin-1")
    )
    (tmp_path / "in" / "pages" / "undeclared.htm").write_bytes(
        page_html("Köln", [LATIN1_PARAGRAPH + " Dritte Fassung."]).replace('<meta charset="utf-8">', "").encode()
    )
    stats = extract(ExtractConfig(inputs=(str(tmp_path / "in"),), engine=INLINE), str(tmp_path / "out"))
    assert stats["rejected"] == {"exact_duplicate": 1}
    rows = [row for path in parquet_files(tmp_path / "out") for row in pq.read_table(path).to_pylist()]
    texts = {row["url"].rsplit("/", 1)[-1]: row for row in rows}
    assert LATIN1_PARAGRAPH + " Noch einmal." in texts["latin.html"]["text"]
    assert LATIN1_PARAGRAPH + " Dritte Fassung." in texts["undeclared.htm"]["text"]  # detected, not declared
    assert texts["latin.html"]["date"] is None


def test_markdown_keeps_headings_lists_code_tables() -> None:
    body = (
        "<html><head><title>Guide</title></head><body><nav><a href=/>Home</a><a href=/b>Blog</a></nav><main><article>"
        "<h1>Install guide</h1><p>This guide explains how the tool is installed on a fresh machine, step by step.</p>"
        "<h2>Steps</h2><ol><li>Download the archive from the release page of the project</li>"
        "<li>Unpack the archive into a directory of your choice on the disk</li></ol>"
        "<pre><code>tar xf tool.tar.gz\ncd tool &amp;&amp; make</code></pre>"
        "<table><tr><th>option</th><th>meaning</th></tr><tr><td>-v</td><td>verbose</td></tr></table>"
        "<p>After these steps the tool is ready to use; run it with the verbose flag to see more output.</p>"
        "</article></main><footer>© Example</footer></body></html>"
    )
    text = extract_main(body, "resiliparse", "markdown").text
    assert text.startswith("# Install guide")
    assert "\n## Steps\n" in text
    assert "1. Download the archive" in text and "2. Unpack the archive" in text
    assert "```\ntar xf tool.tar.gz\ncd tool && make\n```" in text
    assert "| option | meaning |\n|---|---|\n| -v | verbose |" in text
    plain = extract_main(body, "resiliparse", "text").text
    assert "#" not in plain and "Install guide" in plain and "Home" not in plain
    assert "# Install guide" in extract_main(body, "trafilatura", "markdown").text


def test_whole_page_is_in_each_engines_line_shapes() -> None:
    """The site stage counts template lines on the whole page: in the shapes the engine's own text cuts them."""
    body = (
        "<html><head><title>T</title><style>p {}</style></head><body>"
        '<div class="top"><a href="/">Home</a> <a href="/d">Deals</a></div><div class="content">'
        + "<p>A paragraph long enough to be the main content of this page, and then some more words.</p>" * 3
        + '</div><div class="f">© 2024 Example. <a href="/p">Privacy</a></div><script>var x = 1;</script></body></html>'
    )
    assert extract_main(body, "trafilatura", "text").page == ""  # rendered only when asked
    resiliparse = extract_main(body, "resiliparse", "text", whole_page=True).page.split("\n")
    assert "Home Deals" in resiliparse and "© 2024 Example. Privacy" in resiliparse
    lines = extract_main(body, "trafilatura", "text", whole_page=True).page.split("\n")
    # block lines (trafilatura's main path) and text nodes (its whole-body fallback), never a script's text
    assert {"Home Deals", "© 2024 Example. Privacy", "Home", "Deals", "© 2024 Example.", "Privacy"} <= set(lines)
    assert not any("var x" in line for line in lines)


def test_minimal_html_nested_lists() -> None:
    minimal = "<ul>\n  <li>outer\n  <ol>\n    <li>inner one</li>\n    <li>inner two</li>\n  </ol></li>\n</ul>"
    assert minimal_html_to_markdown(minimal) == "- outer\n  1. inner one\n  2. inner two"


def test_bad_config_names_the_field() -> None:
    with pytest.raises(ValueError, match="extractor must be one of"):
        ExtractConfig(inputs=("x.warc",), extractor="lynx")
    with pytest.raises(ValueError, match="format must be one of"):
        ExtractConfig(inputs=("x.warc",), format="rst")


@dataclass(frozen=True)
class PagesConfig:
    """How many HTML pages the pages step writes."""

    pages: int = 2


def write_pages(config: PagesConfig, output_path: str) -> None:
    """HTML files in a subdirectory of the step's output."""
    (Path(output_path) / "site").mkdir()
    for i in range(config.pages):
        (Path(output_path) / "site" / f"p{i}.html").write_text(page_html(f"Page {i}", [f"{LATIN1_PARAGRAPH} {i}."]))


def test_html_files_are_named_relative_to_their_input_under_any_prefix(tmp_path, monkeypatch) -> None:
    pages = Step("web/pages", write_pages, PagesConfig())
    extracted = Step("web/extracted", extract, ExtractConfig(inputs=(pages.ref("site"),), engine=INLINE))
    (graph, out, left), (_, _, right) = run_under_two_prefixes(extracted, tmp_path)
    assert differing(left, right) == []
    rows = [row for path in parquet_files(out) for row in pq.read_table(path).to_pylist()]
    site = f"{graph.node(pages).id}/site"
    assert sorted(row["url"] for row in rows) == [f"{site}/p0.html", f"{site}/p1.html"]
    assert all(row["source_id"] == row["url"] for row in rows)
    monkeypatch.chdir(tmp_path / "a" / graph.node(pages).id)  # by hand, a relative input stays as given
    extract(ExtractConfig(inputs=("site/p1.html",), engine=INLINE), str(tmp_path / "by-hand"))
    [row] = [row for path in parquet_files(tmp_path / "by-hand") for row in pq.read_table(path).to_pylist()]
    assert row["url"] == row["source_id"] == "site/p1.html"
