"""Site-level boilerplate: remove the lines that repeat across many pages of one site.

Extractors judge one page at a time, so navigation, cookie banners, related
links, newsletter boxes and footers written as plain `<div>`s survive them;
what marks them is that they repeat on the pages of one site. This stage
works on extracted documents (a document directory with a `url` column),
after extraction and before dedup, in three passes:

1. **count** (a map over document shards, `map_shards`): each document's site
   and, per distinct non-blank line, its (site, line) key (`site_lines`:
   hostname without `www.`, NFKC-casefolded, whitespace collapsed, digits
   masked); it spills `(key, host, doc)` triples, partitioned by `key %
   partitions`, as `.npy` files, each line's key (so no line is normalized
   twice), and each site's page count as Parquet. With a `count_field` (extract
   sets it to each page's whole text, `html_extract`'s `whole_page`), a page's
   lines are those of its text **and** of that field: a line counts on every
   page that *contains* it, not only on those where the extractor kept it.
   An extractor that drops a template on most pages of a site but keeps it on
   a few (trafilatura falls back to the whole page when the main content is
   short) otherwise leaves it on too few pages of its output to count.
2. **reduce** (a map over partitions): per key, the number of distinct pages,
   by a sort (`np.unique` over the partition's keys: each (key, doc) pair is
   spilled once). A key is **boilerplate** when its line is on at least
   `min_pages` pages **and** on at least `min_fraction` of its site's pages,
   and in the text of at least one (a line only in the count field has
   nothing to remove).
3. **remove** (a map over document shards): drops the boilerplate lines from
   each page; a page whose remaining text is under `min_chars` characters or
   under `min_share` of its original length is dropped as
   `mostly_boilerplate`. Kept pages get their new `id = xxh3_128(text)`, and
   the pages that became identical are dropped as `exact_duplicate` (the
   normalize reduce), so the output is a document directory every later stage
   reads unchanged (the input's columns, in the input's order, without the
   count field).

Why both thresholds: `min_pages` alone would strip a 10 000-page site of every
line quoted on 5 pages; `min_fraction` alone would strip a 2-page site of
everything the two pages share. A page of a 1-page site is never changed
(a line is on one page at most, and `min_pages` >= 2); the same paragraph on
two sites is two keys, so a paragraph shared across sites is kept.

Memory: no pass holds a site's text. The count pass holds one shard's
triples (24 bytes per distinct line per page, of its text and count field
together); the reduce holds one
partition, so a site of 10^7 pages with 100 lines each (2.4·10^10 bytes of
triples) fits in ~1.5 GB per partition with 16 partitions, and `partitions`
(not hashed: any value gives the same output) divides it further. The
remove pass holds the boilerplate keys (8 bytes each: a site's template
lines, not its pages), one shard's line keys (8 bytes a line) and one
record batch.

Each pass is resumable through the engine's done markers under the work
directory; a work directory left by an interrupted run with another rule is
cleared first. Outputs: `part-NNNNN.parquet`, `site_boilerplate.json` (the
report: per site, its pages, the lines removed and the boilerplate lines,
each with its key as hex, its page count and a sample of its text; the
`REPORT_HOSTS` sites with most lines removed, `REPORT_LINES` lines each) and
`stats.json` (`finish_stage`: `total` / `kept` / `dropped` by reason, lines
removed by reason, the top sites).

Example: a site of 20 pages whose footer `© 2024 Example Corp` is on every
page, with k=2 and f=0.1, loses the footer on all 20 pages (20 >= 2 and
20/20 >= 0.1); a 1-page site with the same footer keeps it.
"""

import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tootsie.configfile import unhashed
from tootsie.datakit.engine import ShardResults, ShardTask, map_shards
from tootsie.datakit.normalize import ChunkWriter, DocumentGuards, add_document, reduce_chunks
from tootsie.datakit.parquet_io import parquet_files, write_npy_atomic, write_table_atomic
from tootsie.datakit.site_lines import GROUPINGS, Grouping, host_hash, line_keys, site_of, without_lines
from tootsie.datakit.site_report import PAGES_SCHEMA, REMOVED_SCHEMA, SAMPLE_SCHEMA, build_report, top_hosts
from tootsie.datakit.stats import StageStats, finish_stage
from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json, write_json_atomic

WORK_DIR = ".site_boilerplate"
REPORT_FILE = "site_boilerplate.json"
BATCH_ROWS = 1024  # documents per record batch: amortizes Arrow calls, bounds the remove pass's memory
TRIPLE_DTYPE = np.dtype([("key", "<u8"), ("host", "<u8"), ("doc", "<u8")])
IN_TEXT = np.uint64(1 << 63)
"""Set in a triple's `doc` (shard index << 32 | row) when its line is in the page's text, not only its count field."""
REMOVED_DTYPE = np.dtype([("key", "<u8"), ("host", "<u8"), ("pages", "<i8")])
LINE_REASON = "repeated_on_site"
"""The reason lines are removed under: on >= min_pages pages and >= min_fraction of its site's pages."""


@dataclass(frozen=True)
class SiteBoilerplateConfig:
    """The rule: which repeated lines are boilerplate, and when a page is left with too little to keep."""

    min_pages: int = 2
    """k: a line is boilerplate only if it is on at least this many pages of its site (docs/datakit.md's sweep)."""
    min_fraction: float = 0.1
    """f: ...and on at least this fraction of its site's pages."""
    min_chars: int = 100
    """A page with lines removed is dropped (`mostly_boilerplate`) when fewer characters than this remain."""
    min_share: float = 0.2
    """...or when what remains is less than this share of its original characters."""
    mask_digits: bool = True
    """Count lines that differ only in their digits as one line (`© 2023`/`© 2024`; docs/datakit.md's sweep)."""
    group: Grouping = "host"
    """What a site is: "host" (hostname without www.) or "registered_domain" (the `tld` package's offline list)."""
    partitions: int = unhashed(16)
    """Hash partitions of the count spill; more bound the reduce's memory tighter (not hashed: same output)."""

    def __post_init__(self) -> None:
        if self.min_pages < 2:
            raise ValueError(f"min_pages must be >= 2 (a line on one page is never boilerplate), got {self.min_pages}")
        for name in ("min_fraction", "min_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}; 0 turns its test off")
        if self.min_chars < 0:
            raise ValueError(f"min_chars must be >= 0, got {self.min_chars}; 0 turns the length test off")
        if self.group not in GROUPINGS:
            raise ValueError(f"group must be one of {GROUPINGS}, got {self.group!r}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")


@dataclass(frozen=True)
class SiteBoilerplateStageConfig(DocumentGuards):
    """The standalone stage: a document directory extracted elsewhere, and the rule."""

    input: str
    """A document directory (Parquet shards with `id`, `text` and a URL column)."""
    url_field: str = "url"
    """The column holding each page's URL."""
    rule: SiteBoilerplateConfig = field(default_factory=SiteBoilerplateConfig)
    """k, f and the mostly-boilerplate thresholds."""

    def __post_init__(self) -> None:
        if not self.input:
            raise ValueError("input is empty: give a document directory with a url column (e.g. extract's output)")
        super().__post_init__()


@dataclass(frozen=True)
class _Pass:
    """What every shard function of the three passes needs (picklable for spawned workers)."""

    rule: SiteBoilerplateConfig
    guards: DocumentGuards
    url_field: str
    count_field: str | None
    """A column whose lines count beside the text's (a page's whole text), dropped from the output; None: text only."""
    work: str
    shards: tuple[str, ...]
    """Names of the count shards whose spills the reduce reads."""


class SiteResult(NamedTuple):
    """What the stage did: its counts, its output shards, failed shards by pass, and the stats details."""

    counts: StageStats
    shards: int
    failed: dict[str, str]
    details: dict[str, Any]


def count_shard(task: ShardTask, job: _Pass) -> dict[str, Any]:
    """Pass 1: spill one shard's (key, host, doc) triples by partition, its line keys and its sites' page counts.

    The line keys (`<shard>.lines.npy`, 0 for a blank line or a page without a
    site; `<shard>.offsets.npy`, each page's first line) spare the remove pass
    normalizing every line again."""
    path, index = task.inputs[0], int(task.inputs[1])
    work = Path(job.work)
    triples, line_keys_of, offsets, pages, names, row = [], [], [0], Counter[int](), {}, 0
    columns = [job.url_field, "text", *([job.count_field] if job.count_field else [])]
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=columns):
        counted = batch.column(2).to_pylist() if job.count_field else [None] * batch.num_rows
        for url, text, whole in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), counted, strict=True):
            site = site_of(url, job.rule.group)
            if site is not None and text:
                keys = line_keys(site, text, job.rule.mask_digits)
                in_text = np.unique(keys[keys != 0])
                distinct = np.union1d(in_text, line_keys(site, whole, job.rule.mask_digits)) if whole else in_text
                distinct = distinct[distinct != 0]
                host = host_hash(site)
                pages[host] += 1
                names[host] = site
                found = np.zeros(len(distinct), TRIPLE_DTYPE)
                found["key"], found["host"], found["doc"] = distinct, host, (index << 32) | row
                found["doc"][_member_sorted(distinct, in_text)] |= IN_TEXT
                triples.append(found)
                line_keys_of.append(keys)
            offsets.append(offsets[-1] + (len(line_keys_of[-1]) if site is not None and text else 0))
            row += 1
    spilled = np.concatenate(triples) if triples else np.zeros(0, TRIPLE_DTYPE)
    partition = spilled["key"] % np.uint64(job.rule.partitions)
    for p in range(job.rule.partitions):
        write_npy_atomic(spilled[partition == p], work / f"{task.name}.p{p:04d}.npy")
    keys = np.concatenate(line_keys_of) if line_keys_of else np.zeros(0, np.uint64)
    write_npy_atomic(keys, work / f"{task.name}.lines.npy")
    write_npy_atomic(np.array(offsets, dtype=np.int64), work / f"{task.name}.offsets.npy")
    hosts = {"host": list(pages), "site": [names[h] for h in pages], "pages": list(pages.values())}
    write_table_atomic(pa.table(hosts, schema=PAGES_SCHEMA), work / f"{task.name}.hosts.parquet")
    return {"docs": row, "docs_without_host": row - sum(pages.values()), "lines": int((keys != 0).sum())}


def reduce_partition(task: ShardTask, job: _Pass) -> dict[str, Any]:
    """Pass 2: the boilerplate keys of one partition, with their site and number of pages."""
    work, p = Path(job.work), int(task.inputs[0])
    parts = [np.load(work / f"{shard}.p{p:04d}.npy", allow_pickle=False) for shard in job.shards]
    triples = np.concatenate(parts) if parts else np.zeros(0, TRIPLE_DTYPE)
    keys, first, inverse, pages = np.unique(triples["key"], return_index=True, return_inverse=True, return_counts=True)
    in_text = np.zeros(len(keys), dtype=bool)
    in_text[inverse[(triples["doc"] & IN_TEXT) != 0]] = True
    hosts = triples["host"][first]
    site_pages = np.load(work / "hosts.npy", allow_pickle=False)
    host_pages = site_pages["pages"][np.searchsorted(site_pages["host"], hosts)]
    boilerplate = (pages >= job.rule.min_pages) & (pages >= job.rule.min_fraction * host_pages) & in_text
    removed = np.zeros(int(boilerplate.sum()), REMOVED_DTYPE)
    removed["key"], removed["host"], removed["pages"] = keys[boilerplate], hosts[boilerplate], pages[boilerplate]
    write_npy_atomic(removed, Path(task.output_dir) / f"{task.name}.npy")
    return {"pairs": len(triples), "keys": len(keys), "boilerplate_keys": len(removed)}


def remove_shard(task: ShardTask, job: _Pass) -> dict[str, Any]:
    """Pass 3: one shard without its boilerplate lines, as chunks; per-site counts and line samples beside them."""
    out, work = Path(task.output_dir), Path(job.work)
    boilerplate = np.load(work / "boilerplate.npy", allow_pickle=False)
    keys = np.load(work / f"{task.name}.lines.npy", allow_pickle=False)
    offsets = np.load(work / f"{task.name}.offsets.npy", allow_pickle=False)
    removed = (keys != 0) & _member(keys, boilerplate)
    parquet = pq.ParquetFile(task.inputs[0])
    schema = parquet.schema_arrow
    if job.count_field is not None:
        schema = schema.remove(schema.get_field_index(job.count_field))
    writer = ChunkWriter(out, schema, job.guards.shard_bytes)
    stats, samples, names = StageStats(), {}, {}
    lines_removed, chars_removed, docs_dropped = Counter[int](), Counter[int](), Counter[int]()
    row = 0
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=schema.names):
        for columns in batch.to_pylist():
            text, site = columns.pop("text") or "", site_of(columns[job.url_field], job.rule.group)
            columns.pop("id", None)
            page = slice(offsets[row], offsets[row + 1])
            remove = removed[page]
            row += 1
            if site is None or not remove.any():
                add_document(writer, stats, job.guards, text, **columns)
                continue
            host, kept, lines = host_hash(site), without_lines(text, remove), text.split("\n")
            names[host] = site
            for key, index in zip(keys[page][remove].tolist(), np.flatnonzero(remove).tolist(), strict=True):
                if key not in samples:  # one sample per line: the first page's, in shard order
                    samples[key] = (host, " ".join(lines[index].split()))
            lines_removed[host] += int(remove.sum())
            chars_removed[host] += len(text) - len(kept)
            if _mostly_boilerplate(len(text.strip()), len(kept), job.rule):
                docs_dropped[host] += 1
                stats.drop("mostly_boilerplate")
            else:
                add_document(writer, stats, job.guards, kept, **columns)
    hosts = list(names)
    host_rows = {
        "host": hosts,
        "site": [names[h] for h in hosts],
        **{
            name: [counts[h] for h in hosts]
            for name, counts in zip(
                ("lines_removed", "chars_removed", "docs_dropped"), (lines_removed, chars_removed, docs_dropped)
            )
        },
    }
    write_table_atomic(pa.table(host_rows, schema=REMOVED_SCHEMA), out / "hosts.parquet")
    sample_rows = {
        "key": list(samples),
        "host": [s[0] for s in samples.values()],
        "text": [s[1] for s in samples.values()],
    }
    write_table_atomic(pa.table(sample_rows, schema=SAMPLE_SCHEMA), out / "samples.parquet")
    lines = {"lines_removed": {LINE_REASON: lines_removed.total()}, "chars_removed": chars_removed.total()}
    return {**stats.to_json(), **lines, "chunks": writer.close()}


def _member(keys: np.ndarray, boilerplate: np.ndarray) -> np.ndarray:
    """Whether each key is in the sorted `boilerplate["key"]`."""
    return _member_sorted(keys, boilerplate["key"])


def _member_sorted(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Whether each of `keys` is in the sorted array `sorted_keys`."""
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


def _mostly_boilerplate(original: int, remaining: int, rule: SiteBoilerplateConfig) -> bool:
    """Whether a page cut from `original` to `remaining` characters has too little left to keep."""
    return remaining < rule.min_chars or remaining < rule.min_share * original


def remove_site_boilerplate(
    rule: SiteBoilerplateConfig,
    guards: DocumentGuards,
    documents: Path,
    out: Path,
    work: Path,
    url_field: str = "url",
    count_field: str | None = None,
) -> SiteResult:
    """The three passes over the document directory `documents`, writing parts and the report into `out`.

    `count_field` names a column whose lines count beside the text's (module
    docstring) and which the output leaves out. `work` holds the spills and
    done markers (kept by a failed or interrupted run, to resume; the caller
    removes it when done)."""
    paths = parquet_files(documents)
    needed = ("text", url_field, *([count_field] if count_field else []))
    missing = [name for name in needed if name not in pq.ParquetFile(paths[0]).schema_arrow.names]
    if missing:
        raise TootsieError(
            f"{paths[0]} has no {missing} column; the site-boilerplate stage needs each page's text and URL"
            " (give --url-field for another URL column, or turn the stage off)"
        )
    stamp = {
        "rule": asdict(rule),
        "url_field": url_field,
        "count_field": count_field,
        "inputs": [p.name for p in paths],
    }
    if read_json(work / "rule.json") not in (None, stamp):
        shutil.rmtree(work)  # left by an interrupted run with another rule: its spills mean something else
    write_json_atomic(work / "rule.json", stamp)
    names = tuple(path.stem for path in paths)
    job = _Pass(rule, guards, url_field, count_field, str(work / "count"), names)
    count_tasks = [
        ShardTask(name=name, inputs=(str(path), str(i)), output_dir=job.work)
        for i, (name, path) in enumerate(zip(names, paths, strict=True))
    ]
    counted = map_shards(count_shard, job, count_tasks, work / "count" / "done", guards.engine, label="site count")
    job = _Pass(
        rule, guards, url_field, count_field, job.work, tuple(t.name for t in count_tasks if t.name in counted.stats)
    )
    _merge_hosts(job)
    reduce_tasks = [
        ShardTask(name=f"partition-{p:04d}", inputs=(str(p),), output_dir=str(work / "reduce"))
        for p in range(rule.partitions)
    ]
    reduced = map_shards(reduce_partition, job, reduce_tasks, work / "reduce" / "done", guards.engine, "site reduce")
    removed = [np.load(work / "reduce" / f"{name}.npy", allow_pickle=False) for name in reduced.stats]
    boilerplate = np.concatenate(removed) if removed else np.zeros(0, REMOVED_DTYPE)
    boilerplate = boilerplate[np.argsort(boilerplate["key"], kind="stable")]
    write_npy_atomic(boilerplate, Path(job.work) / "boilerplate.npy")
    remove_tasks = [
        ShardTask(name=t.name, inputs=t.inputs, output_dir=str(work / "remove" / t.name))
        for t in count_tasks
        if t.name in counted.stats
    ]
    results = map_shards(remove_shard, job, remove_tasks, work / "remove" / "done", guards.engine, "site remove")
    counts, shards = reduce_chunks(remove_tasks, results, out)
    rule_fields = {name: value for name, value in asdict(rule).items() if name != "partitions"}  # not hashed
    report = build_report(
        rule_fields, boilerplate, Path(job.work), job.shards, [Path(t.output_dir) for t in remove_tasks]
    )
    write_json_atomic(out / REPORT_FILE, report)
    failed = {**_prefixed("count", counted), **_prefixed("reduce", reduced), **_prefixed("remove", results)}
    details = _details(counted, results, report)
    return SiteResult(counts=counts, shards=shards, failed=failed, details=details)


def _merge_hosts(job: _Pass) -> None:
    """Sum the count shards' per-site page counts into `hosts.npy` (sorted by host hash) for the reduce."""
    tables = [pq.read_table(Path(job.work) / f"{shard}.hosts.parquet") for shard in job.shards]
    merged = pa.concat_tables(tables) if tables else PAGES_SCHEMA.empty_table()
    merged = merged.group_by("host").aggregate([("pages", "sum")])
    hosts = np.zeros(merged.num_rows, np.dtype([("host", "<u8"), ("pages", "<i8")]))
    hosts["host"], hosts["pages"] = merged.column("host").to_numpy(), merged.column("pages_sum").to_numpy()
    write_npy_atomic(np.sort(hosts, order="host"), Path(job.work) / "hosts.npy")


def _prefixed(name: str, results: ShardResults) -> dict[str, str]:
    return {f"{name}/{shard}": error for shard, error in results.failed.items()}


def _details(counted: ShardResults, removed: ShardResults, report: dict[str, Any]) -> dict[str, Any]:
    """The stage's own stats keys, from the count and remove passes and the report."""
    seen = Counter[str]()
    for part in counted.stats.values():
        seen.update({key: part[key] for key in ("docs_without_host", "lines")})
    lines = Counter[str]()
    chars = 0
    for part in removed.stats.values():
        lines.update(part["lines_removed"])
        chars += part["chars_removed"]
    return {
        "docs_without_host": seen["docs_without_host"],
        "hosts": report["hosts_seen"],
        "hosts_with_boilerplate": report["hosts_with_boilerplate"],
        "lines": seen["lines"],
        "lines_removed": dict(sorted(lines.items())),
        "chars_removed": chars,
        "top_hosts": top_hosts(report),
        "report": REPORT_FILE,
    }


def chain_counts(before: StageStats, after: StageStats) -> StageStats:
    """The counts of two stages run one after the other: `before`'s documents, `after`'s kept, both's drops.

    Documents `before` kept that `after` never saw (their shard failed within
    the failure budget) are dropped as `failed_shard`, so the counts add up."""
    dropped = before.dropped + after.dropped
    if before.kept > after.total:
        dropped["failed_shard"] += before.kept - after.total
    return StageStats(total=before.total, kept=after.kept, dropped=dropped)


def site_boilerplate(config: SiteBoilerplateStageConfig, output_path: str) -> dict[str, Any]:
    """The standalone stage: `config.input` without its site boilerplate into `output_path`; return the stats."""
    out = Path(output_path)
    if out.resolve() == Path(config.input).resolve():
        raise ValueError(f"output_path is the input {config.input!r}; give another directory, the input is read")
    work = out / WORK_DIR
    result = remove_site_boilerplate(config.rule, config, Path(config.input), out, work, config.url_field)
    details = {
        "input_docs": result.counts.total,
        "output_docs": result.counts.kept,
        **result.details,
        "shards": result.shards,
        "failed_shards": result.failed,
    }
    stats = finish_stage(out, result.counts, details)
    if not result.failed:
        shutil.rmtree(work)  # finished; with failed shards the spills stay so a rerun redoes only those
    return stats
