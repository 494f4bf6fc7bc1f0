"""Web pages from the running Python: its standard library's documentation rendered to HTML by `pydoc`, as a WARC.

The demo's web source. It needs no network, yet the pages are real HTML (the
tables, navigation bars and link lists pydoc puts around each module's text),
so the demo exercises the same path as a crawl: WARC → `extract` → documents.

Modules: `modules` when given, else the names in `sys.stdlib_module_names`,
sorted, without private ones (`_x`) and those with side effects, a GUI or the
rendering process's own state (`SKIPPED_MODULES`); a module this Python cannot
import, or that resolves outside the standard library, is left out; the first
`max_pages` that render are kept. Each page is `pydoc.html.page` of one module,
stored as an HTTP 200 `text/html; charset=utf-8` response at
`http://pydoc.local/<module>.html` in `<out>/pydoc.warc.gz` (one gzip member per
record, written atomically), with `<out>/stats.json`: `{"pages", "html_bytes",
"warc_bytes", "modules"}`.

A page is a function of the config, whose `python` names the interpreter
(`stdlib_source.PythonIdentity`), and of nothing else on the machine:

- the pages are rendered in a fresh interpreter that sees only the standard
  library (`stdlib_source.run_stdlib_only`). In the caller's process pydoc
  would document module data left by what the process did before
  (`aifc.__warningregistry__ = {'version': 7}` in one process, 89 in another),
  and `import distutils` would give setuptools' copy inside the virtualenv
  (its `distutils-precedence.pth`), whose path and code differ per install;
- its environment is fixed (`STDLIB_ENV`): `cgi` prints `os.environ` in full,
  which would put the caller's variables, secrets included, into the corpus,
  and `time` prints the time zone;
- the install's paths pydoc prints (a module's file link, `site.PREFIXES`,
  `platform.architecture`'s default executable) become `$STDLIB`, `$PREFIX`,
  `$PYTHON` (`neutral_paths`), and memory addresses in reprs become `0x0`.

Example: `build_pydoc_warc(PydocWarcConfig(max_pages=2), out)` writes the
pages of `abc` and `aifc` (Python 3.11) and returns `{"pages": 2, ...}`; the
`abc` page links its source as `file:$STDLIB/abc.py`.
"""

import contextlib
import io
import pydoc
import re
import sys
import sysconfig
import urllib.parse
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

from tootsie.corpora.stdlib_source import INSTALL_DIRS, PythonIdentity, python_identity, run_stdlib_only
from tootsie.corpora.warc_write import WarcRecord, http_response, write_warc
from tootsie.datakit.stats import STATS_FILE
from tootsie.jsonfile import write_json_atomic

SKIPPED_MODULES = frozenset({"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "sys"})
"""Left out: side effects on import (`antigravity` opens a browser, `this` prints), GUIs, and `sys`, whose data
is the rendering process itself (its argv, loaded modules and paths), not documentation."""
URL_PREFIX = "http://pydoc.local/"
WARC_NAME = "pydoc.warc.gz"


@dataclass(frozen=True)
class PydocWarcConfig:
    """Which module pages to render, and which Python renders them."""

    max_pages: int = 100
    """Module pages to render (the first in name order that import and render here)."""
    modules: tuple[str, ...] = ()
    """Standard-library modules to render, in this order; empty renders the public stdlib in name order."""
    python: PythonIdentity = field(default_factory=python_identity)
    """The interpreter whose documentation is rendered (another Python gets another output path)."""

    def __post_init__(self) -> None:
        if self.max_pages <= 0:
            raise ValueError(f"max_pages must be positive, got {self.max_pages=}; give the number of pages to render")
        unknown = [name for name in self.modules if name.split(".")[0] not in sys.stdlib_module_names]
        if unknown:
            raise ValueError(f"modules must be standard-library modules, got {unknown}; see sys.stdlib_module_names")


OBJECT_ADDRESS = re.compile(r"(?<![0-9A-Za-z-])(?:0x)?[0-9a-f]{12}(?![0-9A-Za-z])")
"""Memory addresses in reprs (`<object object at 0x7ff540fa4160>`, `<PyDLL 'None', handle 7f1278d9a2e0>`): they
change from process to process, so a page shows each as `0x0` and the step's output is the same wherever it runs
(not after a `-`: the last group of a UUID, `NAMESPACE_DNS = UUID('6ba7b810-...-00c04fd430c8')`, is data)."""


def stdlib_dirs() -> tuple[Path, ...]:
    """The directories the standard library is read from (pure-Python and platform-specific)."""
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(Path(paths[key]).resolve() for key in ("stdlib", "platstdlib")))


def from_stdlib(module: ModuleType) -> bool:
    """True when `module` is built in, frozen, or a file in the stdlib directories (not their site-packages).

    In a process with `site`, `import distutils` gives setuptools' copy in site-packages: that page is left out."""
    file = getattr(module, "__file__", None)
    if file is None:
        return True
    path = Path(file).resolve()
    return any(
        path.is_relative_to(root) and not INSTALL_DIRS.intersection(path.relative_to(root).parts)
        for root in stdlib_dirs()
    )


def path_markers() -> list[tuple[str, str, bool]]:
    """`(path, marker, quoted_only)` for the paths of this install that pydoc prints, longest path first.

    Prefixes are replaced only as whole quoted strings (`site.PREFIXES = ['$PREFIX']`): a prefix such as `/usr`
    also starts paths in docstrings (`/usr/local`) that are text, not this install."""
    paths = sysconfig.get_paths()
    markers: dict[str, tuple[str, bool]] = {}
    for path, marker in (
        (sys.executable, "$PYTHON"),
        (paths["stdlib"], "$STDLIB"),
        (paths["platstdlib"], "$PLATSTDLIB"),
    ):
        markers.setdefault(path, (marker, False))
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        markers.setdefault(prefix, ("$PREFIX", True))
    return sorted(((path, *marker) for path, marker in markers.items() if path), key=lambda m: -len(m[0]))


def neutral_paths(html: str) -> str:
    """`html` with this install's paths (raw, HTML-escaped and URL-quoted) replaced by markers (`path_markers`)."""
    for path, marker, quoted_only in path_markers():
        for form in dict.fromkeys((path, pydoc.html.escape(path), urllib.parse.quote(path))):
            pattern = "(?<=['\"])" + re.escape(form) + "(?=['\"])" if quoted_only else re.escape(form) + r"(?![\w.-])"
            html = re.sub(pattern, marker, html)  # markers hold no backslash
    return html


def page_modules(modules: tuple[str, ...]) -> list[str]:
    """The modules to render: `modules`, or the public stdlib modules in name order."""
    if modules:
        return list(modules)
    return [
        name for name in sorted(sys.stdlib_module_names) if not name.startswith("_") and name not in SKIPPED_MODULES
    ]


def pydoc_pages(limit: int, modules: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """Yield `(module, html)` for up to `limit` stdlib modules (`page_modules`), as pydoc renders them here.

    In this process; `rendered_pages` renders them in a fresh stdlib-only interpreter (what the step uses)."""
    count = 0
    for name in page_modules(modules):
        if count >= limit:
            return
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                module = import_module(name)
                if not from_stdlib(module):
                    continue
                html = pydoc.html.page(pydoc.describe(module), pydoc.html.document(module, name))
        except Exception:  # noqa: BLE001 - a module this Python cannot import or document is left out
            continue
        count += 1
        yield name, OBJECT_ADDRESS.sub("0x0", neutral_paths(html))


def page_list(request: dict[str, Any]) -> list[list[str]]:
    """`pydoc_pages` as JSON-ready `[module, html]` pairs (what `rendered_pages` runs in the fresh interpreter)."""
    return [[name, html] for name, html in pydoc_pages(int(request["limit"]), tuple(request["modules"]))]


RENDER_TIMEOUT_S = 600


def rendered_pages(limit: int, modules: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """`pydoc_pages(limit, modules)` rendered in a fresh interpreter that sees only the standard library.

    Every caller gets the same pages, whatever its environment, process history or installed packages."""
    request = {"limit": limit, "modules": list(modules)}
    pages = run_stdlib_only("tootsie.corpora.pydoc_source", "page_list", request, timeout_s=RENDER_TIMEOUT_S)
    return [(name, html) for name, html in pages]


def build_pydoc_warc(config: PydocWarcConfig, output_path: str) -> dict[str, Any]:
    """Write `<output_path>/pydoc.warc.gz` (one 200 text/html response per module page) and its counts in stats.json."""
    modules: list[str] = []
    html_bytes = 0

    def records() -> Iterator[WarcRecord]:
        nonlocal html_bytes
        for name, html in rendered_pages(config.max_pages, config.modules):
            body = html.encode("utf-8")
            modules.append(name)
            html_bytes += len(body)
            yield WarcRecord("response", f"{URL_PREFIX}{name}.html", http_response(body))

    warc = write_warc(Path(output_path) / WARC_NAME, records())
    stats = {"pages": len(modules), "html_bytes": html_bytes, "warc_bytes": warc.stat().st_size, "modules": modules}
    write_json_atomic(Path(output_path) / STATS_FILE, stats)
    return stats
