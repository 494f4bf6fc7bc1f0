"""`tootsie datakit filter` and `dedup --fuzzy` from the command line at 1 and N workers: does a second worker help?

Issue 30 measured both stages *slower* at 2 workers than at 1 on 587 pydoc
pages in 8 WARCs (filter 3.09 s → 6.03 s, fuzzy dedup 1.86 s → 5.35 s): every
spawned worker imported the CLI and, with it, JAX. This benchmark repeats that
measurement the way a user meets it: the pages of the running Python's
documentation (`pydoc_pages`, as the demo's web source), packed into `--warcs`
WARC files, extracted once (site stage off, so every page survives), then each
stage run as a fresh `tootsie datakit ...` process with `--workers 1` and
`--workers N`, the order rotating per repeat, into a fresh output directory
each time. Wall seconds include the interpreter's start, as the user's do.
Prints medians and min-max per (stage, workers), the speed-up N vs 1, the
1-minute load average before and after, and one JSON line.

    python benchmarks/bench_stage_workers.py --pages 587 --warcs 8 --workers 2 --repeats 3
"""

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tootsie.corpora.pydoc_source import pydoc_pages
from tootsie.corpora.warc_write import WarcRecord, http_response, write_warc
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract

STAGES = {"filter": ["filter"], "fuzzy dedup": ["dedup", "--fuzzy"]}
"""Stage label → the `tootsie datakit` arguments before the input directory."""


def write_warcs(pages: int, warcs: int, directory: Path) -> float:
    """`pages` pydoc pages dealt round-robin into `warcs` .warc.gz files; returns the MB of HTML."""
    html = list(pydoc_pages(pages))
    for index in range(warcs):
        records = [
            WarcRecord("response", f"http://pydoc.local/{name}.html", http_response(body.encode("utf-8")))
            for name, body in html[index::warcs]
        ]
        write_warc(directory / f"pages-{index:02d}.warc.gz", records)
    return sum(len(body.encode("utf-8")) for _, body in html) / 1e6


def run_stage(args: list[str], documents: Path, out: Path, workers: int) -> float:
    """Wall seconds of one `tootsie datakit` process on `documents`, into a fresh `out`."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "tootsie.cli.main", "datakit", *args, str(documents), "--out", str(out)]
    start = time.perf_counter()
    subprocess.run([*command, "--workers", str(workers), "--quiet"], check=True)
    return time.perf_counter() - start


def main() -> None:
    """Build the documents, time every (stage, workers) in rotated rounds, print the table and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=587, help="pydoc pages (the issue's 587)")
    parser.add_argument("--warcs", type=int, default=8, help="WARC files, so extract writes several shards")
    parser.add_argument("--workers", type=int, default=2, help="N, compared with 1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--shard-mb", type=float, default=None, help="extract's part size (shard_bytes); default 64 MB: one part here"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "warcs").mkdir()
        html_mb = write_warcs(args.pages, args.warcs, root / "warcs")
        config = ExtractConfig(inputs=(str(root / "warcs"),), engine=EngineConfig(workers=1, progress=False))
        shard_bytes = int(args.shard_mb * 1e6) if args.shard_mb else config.shard_bytes
        config = dataclasses.replace(config, site_boilerplate=None, shard_bytes=shard_bytes)
        stats = extract(config, str(root / "docs"))
        variants = [(stage, workers) for stage in STAGES for workers in (1, args.workers)]
        seconds: dict[tuple[str, int], list[float]] = {variant: [] for variant in variants}
        for repeat in range(args.repeats):
            for stage, workers in variants[repeat % len(variants) :] + variants[: repeat % len(variants)]:
                seconds[stage, workers].append(run_stage(STAGES[stage], root / "docs", root / "out", workers))
    load_after = os.getloadavg()[0]
    parts = stats["shards"]
    print(f"{args.pages} pages, {html_mb:.1f} MB of HTML in {args.warcs} WARCs → {stats['output_docs']} documents")
    print(f"in {parts} part(s) of at most {shard_bytes / 1e6:g} MB of text: the stages' shards")
    print(f"{'stage':<12} {'workers':>7} {'median s':>9} {'min-max':>13} {'speed-up':>9}")
    rows = []
    for stage, workers in variants:
        values = seconds[stage, workers]
        median = statistics.median(values)
        speedup = statistics.median(seconds[stage, 1]) / median
        rows.append({"stage": stage, "workers": workers, "median_s": median, "seconds": values, "speedup": speedup})
        print(f"{stage:<12} {workers:>7} {median:>9.2f} {min(values):>6.2f}-{max(values):<6.2f} {speedup:>9.2f}")
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    summary = {"pages": args.pages, "html_mb": html_mb, "warcs": args.warcs, "parts": parts, "repeats": args.repeats}
    print(json.dumps({**summary, "rows": rows, "load_before": load_before, "load_after": load_after}))


if __name__ == "__main__":
    main()
