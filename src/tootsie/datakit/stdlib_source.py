"""A real-text corpus from the running Python: its standard library as code, its docstrings as prose.

This is the demo's "download" stage: it needs no network, yet the text is real
(written by people, with real structure and repetition). Two sources:

- `code`: each `.py` file of the standard library (tests excluded) is a document;
- `prose`: per module, its docstrings joined into one document, plus each
  `pydoc` topic (the language reference text `help()` shows).

Output: `<out>/<source>/docs-00000.jsonl.gz`, one JSON object per line with
`id` (the module path or topic name) and `text`. The config records the Python
version and stdlib location, so another interpreter gives another output path.
"""

import ast
import gzip
import json
import os
import platform
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tootsie.errors import TootsieError

SKIPPED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "__pycache__", "lib2to3"})


@dataclass(frozen=True)
class StdlibSourceConfig:
    """Which standard library to read and how much of it."""

    stdlib_dir: str = field(default_factory=lambda: sysconfig.get_paths()["stdlib"])
    """Root of the standard library to read."""
    python_version: str = field(default_factory=platform.python_version)
    """Recorded so that a different interpreter's stdlib gets a different output path."""
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


def stdlib_python_files(root: Path, max_file_bytes: int) -> list[Path]:
    """The stdlib's `.py` files outside test and vendored directories, sorted by path."""
    files = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if SKIPPED_DIRS.intersection(relative.parts) or path.stat().st_size > max_file_bytes:
            continue
        files.append(path)
    return files


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
    root = Path(config.stdlib_dir)
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
    """Write the `code` and `prose` sources as gzipped JSONL under `output_path`."""
    out = Path(output_path)
    writers: dict[str, gzip.GzipFile] = {}
    tmp_paths: dict[str, Path] = {}
    try:
        for source, doc_id, text in iter_code_and_prose(config):
            if source not in writers:
                tmp_paths[source] = out / source / f".docs-00000.jsonl.gz.tmp-{os.getpid()}"
                tmp_paths[source].parent.mkdir(parents=True, exist_ok=True)
                writers[source] = gzip.open(tmp_paths[source], "wt", encoding="utf-8")
            writers[source].write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    finally:
        for writer in writers.values():
            writer.close()
    for source, tmp in tmp_paths.items():
        os.replace(tmp, out / source / "docs-00000.jsonl.gz")
