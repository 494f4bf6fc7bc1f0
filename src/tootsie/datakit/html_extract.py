"""Main-content extraction: an HTML page to its title and its main text, as plain text or Markdown.

Two maintained extractors, both removing boilerplate (navigation, footers,
cookie banners, link lists) with their own heuristics:

- `resiliparse` (default; DCLM's and Marin's extractor, fast C++):
  `extract_plain_text(main_content=True)`. In `markdown` format it runs with
  `preserve_formatting="minimal_html"` (headings, paragraphs, lists, `<pre>`,
  line breaks as tags; table rows as tab-separated lines) and `_MinimalHtml`
  turns that small tag set into Markdown: `#` headings, `-` / `1.` lists,
  fenced code blocks and pipe tables.
- `trafilatura`: `trafilatura.extract` with tables, in its `txt` or
  `markdown` output.

The title is the page's `<title>` (resiliparse's parser for both engines).
Non-breaking spaces (`&nbsp;`, which pydoc and many sites use for indentation)
become plain spaces: a rendering device, not text, and as U+00A0 they cost a
byte-level tokenizer two bytes per space (the demo's final code BPB was 1.722
with them in its prose, 1.604 without; docs/demo.md).

For the site-boilerplate stage, `extract_main(..., whole_page=True)` also
renders the **whole page** (`Extracted.page`) in the line shapes the engine's
text can take, so that a template line the extractor kept on one page has the
same line key (`site_lines`) as that line on the site's other pages, where the
extractor dropped it:

- `resiliparse`: `extract_plain_text(main_content=False)` on the tree already
  parsed, with the same formatting (Markdown for `markdown`): the same
  renderer, so the same lines.
- `trafilatura`: its text has two line shapes. Its main path, jusText and
  readability write a block element a line, inline children joined
  (resiliparse's whole-page text has these lines); when the main content is
  short it falls back to the whole body, one text node a line (its
  `baseline`: a navigation bar of `<a>`s becomes a line per link). So its page
  is both: resiliparse's whole-page text, then the body's text nodes
  (`trafilatura.load_html`, its own lxml parse), trimmed, one a line, without
  `<script>`, `<style>`, `<noscript>` and `<template>`.

Both need the `web` extra's modules (`ENGINE_MODULES`); a missing one is a
`MissingExtra` naming `pip install "tootsie[web]"`, never a page's
`extract_error`.

Example: `extract_main("<h1>Hi</h1><p>long text...</p><footer>(c)</footer>",
"resiliparse", "markdown")` gives text starting `# Hi`.
"""

import functools
import re
from html.parser import HTMLParser
from types import ModuleType
from typing import NamedTuple

from tootsie.extras import import_extra

ENGINE_MODULES = {"resiliparse": ("resiliparse",), "trafilatura": ("resiliparse", "trafilatura", "lxml_html_clean")}
"""Engine -> the modules of the `web` extra it imports (both parse titles with resiliparse; jusText, which
trafilatura imports, needs lxml_html_clean)."""
ENGINES = tuple(ENGINE_MODULES)
_UNRENDERED = ("script", "style", "noscript", "template")  # elements whose text a browser never shows
FORMATS = ("text", "markdown")


class Extracted(NamedTuple):
    """A page's title and main content, and with `whole_page=True` its whole text (module docstring)."""

    title: str
    text: str
    page: str = ""


@functools.cache  # one import check per process, not one per page
def _web_module(name: str) -> ModuleType:
    """Import a module of the `web` extra, or raise MissingExtra naming it."""
    return import_extra(name, extra="web", purpose="HTML extraction")


def extract_main(html: str, engine: str, fmt: str, *, whole_page: bool = False) -> Extracted:
    """The main content of `html` with `engine` in format `fmt` ("text" or "markdown"), and the page title; with
    `whole_page`, also the whole page's text in the engine's line shapes (module docstring)."""
    parser = _web_module("resiliparse.parse.html")
    tree = parser.HTMLTree.parse(html)
    title = " ".join((tree.title or "").split())
    page = ""
    if engine == "resiliparse":
        text = _resiliparse_text(tree, fmt, main_content=True)
        page = _resiliparse_text(tree, fmt, main_content=False) if whole_page else ""
    elif engine == "trafilatura":
        trafilatura = _web_module("trafilatura")
        text = (
            trafilatura.extract(
                html,
                output_format="markdown" if fmt == "markdown" else "txt",
                include_tables=True,
                include_formatting=fmt == "markdown",
                include_comments=False,
            )
            or ""
        )
        if whole_page:
            page = _resiliparse_text(tree, "text", main_content=False) + "\n" + _text_nodes(html)
    else:
        raise ValueError(f"unknown extraction engine {engine!r}; use one of {ENGINES}")
    return Extracted(title=title, text=text.replace("\u00a0", " ").strip(), page=page.replace("\u00a0", " "))


def _resiliparse_text(tree: object, fmt: str, *, main_content: bool) -> str:
    """resiliparse's text of the parsed `tree` in format `fmt`: its main content, or the whole page."""
    html2text = _web_module("resiliparse.extract.html2text")
    formatting: bool | str = "minimal_html" if fmt == "markdown" else True
    text = html2text.extract_plain_text(
        tree, main_content=main_content, preserve_formatting=formatting, alt_texts=False
    )
    return minimal_html_to_markdown(text) if fmt == "markdown" else text


def _text_nodes(html: str) -> str:
    """The text nodes of the body of `html`, whitespace collapsed, one a line (trafilatura's whole-body fallback)."""
    tree = _web_module("trafilatura").load_html(html)  # trafilatura's own parse (lxml), so its text nodes
    body = None if tree is None else tree.find(".//body")
    if body is None:
        return ""
    for element in list(body.iter(*_UNRENDERED)):
        element.drop_tree()  # the element and its text; its tail (text after it) stays
    return "\n".join(line for node in body.itertext() if (line := " ".join(node.split())))


def minimal_html_to_markdown(minimal: str) -> str:
    """Markdown from resiliparse's `minimal_html` output (h1-h6, p, ul, ol, li, pre, br; tab-separated table rows)."""
    converter = _MinimalHtml()
    converter.feed(minimal)
    converter.close()
    return re.sub(r"\n{3,}", "\n\n", "".join(converter.out)).strip()


class _MinimalHtml(HTMLParser):
    """Streams the minimal tag set into Markdown pieces in `out`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.lists: list[list[int]] = []  # per open list: [ordered (0/1), next item number]
        self.in_pre = False
        self.table_rows = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "p":
            self.out.append("\n\n")
        elif tag in ("ul", "ol"):
            self.lists.append([int(tag == "ol"), 1])
            self.out.append("\n" if len(self.lists) == 1 else "")
        elif tag == "li":
            ordered, number = self.lists[-1] if self.lists else [0, 1]
            if self.lists:
                self.lists[-1][1] += 1
            self.out.append("\n" + "  " * max(len(self.lists) - 1, 0) + (f"{number}. " if ordered else "- "))
        elif tag == "pre":
            self.in_pre = True
            self.out.append("\n\n```\n")
        elif tag == "br":
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self.in_pre = False
            self.out.append("\n```\n\n")
        elif tag in ("ul", "ol"):
            if self.lists:
                self.lists.pop()
            self.out.append("" if self.lists else "\n\n")
        elif tag == "p" or (len(tag) == 2 and tag[0] == "h" and tag[1] in "123456"):
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.in_pre:
            self.out.append(data)
            return
        if not data.strip():  # indentation between block tags; the tags place their own line breaks
            return
        lines = data.split("\n")
        while not lines[-1].strip():  # data is not blank (checked above), so a line with text remains
            lines.pop()
        while not lines[0].strip():
            lines.pop(0)
        for index, line in enumerate(lines):
            cells = [cell.strip() for cell in line.split("\t") if cell.strip()]
            if "\t" in line and cells:
                self.out.append(("\n" if self.table_rows == 0 else "") + "| " + " | ".join(cells) + " |\n")
                if self.table_rows == 0:
                    self.out.append("|" + "---|" * len(cells) + "\n")
                self.table_rows += 1
                continue
            if line.strip():
                self.table_rows = 0
            self.out.append(("\n" if index else "") + (" ".join(line.split()) if line.strip() else ""))
