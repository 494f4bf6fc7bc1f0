"""Extract: web archives and HTML files → normalized Parquet documents of each page's main content.

The front door for web data. Map (one shard per input file, or per byte
range of a large one-member-per-record `.warc.gz` (`web_source.web_ranges`, a
split that depends on the file alone, so the output does not depend on it),
in parallel, resumable through the engine): `web_source` yields the HTTP 200 `text/html`
pages of a WARC (or an `.html` file), decoded; `html_extract` takes out the
main content with resiliparse (default) or trafilatura, as plain text or
Markdown; the text then goes through normalize's own path (NFC, the empty /
too large / whitespace-run guards, `id = xxh3_128(text)`). Reduce: normalize's
exact-content dedup (`write_deduplicated`) over every page of every input.

The output is a document directory with normalize's columns (`id`, `text`,
`source_id` = the WARC record id) plus `url`, `title` and `date` (the WARC
date, ISO 8601; null for `.html` files, whose `url` and `source_id` are the
file's name relative to its input, e.g. `pages/a.html`, not its absolute path),
so every later stage reads it unchanged. Nothing crashes a shard on one
page: each record that is not kept counts under one reason in `rejected`
(`web_source`'s reasons, `extract_error` when the extractor raises,
normalize's `empty` / `too_large` / `whitespace_run` on the extracted text,
`exact_duplicate` in the reduce).

Then, unless `site_boilerplate` is None (`--no-site-boilerplate`), the
site-boilerplate stage (`site_boilerplate`) removes the lines repeated across
the pages of a site, drops the pages left mostly boilerplate
(`mostly_boilerplate`) and those that became identical (`exact_duplicate`),
and writes `site_boilerplate.json`; its counts are under the stats'
`site_boilerplate` key, its drops in `rejected`.

With the stage on and an engine in `WHOLE_PAGE_ENGINES` (trafilatura), the
map also renders each page's whole text (`html_extract`'s `whole_page`) into
a `page_text` column of the work pages, and the stage counts a line on every
page that contains it, not only where the extractor kept it (the stage's
`count_field`), then leaves the column out: the output's columns are the same
either way. trafilatura needs it: it drops a site's template on most pages
but returns the whole page when the main content is short, so in its text
that template is on too few pages to count (3 of the div fixture's 101
documents kept boilerplate, none now). resiliparse decides per element (tags,
classes), so a template goes on every page of a site or on none, and its
text alone gives the same documents on the fixture and the demo's pydoc
pages in less time (extract with the stage on 100 pydoc pages: 1.36 s
against 2.01 s when it also counted on the whole page; docs/datakit.md).
The stage off, the map renders nothing more.

Extract needs the `web` extra's modules for its engine (`extractor_modules`:
resiliparse and fastwarc, plus trafilatura's for that engine), checked before
it starts; a missing one is a `MissingExtra`, never a page's `extract_error`
or a failed shard. As a step it declares the `demo` extra, which is exactly
what the default engine needs.

`stats.json`: `{"input_records", "output_docs", "rejected": {reason: count},
"shards", "failed_inputs", "extractor", "format", "site_boilerplate"}` and the
shared `total` / `kept` / `dropped`.

Example: a WARC with a request record, two copies of one 200 HTML page and a
404 gives `input_records` 4, `output_docs` 1 and `rejected` `{"exact_duplicate":
1, "not_response": 1, "status_404": 1}`.
"""

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tootsie.datakit.engine import ShardTask, map_shards
from tootsie.datakit.html_extract import ENGINE_MODULES, ENGINES, FORMATS, extract_main
from tootsie.datakit.normalize import DOCUMENT_SCHEMA, ChunkWriter, DocumentGuards, add_document, reduce_chunks
from tootsie.datakit.site_boilerplate import SiteBoilerplateConfig, chain_counts, remove_site_boilerplate
from tootsie.datakit.stats import StageStats, finish_stage
from tootsie.datakit.web_source import WebRange, read_web_pages, web_ranges
from tootsie.executor.step import requires_extras
from tootsie.extras import MissingExtra, require_modules
from tootsie.jsonfile import read_json, write_json_atomic

SOURCE_MODULES = ("resiliparse", "fastwarc")
"""What `web_source` imports to read pages: fastwarc parses WARCs, resiliparse detects charsets."""
WEB_DOCUMENT_SCHEMA = pa.schema([*DOCUMENT_SCHEMA, *(pa.field(name, pa.string()) for name in ("url", "title", "date"))])
WHOLE_PAGE_ENGINES = ("trafilatura",)
"""Engines whose site stage counts lines on each page's whole text (module docstring): trafilatura's kept text
depends on the page's length, resiliparse's on its elements only."""
PAGE_FIELD = "page_text"
"""The work pages' column holding each page's whole text, which the site stage counts lines on and leaves out."""
WORK_DIR = ".extract"


@dataclass(frozen=True)
class ExtractConfig(DocumentGuards):
    """Web inputs, the extractor and its output format, and the guards (normalize's, plus `max_html_bytes`)."""

    inputs: tuple[str, ...]
    """WARC files (.warc, .warc.gz), .html files, directories or globs of them, local or fsspec URLs."""
    extractor: str = "resiliparse"
    """Main-content extractor: "resiliparse" (DCLM's, fast) or "trafilatura"."""
    format: str = "text"
    """"text" or "markdown" (headings, lists, code blocks and tables kept)."""
    max_html_bytes: int = 5_000_000
    """Pages whose payload is larger than this are rejected as `too_large` before parsing."""
    site_boilerplate: SiteBoilerplateConfig | None = field(default_factory=SiteBoilerplateConfig)
    """Remove the lines repeated across a site's pages (`site_boilerplate`); None keeps the extractor's text as is."""

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError("inputs is empty: give at least one .warc, .warc.gz or .html file, directory or glob")
        if self.extractor not in ENGINES:
            raise ValueError(f"extractor must be one of {ENGINES}, got {self.extractor!r}")
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {self.format!r}")
        if self.max_html_bytes <= 0:
            raise ValueError(f"max_html_bytes must be positive, got {self.max_html_bytes}")
        super().__post_init__()


def extractor_modules(extractor: str) -> tuple[str, ...]:
    """The modules of the `web` extra that extracting with `extractor` imports."""
    return tuple(dict.fromkeys(SOURCE_MODULES + ENGINE_MODULES[extractor]))


def require_extractor(extractor: str, *, purpose: str) -> None:
    """Raise MissingExtra (naming the `web` extra) when a module `extractor` needs is not installed."""
    require_modules(extractor_modules(extractor), extra="web", purpose=purpose)


def _whole_page(config: ExtractConfig) -> bool:
    """Whether the map renders each page's whole text for the site stage to count lines on."""
    return config.site_boilerplate is not None and config.extractor in WHOLE_PAGE_ENGINES


def _shard_name(index: int, web: WebRange) -> str:
    """A map shard's name: its input's index, and the byte offset of its range when the input is split."""
    return f"input-{index:05d}" + (f"-{web.start:012d}" if web.stop or web.start else "")


def extract_file(task: ShardTask, config: ExtractConfig) -> dict[str, Any]:
    """Map: extract the pages of one input file (or byte range of one) into chunk files under `task.output_dir`."""
    stats = StageStats()
    whole_page = _whole_page(config)
    schema = WEB_DOCUMENT_SCHEMA.append(pa.field(PAGE_FIELD, pa.string())) if whole_page else WEB_DOCUMENT_SCHEMA
    writer = ChunkWriter(Path(task.output_dir), schema, config.shard_bytes)
    path, name, start, stop = task.inputs  # the file, its name relative to its input, its range (set by `extract`)
    ranged = {"start": int(start), "stop": int(stop) if stop else None}
    for page in read_web_pages(path, config.max_html_bytes, stats.drop, name=name, **ranged):
        try:
            extracted = extract_main(page.html, config.extractor, config.format, whole_page=whole_page)
        except (ImportError, MissingExtra):  # a missing dependency fails the job (the engine says so), not a page
            raise
        except Exception:  # noqa: BLE001 - a page the extractor cannot handle is a count, never a failed shard
            stats.drop("extract_error")
            continue
        fields = {"source_id": page.record_id, "url": page.url, "title": extracted.title, "date": page.date}
        if whole_page:
            fields[PAGE_FIELD] = extracted.page
        add_document(writer, stats, config, extracted.text, **fields)
    return {**stats.to_json(), "chunks": writer.close()}


@requires_extras("demo")  # resiliparse and fastwarc: the default engine's modules, which `web` brings too
def extract(config: ExtractConfig, output_path: str) -> dict[str, Any]:
    """Extract every input's pages into deduplicated `part-NNNNN.parquet` documents plus `stats.json`."""
    require_extractor(config.extractor, purpose=f"extract with the {config.extractor} engine")
    out = Path(output_path)
    work = out / WORK_DIR
    stamp = {name: value for name, value in asdict(config).items() if name not in ("engine", "site_boilerplate")}
    stamp |= {"inputs": list(config.inputs), "whole_page": _whole_page(config)}  # as JSON reads it back
    if read_json(work / "map.json") not in (None, stamp):
        shutil.rmtree(work)  # left by an interrupted run whose map wrote other pages: its done shards would be stale
    write_json_atomic(work / "map.json", stamp)
    tasks = [
        ShardTask(
            name=_shard_name(i, web),
            inputs=(web.path, web.name, str(web.start), str(web.stop or "")),
            output_dir=str(work / _shard_name(i, web)),
        )
        for i, web in web_ranges(config.inputs)
    ]
    results = map_shards(extract_file, config, tasks, work / "done", config.engine, label="extract")
    rule = config.site_boilerplate
    counts, shards = reduce_chunks(tasks, results, out if rule is None else work / "pages")
    site = None
    if rule is not None:  # the pages of every input are in work/pages: count lines per site, then remove
        count_field = PAGE_FIELD if stamp["whole_page"] else None
        site = remove_site_boilerplate(rule, config, work / "pages", out, work / "site", count_field=count_field)
        counts, shards = chain_counts(counts, site.counts), site.shards
    details = {
        "input_records": counts.total,
        "output_docs": counts.kept,
        "rejected": dict(sorted((reason, n) for reason, n in counts.dropped.items() if n)),
        "shards": shards,
        "failed_inputs": results.failed,
        "extractor": config.extractor,
        "format": config.format,
        "site_boilerplate": None if site is None else {**site.details, "failed_shards": site.failed},
    }
    stats = finish_stage(out, counts, details)
    shutil.rmtree(work)  # finished: the chunks are now parts; an interrupted run keeps them to resume
    return stats
