"""Sweep the site-boilerplate rule (k, f, digit masking, the mostly-boilerplate thresholds) on two corpora.

1. The div-only fixture (`tests/datakit/div_sites.py`: 101 pages on 5 hosts,
   295 known paragraphs), run through `extract` with each rule, per engine (the
   pipeline a user runs: with trafilatura the stage counts lines on each
   page's whole text, `extract.WHOLE_PAGE_ENGINES`): paragraphs kept,
   documents with boilerplate left (by kind; `related` also counts another
   page's title left in a page), pages dropped, own titles kept.
2. The demo's web source: the pydoc pages of the first `--pydoc-pages` stdlib
   modules (`corpora.pydoc_source`), extracted with resiliparse: lines and
   characters removed, pages dropped, and the lines removed on most pages.

Run from the repository root (docs/datakit.md has the tables):

    .venv/bin/python -m benchmarks.sweep_site_boilerplate --json sweep.json
"""

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests.datakit.div_sites import BOILERPLATE, build_div_sites
from tootsie.corpora.pydoc_source import PydocWarcConfig, build_pydoc_warc
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract
from tootsie.datakit.parquet_io import parquet_files
from tootsie.datakit.site_boilerplate import SiteBoilerplateConfig, SiteBoilerplateStageConfig, site_boilerplate

INLINE = EngineConfig(workers=1, progress=False)
RULES = [
    SiteBoilerplateConfig(min_pages=k, min_fraction=f, mask_digits=mask)
    for k in (2, 3, 5)
    for f in (0.05, 0.1, 0.2, 0.3, 0.5)
    for mask in (True, False)
]
DROP_RULES = [
    SiteBoilerplateConfig(min_pages=2, min_fraction=0.1, min_chars=chars, min_share=share)
    for chars, share in ((0, 0.0), (50, 0.1), (100, 0.2), (200, 0.3), (400, 0.5))
]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _rows(directory: Path) -> list[dict[str, Any]]:
    return [row for path in parquet_files(directory) for row in pq.read_table(path).to_pylist()]


def _run(rule: SiteBoilerplateConfig, docs: Path, out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The standalone stage with `rule` on the documents `docs` (counting lines on their text)."""
    stats = site_boilerplate(SiteBoilerplateStageConfig(input=str(docs), rule=rule, engine=INLINE), str(out))
    return _rows(out), stats


def _extract(
    warc: Path, engine: str, rule: SiteBoilerplateConfig | None, out: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`extract` of `warc` with `engine` and the site stage's `rule` (None: off)."""
    stats = extract(
        ExtractConfig(inputs=(str(warc),), extractor=engine, site_boilerplate=rule, engine=INLINE), str(out)
    )
    return _rows(out), stats


def fixture_row(sites: Any, rows: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, Any]:
    """The fixture's figures for one rule's output `rows`."""
    by_url = {row["url"]: _flat(row["text"]) for row in rows}
    known = [(url, p) for url, paragraphs in sites.paragraphs.items() for p in paragraphs]
    kinds = {}
    for kind, markers in BOILERPLATE.items():
        kinds[kind] = sum(any(m in text for m in markers) for text in by_url.values())
    hosts = {url: url.split("/")[2].removeprefix("www.") for url in sites.titles}
    left_titles = {
        url
        for url, text in by_url.items()
        if any(title in text for other, title in sites.titles.items() if other != url and hosts[other] == hosts[url])
    }
    kinds["related"] = len(
        left_titles | {url for url, text in by_url.items() if any(m in text for m in BOILERPLATE["related"])}
    )
    any_kind = {
        url
        for url, text in by_url.items()
        if url in left_titles or any(m in text for markers in BOILERPLATE.values() for m in markers)
    }
    return {
        "paragraphs_kept": sum(_flat(p) in by_url.get(url, "") for url, p in known),
        "paragraphs": len(known),
        "docs": len(rows),
        "docs_with_boilerplate": len(any_kind),
        **kinds,
        "own_title_kept": sum(sites.titles[url] in text for url, text in by_url.items()),
        "mostly_boilerplate": stats["dropped"].get("mostly_boilerplate", 0),
    }


def pydoc_row(rows: list[dict[str, Any]], before: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, Any]:
    """The pydoc pages' figures for one rule: what share of lines and characters went, and which lines."""
    chars = sum(len(row["text"]) for row in before)
    lines = sum(sum(1 for line in row["text"].split("\n") if line.strip()) for row in before)
    removed = sum(stats["lines_removed"].values())
    return {
        "docs": len(rows),
        "lines_removed": removed,
        "lines_removed_share": round(removed / lines, 4),
        "chars_removed_share": round(stats["chars_removed"] / chars, 4),
        "mostly_boilerplate": stats["dropped"].get("mostly_boilerplate", 0),
    }


def _name(rule: SiteBoilerplateConfig | None) -> dict[str, Any]:
    if rule is None:
        return {"rule": "off"}
    return {
        "k": rule.min_pages,
        "f": rule.min_fraction,
        "mask_digits": rule.mask_digits,
        "min_chars": rule.min_chars,
        "min_share": rule.min_share,
    }


def main() -> None:
    """Run both sweeps and print one JSON line per rule (and write them all to --json)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pydoc-pages", type=int, default=100, help="stdlib modules in the pydoc corpus")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        sites = build_div_sites(root)
        for engine in ("resiliparse", "trafilatura"):
            for i, rule in enumerate([None, *RULES, *DROP_RULES]):
                rows, stats = _extract(sites.warc, engine, rule, root / f"{engine}-{i}")
                results.append({"corpus": f"divs/{engine}", **_name(rule), **fixture_row(sites, rows, stats)})
                print(json.dumps(results[-1]))
        build_pydoc_warc(PydocWarcConfig(max_pages=args.pydoc_pages), str(root / "pydoc"))
        docs = root / "docs-pydoc"
        extract(ExtractConfig(inputs=(str(root / "pydoc"),), site_boilerplate=None, engine=INLINE), str(docs))
        before = _rows(docs)
        for i, rule in enumerate([*RULES, *DROP_RULES]):
            rows, stats = _run(rule, docs, root / f"pydoc-{i}")
            report = json.loads((root / f"pydoc-{i}" / "site_boilerplate.json").read_text())
            top = [f"{line['pages']}: {line['text'][:60]}" for host in report["hosts"] for line in host["lines"][:8]]
            results.append({"corpus": "pydoc", **_name(rule), **pydoc_row(rows, before, stats), "top_lines": top})
            print(json.dumps(results[-1]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
