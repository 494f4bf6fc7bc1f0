"""Benchmark corpora built from real text on this machine (no network).

`write_jsonl_corpus(directory, megabytes)` writes JSONL files of documents cut
from the Python standard library (source files and docstrings), each copy
lightly varied so exact dedup does not erase the repetition a large corpus
needs. Deterministic for a given size.
"""

import json
import sysconfig
from collections.abc import Iterator
from pathlib import Path

FILE_BYTES = 16_000_000


def stdlib_texts() -> list[str]:
    """Source files of the standard library, tests excluded, as strings."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for path in sorted(root.rglob("*.py")):
        if {"test", "tests", "site-packages"} & set(path.relative_to(root).parts):
            continue
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
    return texts


def documents(megabytes: float, doc_bytes: int = 4000) -> Iterator[str]:
    """Documents of about `doc_bytes` characters, cut from the stdlib, until `megabytes` are produced."""
    texts = stdlib_texts()
    produced, copy = 0, 0
    while produced < megabytes * 1e6:
        for text in texts:
            for start in range(0, len(text), doc_bytes):
                doc = f"# copy {copy}\n" + text[start : start + doc_bytes]
                produced += len(doc)
                yield doc
                if produced >= megabytes * 1e6:
                    return
        copy += 1


def write_jsonl_corpus(directory: Path, megabytes: float) -> tuple[int, int]:
    """Write `megabytes` of JSONL documents into `directory`; return (documents, text bytes)."""
    directory.mkdir(parents=True, exist_ok=True)
    count, total, index, handle, in_file = 0, 0, 0, None, 0
    for doc in documents(megabytes):
        if handle is None or in_file >= FILE_BYTES:
            if handle is not None:
                handle.close()
            handle = open(directory / f"corpus-{index:04d}.jsonl", "w", encoding="utf-8")
            index, in_file = index + 1, 0
        line = json.dumps({"id": f"doc-{count}", "text": doc}) + "\n"
        handle.write(line)
        in_file += len(line)
        count, total = count + 1, total + len(doc.encode("utf-8"))
    if handle is not None:
        handle.close()
    return count, total
