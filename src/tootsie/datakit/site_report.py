"""The site-boilerplate report: per site, what was removed, readable by a person (`site_boilerplate.json`).

`site_boilerplate`'s passes leave, per count shard, each site's page count
(`PAGES_SCHEMA`), and per remove shard each site's removal counts
(`REMOVED_SCHEMA`) and one sample text per removed line key
(`SAMPLE_SCHEMA`). `build_report` merges them with the boilerplate keys into:

    {"rule": {min_pages, min_fraction, min_chars, min_share, group},
     "hosts_seen": N, "hosts_with_boilerplate": M, "hosts_left_out": M - listed,
     "hosts": [{"host": "example.org", "pages": 20, "boilerplate_lines": 7,
                "lines_removed": 140, "chars_removed": 5120, "docs_dropped": 0,
                "lines_left_out": 0,
                "lines": [{"key": "9f0c...", "pages": 20, "share": 1.0,
                           "text": "Home Products Blog About"}, ...]}, ...]}

Sites are listed by lines removed (most first, then by name), at most
`REPORT_HOSTS`; lines by pages (most first, then by key), at most
`REPORT_LINES` per site, each sample cut to `SAMPLE_CHARS` characters. Every
order breaks ties on a name or key, so the report is the same bytes on a rerun.

Example: a site of 4 pages whose footer is on all of them lists
`{"pages": 4, "share": 1.0, "text": "© 2024 Example Corp. All rights reserved."}`.
"""

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPORT_HOSTS = 1000  # sites listed; a crawl of millions of sites still gives a report a person can open
REPORT_LINES = 50  # boilerplate lines listed per site: a template has tens, not hundreds
SAMPLE_CHARS = 200  # characters of a line's sample text
TOP_HOSTS = 10  # sites copied into stats.json
PAGES_SCHEMA = pa.schema([("host", pa.uint64()), ("site", pa.string()), ("pages", pa.int64())])
REMOVED_SCHEMA = pa.schema(
    [
        ("host", pa.uint64()),
        ("site", pa.string()),
        ("lines_removed", pa.int64()),
        ("chars_removed", pa.int64()),
        ("docs_dropped", pa.int64()),
    ]
)
SAMPLE_SCHEMA = pa.schema([("key", pa.uint64()), ("host", pa.uint64()), ("text", pa.string())])
_REMOVAL_COUNTS = ("lines_removed", "chars_removed", "docs_dropped")


def _concat(paths: list[Path], schema: pa.Schema) -> pa.Table:
    """The Parquet files at `paths` as one table (an empty one for no files)."""
    return pa.concat_tables([pq.read_table(p) for p in paths]) if paths else schema.empty_table()


def build_report(
    rule: dict[str, Any],
    boilerplate: np.ndarray,
    count_dir: Path,
    count_shards: tuple[str, ...],
    remove_dirs: list[Path],
) -> dict[str, Any]:
    """The report (module docstring) from the rule's fields, the boilerplate keys (`key`, `host`, `pages`) and the
    passes' tables: `<count_dir>/<shard>.hosts.parquet`, and `hosts.parquet` and `samples.parquet` of `remove_dirs`."""
    pages_table = _concat([count_dir / f"{shard}.hosts.parquet" for shard in count_shards], PAGES_SCHEMA)
    sites = pages_table.group_by(["host", "site"]).aggregate([("pages", "sum")])
    site_of = dict(zip(sites.column("host").to_pylist(), sites.column("site").to_pylist(), strict=True))
    pages_of = dict(zip(sites.column("host").to_pylist(), sites.column("pages_sum").to_pylist(), strict=True))
    removal = _concat([d / "hosts.parquet" for d in remove_dirs], REMOVED_SCHEMA)
    removal = removal.group_by("host").aggregate([(name, "sum") for name in _REMOVAL_COUNTS])
    removed_of = {
        host: dict(zip(_REMOVAL_COUNTS, counts, strict=True))
        for host, *counts in zip(
            *(removal.column(n).to_pylist() for n in ["host", *(f"{c}_sum" for c in _REMOVAL_COUNTS)])
        )
    }
    samples = _concat([d / "samples.parquet" for d in remove_dirs], SAMPLE_SCHEMA)
    sample_keys, first = np.unique(samples.column("key").to_numpy(), return_index=True)
    sample_texts = samples.column("text").take(pa.array(first)).to_pylist() if len(first) else []
    sample_of = dict(zip(sample_keys.tolist(), sample_texts, strict=True))

    order = np.lexsort((boilerplate["key"], -boilerplate["pages"], boilerplate["host"]))  # by host, then lines
    entries = []
    grouped = np.split(order, np.flatnonzero(np.diff(boilerplate["host"][order])) + 1) if len(order) else []
    for group in grouped:
        host = int(boilerplate["host"][group[0]])
        total = pages_of.get(host, 0)
        counts = removed_of.get(host, dict.fromkeys(_REMOVAL_COUNTS, 0))
        lines = [
            {
                "key": f"{key:016x}",
                "pages": pages,
                "share": round(pages / total, 4) if total else 0.0,
                "text": sample_of.get(key, "")[:SAMPLE_CHARS],
            }
            for key, pages in zip(
                boilerplate["key"][group[:REPORT_LINES]].tolist(), boilerplate["pages"][group[:REPORT_LINES]].tolist()
            )
        ]
        entries.append(
            {
                "host": site_of.get(host, ""),
                "pages": total,
                "boilerplate_lines": len(group),
                **counts,
                "lines_left_out": max(len(group) - REPORT_LINES, 0),
                "lines": lines,
            }
        )
    entries.sort(key=lambda entry: (-entry["lines_removed"], entry["host"]))
    return {
        "rule": rule,
        "hosts_seen": len(pages_of),
        "hosts_with_boilerplate": len(entries),
        "hosts_left_out": max(len(entries) - REPORT_HOSTS, 0),
        "hosts": entries[:REPORT_HOSTS],
    }


def top_hosts(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The first `TOP_HOSTS` sites of the report without their lines, for stats.json."""
    keys = ("host", "pages", "boilerplate_lines", *_REMOVAL_COUNTS)
    return [{key: entry[key] for key in keys} for entry in report["hosts"][:TOP_HOSTS]]
