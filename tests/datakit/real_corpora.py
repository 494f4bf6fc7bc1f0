"""Two real corpora every test machine has, for the quality classifier: stdlib docstrings and package licenses.

Both come from the Python that runs the tests, with no network: the
docstrings of the standard library's modules, classes and functions (prose
about code), and the license files that installed packages ship in their
`*.dist-info` folders (legal text). Man pages would be the classic pair, but
slim Debian/Ubuntu images strip `/usr/share/man`; a venv with tootsie's
dependencies always holds a few hundred license files.
"""

import sysconfig
from pathlib import Path

import pyarrow as pa

from tootsie.corpora.stdlib_source import module_docstrings, stdlib_python_files
from tootsie.datakit.ids import content_id
from tootsie.datakit.normalize import DOCUMENT_SCHEMA
from tootsie.datakit.parquet_io import write_table_atomic

MIN_CHARS = 200
LICENSE_PATTERNS = ("LICEN[CS]E*", "COPYING*", "NOTICE*", "AUTHORS*")


def license_texts() -> list[str]:
    """Distinct license texts (at least MIN_CHARS long) shipped in the site-packages `*.dist-info` folders."""
    root = Path(sysconfig.get_paths()["purelib"])
    files = sorted(
        {path for pattern in LICENSE_PATTERNS for path in root.glob(f"*.dist-info/**/{pattern}") if path.is_file()}
    )
    texts = dict.fromkeys(path.read_text(encoding="utf-8", errors="replace").strip() for path in files)
    return [text for text in texts if len(text) >= MIN_CHARS]


def stdlib_docstrings(limit: int) -> list[str]:
    """The first `limit` distinct standard-library docstrings of at least MIN_CHARS, in file order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts: dict[str, None] = {}
    for path in stdlib_python_files(root, max_file_bytes=400_000):
        for doc in module_docstrings(path.read_text(encoding="utf-8", errors="replace"), MIN_CHARS):
            texts.setdefault(doc)
            if len(texts) == limit:
                return list(texts)
    return list(texts)


def write_documents(texts: list[str], directory: Path, per_shard: int = 500) -> Path:
    """Write `texts` as a document directory (normalize's schema) of `part-NNNNN.parquet` shards."""
    for index, start in enumerate(range(0, len(texts), per_shard)):
        chunk = texts[start : start + per_shard]
        table = pa.table(
            {"id": [content_id(t) for t in chunk], "text": chunk, "source_id": [None] * len(chunk)},
            schema=DOCUMENT_SCHEMA,
        )
        write_table_atomic(table, directory / f"part-{index:05d}.parquet")
    return directory
