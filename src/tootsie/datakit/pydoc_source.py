"""Web pages from the running Python: its standard library's documentation rendered to HTML by `pydoc`, as a WARC.

The demo's web source. It needs no network, yet the pages are real HTML (the
tables, navigation bars and link lists pydoc puts around each module's text),
so the demo exercises the same path as a crawl: WARC → `extract` → documents.

Modules: the names in `sys.stdlib_module_names`, sorted; private ones (`_x`)
and those with side effects or a GUI (`SKIPPED_MODULES`) are left out, as is a
module this Python cannot import; the first `max_pages` that render are kept.
Each page is `pydoc.html.page` of one module, stored as an HTTP 200
`text/html; charset=utf-8` response at `http://pydoc.local/<module>.html` in
`<out>/pydoc.warc.gz` (one gzip member per record, written atomically), with
`<out>/stats.json`: `{"pages", "html_bytes", "warc_bytes", "modules"}`. The
config records the Python version, so another interpreter gets another path.
The pages are rendered in a fresh interpreter (`rendered_pages`, hash seed 0):
pydoc documents module data that depends on what the process did before
(`aifc.__warningregistry__ = {'version': 7}` in one process, 89 in another),
so rendering in the caller's process would make the output differ between a
local run and a Ray worker. Its environment is fixed too (`RENDER_ENV`): the
`cgi` page prints `os.environ` in full, which would put the caller's
variables, secrets included, into the corpus.

Example: `build_pydoc_warc(PydocWarcConfig(max_pages=2), out)` writes the
pages of `abc` and `aifc` (Python 3.11) and returns `{"pages": 2, ...}`.
"""

import contextlib
import io
import json
import os
import platform
import pydoc
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

from tootsie.datakit.warc_write import WarcRecord, http_response, write_warc
from tootsie.jsonfile import write_json_atomic

SKIPPED_MODULES = frozenset({"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"})
URL_PREFIX = "http://pydoc.local/"
WARC_NAME = "pydoc.warc.gz"


@dataclass(frozen=True)
class PydocWarcConfig:
    """How many module pages to render, and which Python renders them."""

    max_pages: int = 100
    """Module pages to render (the first in name order that import and render here)."""
    python_version: str = field(default_factory=platform.python_version)
    """Recorded so that a different interpreter's documentation gets a different output path."""

    def __post_init__(self) -> None:
        if self.max_pages <= 0:
            raise ValueError(f"max_pages must be positive, got {self.max_pages=}; give the number of pages to render")


OBJECT_ADDRESS = re.compile(r"(?<![0-9A-Za-z])(?:0x)?[0-9a-f]{12}(?![0-9A-Za-z])")
"""Memory addresses in reprs (`<object object at 0x7ff540fa4160>`, `<PyDLL 'None', handle 7f1278d9a2e0>`): they
change from process to process, so a page shows each as `0x0` and the step's output is the same wherever it runs."""


def pydoc_pages(limit: int) -> Iterator[tuple[str, str]]:
    """Yield `(module, html)` for up to `limit` standard-library modules, as pydoc renders them, in name order."""
    count = 0
    for name in sorted(sys.stdlib_module_names):
        if count >= limit:
            return
        if name.startswith("_") or name in SKIPPED_MODULES:
            continue
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                module = import_module(name)
                html = pydoc.html.page(pydoc.describe(module), pydoc.html.document(module, name))
        except Exception:  # noqa: BLE001 - a module this Python cannot import or document is left out
            continue
        count += 1
        yield name, OBJECT_ADDRESS.sub("0x0", html)


RENDER_TIMEOUT_S = 600
RENDER_ENV = {"PYTHONHASHSEED": "0", "LANG": "C.UTF-8", "PATH": os.defpath}
"""The whole environment of the rendering interpreter: pydoc prints some defaults verbatim (`cgi` shows
`environ=environ({...})`), so the caller's variables, secrets included, must never reach the pages."""


def print_pages(limit: int) -> None:
    """Write `pydoc_pages(limit)` to stdout as JSON lines `[module, html]` (what `rendered_pages` runs)."""
    for name, html in pydoc_pages(limit):
        sys.stdout.write(json.dumps([name, html]) + "\n")


def rendered_pages(limit: int) -> list[tuple[str, str]]:
    """`pydoc_pages(limit)` rendered in a fresh interpreter with a fixed environment (`RENDER_ENV`).

    Every caller gets the same pages, and none of its environment variables."""
    script = f"from tootsie.datakit.pydoc_source import print_pages; print_pages({int(limit)})"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=RENDER_TIMEOUT_S,
        env=RENDER_ENV,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"rendering the pydoc pages failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return [(name, html) for name, html in map(json.loads, done.stdout.splitlines())]


def build_pydoc_warc(config: PydocWarcConfig, output_path: str) -> dict[str, Any]:
    """Write `<output_path>/pydoc.warc.gz` (one 200 text/html response per module page) and its counts in stats.json."""
    modules: list[str] = []
    html_bytes = 0

    def records() -> Iterator[WarcRecord]:
        nonlocal html_bytes
        for name, html in rendered_pages(config.max_pages):
            body = html.encode("utf-8")
            modules.append(name)
            html_bytes += len(body)
            yield WarcRecord("response", f"{URL_PREFIX}{name}.html", http_response(body))

    warc = write_warc(Path(output_path) / WARC_NAME, records())
    stats = {"pages": len(modules), "html_bytes": html_bytes, "warc_bytes": warc.stat().st_size, "modules": modules}
    write_json_atomic(Path(output_path) / "stats.json", stats)
    return stats
