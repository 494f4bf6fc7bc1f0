"""The demo's web source: stdlib modules rendered by pydoc into a WARC that the web reader and `extract` take back."""

import hashlib
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tootsie.corpora.pydoc_source import WARC_NAME, PydocWarcConfig, build_pydoc_warc, pydoc_pages, rendered_pages
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract
from tootsie.datakit.web_source import read_web_pages


def test_pages_are_public_modules_in_name_order_and_bounded() -> None:
    pages = list(pydoc_pages(4))
    names = [name for name, _ in pages]
    assert len(names) == 4 and names == sorted(names)
    assert not any(name.startswith("_") for name in names)
    assert all(html.lstrip().lower().startswith("<!doctype html>") for _, html in pages)


def test_warc_holds_one_html_response_per_module_and_extracts_to_its_text(tmp_path) -> None:
    counts = build_pydoc_warc(PydocWarcConfig(max_pages=3), str(tmp_path / "warc"))
    assert counts["pages"] == 3 and counts["warc_bytes"] < counts["html_bytes"]
    assert json.loads((tmp_path / "warc" / "stats.json").read_text()) == counts
    drops: list[str] = []
    pages = list(read_web_pages(str(tmp_path / "warc" / WARC_NAME), 5_000_000, drops.append))
    assert drops == []
    assert [p.url for p in pages] == [f"http://pydoc.local/{m}.html" for m in counts["modules"]]
    assert "abc" in counts["modules"]  # Python's own "Abstract Base Classes" docstring must come through extraction

    stats = extract(
        ExtractConfig(inputs=(str(tmp_path / "warc"),), engine=EngineConfig(workers=1, progress=False)),
        str(tmp_path / "docs"),
    )
    assert stats["input_records"] == 3 and stats["output_docs"] == 3 and stats["rejected"] == {}
    docs = pq.read_table(sorted((tmp_path / "docs").glob("*.parquet"))).to_pylist()
    abc_doc = next(d for d in docs if d["url"] == "http://pydoc.local/abc.html")
    assert "Abstract Base Classes" in abc_doc["text"] and "<a href" not in abc_doc["text"]
    assert "\xa0" not in abc_doc["text"]  # pydoc's &nbsp; between words comes out as plain spaces


def test_given_modules_render_in_their_order() -> None:
    assert [name for name, _ in pydoc_pages(5, ("json", "abc"))] == ["json", "abc"]


def test_max_pages_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_pages"):
        PydocWarcConfig(max_pages=0)


def test_pages_are_the_same_in_every_process() -> None:
    """Reprs carry memory addresses and module data that depend on the process's history (`<object object at
    0x7f...>`, `__warningregistry__` versions); the step's pages must not, or the demo's outputs would differ
    between a local run and a Ray worker. This process has imported JAX, Ray and more; the other only numpy.
    (Pages across installs and environments: tests/datakit/test_source_reproducibility.py.)"""
    script = (
        "import hashlib, numpy; from tootsie.corpora.pydoc_source import rendered_pages; "
        "print(hashlib.sha256(''.join(h for _, h in rendered_pages(40)).encode()).hexdigest())"
    )
    elsewhere = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    pages = rendered_pages(40)
    assert elsewhere.stdout.strip() == hashlib.sha256("".join(h for _, h in pages).encode()).hexdigest()
    assert "cgi" in dict(pages) and "PYTEST_CURRENT_TEST" not in dict(pages)["cgi"]  # cgi prints os.environ
