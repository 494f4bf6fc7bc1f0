"""A real-text corpus from the running Python: its standard library as code, its docstrings as prose.

This is the demo's "download" stage: it needs no network, yet the text is real
(written by people, with real structure and repetition). Two sources:

- `code`: each `.py` file of the standard library (tests excluded) is a document;
- `prose`: per module, its docstrings joined into one document, plus each
  `pydoc` topic (the language reference text `help()` shows).

Output: `<out>/<source>/docs-00000.jsonl.gz`, one JSON object per line with
`id` (the module path or topic name) and `text`.

The stdlib sources (this one, `pydoc_source`, `stdlib_chat`) read the
interpreter, so its identity is part of their hashed config and nothing else
of the machine reaches their output (docs/reproducibility.md):

- `PythonIdentity` names the interpreter: implementation, `sys.version` (release,
  build date, compiler), platform, the versions of the system libraries stdlib
  modules link and print (OpenSSL, SQLite, ...), and a digest of the stdlib
  directory. It holds no path: the same Python installed elsewhere gives the
  same hash and the same output; another Python gives another hash.
- Files that describe the install rather than the library are never read:
  `site-packages`/`dist-packages` (third-party code), the build's
  `_sysconfigdata*.py` and `config-*` directory (absolute install paths,
  compiler flags), and `sitecustomize`/`usercustomize` (machine settings).
- Code that imports stdlib modules to document them runs in a fresh
  interpreter that sees only the standard library (`run_stdlib_only`: no
  `site`, so no `.pth` hacks such as setuptools' `distutils` shim, and a fixed
  environment), so what is installed beside Python cannot change a page.

Example: `StdlibSourceConfig(max_code_bytes=300_000)` reads the running
interpreter's stdlib; its config holds `python=PythonIdentity(implementation=
"cpython", version="3.11.7 (main, ...) [GCC ...]", platform="linux-x86_64", ...)`.
"""

import ast
import contextlib
import functools
import gzip
import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

from tootsie.errors import TootsieError

SKIPPED_DIRS = frozenset({"test", "tests", "idle_test", "lib2to3"})
"""Directories of the stdlib that are not read as code or prose (tests, and lib2to3's vendored grammar)."""
INSTALL_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
"""Directories inside the stdlib directory that hold what was installed beside Python, never read or digested."""
INSTALL_FILES = ("_sysconfigdata", "sitecustomize.py", "usercustomize.py")
"""File-name prefixes of the install's own settings (absolute paths, compiler flags), never read or digested."""
TEST_DIRS = frozenset({"test", "tests", "idle_test"})
LINKED_LIBRARIES = {
    "openssl": ("ssl", "OPENSSL_VERSION"),
    "sqlite": ("sqlite3", "sqlite_version"),
    "zlib": ("zlib", "ZLIB_RUNTIME_VERSION"),
    "ncurses": ("curses", "ncurses_version"),
    "expat": ("pyexpat", "EXPAT_VERSION"),
    "mpdec": ("decimal", "__libmpdec_version__"),
}
"""System libraries whose run-time version stdlib modules print (e.g. `sqlite3.sqlite_version` in its pydoc page):
name -> (module, attribute). An upgraded library changes pages without changing `sys.version`."""


def is_install_path(relative: Path) -> bool:
    """True for a path (relative to the stdlib directory) that describes the install rather than the library."""
    *dirs, name = relative.parts
    return (
        bool(INSTALL_DIRS.intersection(dirs))
        or any(part.startswith("config-") for part in dirs)
        or name.startswith(INSTALL_FILES)
    )


def stdlib_files(root: Path) -> list[Path]:
    """Every file of the stdlib directory `root` except the install's (`is_install_path`), sorted by path."""
    files = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in INSTALL_DIRS and not d.startswith("config-")]
        files += [Path(directory, name) for name in names]
    return sorted(path for path in files if not is_install_path(path.relative_to(root)))


def stdlib_sha256(root: Path) -> str:
    """Digest of a stdlib directory: every file's relative path and size, and the bytes of its non-test `.py` files.

    Sizes stand for the rest (extension modules, test files): which of them are installed changes which modules
    import and which submodules a package page lists."""
    digest = hashlib.sha256()
    for path in stdlib_files(root):
        relative = path.relative_to(root)
        digest.update(f"{relative.as_posix()}\0{path.stat().st_size}\0".encode())
        if path.suffix == ".py" and not TEST_DIRS.intersection(relative.parts):
            digest.update(path.read_bytes())
    return digest.hexdigest()


def linked_library_versions() -> tuple[tuple[str, str], ...]:
    """`(library, version)` of each of `LINKED_LIBRARIES`, "absent" where its module does not import here."""
    versions = []
    for library, (module, attribute) in sorted(LINKED_LIBRARIES.items()):
        try:
            versions.append((library, str(getattr(import_module(module), attribute))))
        except (ImportError, AttributeError):
            versions.append((library, "absent"))
    return tuple(versions)


@dataclass(frozen=True)
class PythonIdentity:
    """The interpreter a stdlib source reads, as its step's hash sees it: a different Python, a different path."""

    implementation: str
    """`sys.implementation.name`, e.g. "cpython"."""
    version: str
    """`sys.version`: the release, build date and compiler (C docstrings and constants come with the build)."""
    platform: str
    """`sys.platform` and the machine, e.g. "linux-x86_64" (errno, signal and socket constants differ)."""
    libraries: tuple[tuple[str, str], ...]
    """Run-time versions of the system libraries that stdlib modules print (`LINKED_LIBRARIES`)."""
    stdlib_sha256: str
    """`stdlib_sha256` of the interpreter's stdlib directory (distribution patches, missing modules)."""


@functools.cache
def python_identity() -> PythonIdentity:
    """The running interpreter's identity (computed once per process: ~0.1 s, mostly the stdlib digest)."""
    return PythonIdentity(
        implementation=sys.implementation.name,
        version=sys.version,
        platform=f"{sys.platform}-{platform.machine()}",
        libraries=linked_library_versions(),
        stdlib_sha256=stdlib_sha256(Path(sysconfig.get_paths()["stdlib"])),
    )


STDLIB_ENV = {"PYTHONHASHSEED": "0", "PYTHONUTF8": "1", "LANG": "C.UTF-8", "TZ": "UTC", "PATH": os.defpath}
"""The whole environment of `run_stdlib_only`'s interpreter. Pages print some of it verbatim (`cgi` and `os` show
`os.environ`, `time` its time zone), so the caller's variables, secrets included, never reach them."""
STDLIB_ONLY_FLAGS = ("-S", "-s", "-P")
"""No `site` (no site-packages, no `.pth` files), no user site, no script directory on `sys.path`. Not `-E`/`-I`:
they would drop `PYTHONHASHSEED`, and set reprs would change order from run to run."""
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The directory holding the `tootsie` package: on `sys.path` only while the child imports its entry point."""


def stdlib_only_main(module: str, function: str, argument: Any) -> None:
    """The child's side of `run_stdlib_only`: drop tootsie from `sys.path`, call, write the JSON result to stdout."""
    call = getattr(import_module(module), function)
    sys.path.remove(PACKAGE_ROOT)
    sys.path_importer_cache.pop(PACKAGE_ROOT, None)
    with contextlib.redirect_stdout(io.StringIO()):
        result = call(argument)
    sys.stdout.write(json.dumps(result))


def run_stdlib_only(module: str, function: str, argument: Any, timeout_s: float = 600) -> Any:
    """`module.function(argument)` (JSON in, JSON out) in a fresh interpreter that sees only the standard library.

    The same interpreter as this one (`sys.executable`), with `STDLIB_ONLY_FLAGS` and `STDLIB_ENV`; the module
    must import nothing outside the stdlib (tootsie's own modules are found while it is imported, then removed)."""
    script = (
        f"import json, sys; sys.path.append({PACKAGE_ROOT!r}); "
        "from tootsie.corpora.stdlib_source import stdlib_only_main; "
        f"stdlib_only_main({module!r}, {function!r}, json.loads({json.dumps(argument)!r}))"
    )
    done = subprocess.run(
        [sys.executable, *STDLIB_ONLY_FLAGS, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=STDLIB_ENV,
        check=False,
    )
    if done.returncode != 0:
        raise TootsieError(f"{module}.{function} failed in the stdlib-only interpreter: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


@dataclass(frozen=True)
class StdlibSourceConfig:
    """Which standard library to read and how much of it."""

    stdlib_dir: str | None = None
    """Root of the standard library to read; None reads the running interpreter's (named by `python`, no path)."""
    python: PythonIdentity = field(default_factory=python_identity)
    """The interpreter that supplies the stdlib (when `stdlib_dir` is None) and the pydoc topics."""
    max_code_bytes: int = 4_000_000
    """Stop adding code files once this many bytes were taken (files in sorted path order)."""
    max_file_bytes: int = 200_000
    """Skip single files larger than this (generated tables, not code people wrote)."""
    min_docstring_chars: int = 40
    """Docstrings shorter than this are one-liners that add little prose."""

    def __post_init__(self) -> None:
        if self.max_code_bytes <= 0 or self.max_file_bytes <= 0:
            raise ValueError(
                "max_code_bytes and max_file_bytes must be positive,"
                f" got {self.max_code_bytes=}, {self.max_file_bytes=}"
            )

    @property
    def root(self) -> Path:
        """The stdlib directory read: `stdlib_dir`, or the running interpreter's."""
        return Path(self.stdlib_dir if self.stdlib_dir is not None else sysconfig.get_paths()["stdlib"])


def stdlib_python_files(root: Path, max_file_bytes: int) -> list[Path]:
    """The stdlib's `.py` files outside test, vendored and install directories, sorted by path."""
    return [
        path
        for path in stdlib_files(root)
        if path.suffix == ".py"
        and not SKIPPED_DIRS.intersection(path.relative_to(root).parts)
        and path.stat().st_size <= max_file_bytes
    ]


def module_docstrings(source: str, min_chars: int) -> list[str]:
    """The docstrings of a module, its classes and functions, in source order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    docs = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= min_chars:
                docs.append(doc)
    return docs


def iter_code_and_prose(config: StdlibSourceConfig) -> Iterator[tuple[str, str, str]]:
    """Yield `(source, id, text)` for every document of both sources."""
    root = config.root
    if not root.is_dir():
        raise TootsieError(f"stdlib_dir {root} is not a directory; pass the stdlib of an installed Python")
    code_bytes = 0
    for path in stdlib_python_files(root, config.max_file_bytes):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        doc_id = path.relative_to(root).as_posix()
        if code_bytes < config.max_code_bytes:
            code_bytes += len(text.encode("utf-8"))
            yield "code", doc_id, text
        docstrings = module_docstrings(text, config.min_docstring_chars)
        if docstrings:
            yield "prose", doc_id, "\n\n".join(docstrings)
    from pydoc_data.topics import topics

    for name in sorted(topics):
        yield "prose", f"pydoc-topic:{name}", topics[name]


def build_stdlib_corpus(config: StdlibSourceConfig, output_path: str) -> None:
    """Write the `code` and `prose` sources as gzipped JSONL under `output_path`.

    The gzip headers hold no time and no file name (`gzip.open` writes both: the clock and the temporary name,
    with its PID, would make every run's bytes differ)."""
    out = Path(output_path)
    writers: dict[str, io.TextIOWrapper] = {}
    tmp_paths: dict[str, Path] = {}
    with contextlib.ExitStack() as stack:
        for source, doc_id, text in iter_code_and_prose(config):
            if source not in writers:
                tmp_paths[source] = out / source / f".docs-00000.jsonl.gz.tmp-{os.getpid()}"
                tmp_paths[source].parent.mkdir(parents=True, exist_ok=True)
                handle = stack.enter_context(open(tmp_paths[source], "wb"))
                packed = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0))
                writers[source] = stack.enter_context(io.TextIOWrapper(packed, encoding="utf-8"))
            writers[source].write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    for source, tmp in tmp_paths.items():
        os.replace(tmp, out / source / "docs-00000.jsonl.gz")
