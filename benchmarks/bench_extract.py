"""Throughput of `tootsie datakit extract`: per core against resiliparse alone, and across cores (1 vs N workers).

Pages: the running Python's documentation rendered to HTML by `pydoc`
(`tootsie.corpora.pydoc_source.pydoc_pages`, which the demo's web source
also uses: `pydoc.html.page` of the public standard-library modules in name order),
packed into `.warc.gz` files as 200 `text/html` responses, one gzip member per
record (Common Crawl's layout).

Per core, one thread of this process each, on the same pages:

- `resiliparse`: the pages already decoded to `str` in memory, then
  `extract_plain_text(html, main_content=True)` per page: the library alone,
  no I/O, no decoding, no output;
- `tootsie`: `tootsie.datakit.extract.extract` with `workers=1` from the WARC
  file to Parquet shards and `stats.json`: reading the WARC (fastwarc), status
  and type checks, charset handling, resiliparse's extraction, NFC, the guards,
  xxh3 ids, Parquet writes and the exact-dedup reduce; the site-boilerplate
  stage off, so both sides do the same extraction;
- `tootsie+site`: the same with `extract`'s defaults (the site-boilerplate
  stage on).

Across cores: one `.warc.gz` of `--copies` copies of the pages (distinct URLs),
which `extract` splits into byte ranges (`web_source.record_ranges`), run with
`workers=1` (inline) and `workers=N` (spawned processes), site stage off.
Reported: pages/s and MB/s of HTML, the speed-up N vs 1 and the efficiency
(speed-up / N, goal >= 0.9), and the peak RSS of the largest worker process
(`VmHWM`, polled; the goal is datatrove's 137-185 MB per worker).

After one untimed warm-up round, each repeat runs every variant once, the
order rotating, so slow phases of a shared machine hit all alike; medians and
min-max over repeats, the 1-minute load average before and after. Besides wall
time, the per-core ratio is also given in CPU seconds (`os.times`, this
process and its ended children), which a busy machine disturbs far less than
wall time; the across-cores speed-up needs idle cores and wall time. Prints a
table, then one JSON line.

    python benchmarks/bench_extract.py --pages 300 --repeats 5 --copies 8 --workers 2
"""

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from resiliparse.extract.html2text import extract_plain_text

from tootsie.corpora.pydoc_source import pydoc_pages
from tootsie.corpora.warc_write import WarcRecord, http_response, write_warc
from tootsie.datakit.engine import EngineConfig, shutdown_workers
from tootsie.datakit.extract import ExtractConfig, extract
from tootsie.datakit.web_source import record_ranges


def _config(warc: Path, workers: int, site: bool) -> ExtractConfig:
    """Extract `warc` with `workers`, the site-boilerplate stage on (`site`: extract's default) or off."""
    engine = EngineConfig(workers=workers, progress=False)
    config = ExtractConfig(inputs=(str(warc),), engine=engine)
    return config if site else dataclasses.replace(config, site_boilerplate=None)


class WorkerPeaks:
    """Polls the peak RSS (`VmHWM`) of this process's child processes every 50 ms, in a thread.

    `getrusage(RUSAGE_CHILDREN)` would not do: a spawned child counts the parent's resident pages from the moment
    it forks until it execs, so it reports the parent's size. `VmHWM` belongs to the exec'd process alone."""

    def __init__(self) -> None:
        self.peak_kb: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "WorkerPeaks":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _poll(self) -> None:
        while not self.stop.wait(0.05):
            for status in Path("/proc").glob("[0-9]*/status"):
                try:
                    fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
                except OSError:  # the process ended between the listing and the read
                    continue
                if int(fields.get("PPid", "0")) == os.getpid() and "VmHWM" in fields:
                    pid = int(status.parent.name)
                    self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), int(fields["VmHWM"].split()[0]))

    def max_mb(self) -> float:
        """The largest peak of any child seen (0 when none ran)."""
        return max(self.peak_kb.values(), default=0) / 1024


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (user + system)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _rounds(
    variants: dict[str, Callable[[int], object]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of every variant per repeat, each repeat running them all in a rotated order."""
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            start, start_cpu = time.perf_counter(), _cpu_seconds()
            variants[name](repeat)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(_cpu_seconds() - start_cpu)
    return wall, cpu


def _ratios(seconds: dict[str, list[float]]) -> dict[str, dict[str, object]]:
    """Per repeat, resiliparse's seconds / each other variant's: median and min-max."""
    ratios = {
        name: [r / t for r, t in zip(seconds["resiliparse"], times, strict=True)]
        for name, times in seconds.items()
        if name != "resiliparse"
    }
    return {
        name: {"median": round(statistics.median(r), 3), "min_max": [round(min(r), 3), round(max(r), 3)]}
        for name, r in ratios.items()
    }


def _summary(seconds: list[float], pages: int, html_bytes: int) -> dict[str, object]:
    """Median and min-max pages/s and median MB/s of HTML over the repeats."""
    rates = [pages / s for s in seconds]
    return {
        "pages_per_s": round(statistics.median(rates), 1),
        "pages_per_s_min_max": [round(min(rates), 1), round(max(rates), 1)],
        "mb_per_s": round(statistics.median(html_bytes / s / 1e6 for s in seconds), 2),
    }


def main() -> None:
    """Build the WARCs, time every variant in interleaved repeats, print the tables and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300, help="pydoc pages (the stdlib gives about 206 at most)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--copies", type=int, default=8, help="copies of the pages in the across-cores WARC")
    parser.add_argument("--workers", type=int, default=2, help="N of the across-cores comparison")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    pages = [html for _, html in pydoc_pages(args.pages)]
    html_bytes = sum(len(p.encode()) for p in pages)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def records(copies: int) -> list[WarcRecord]:
            return [
                WarcRecord("response", f"https://docs.local/{c}/{i}", http_response(p.encode()))
                for c in range(copies)
                for i, p in enumerate(pages)
            ]

        warc = write_warc(root / "pydoc.warc.gz", records(1))
        big = write_warc(root / "pydoc-copies.warc.gz", records(args.copies))

        def run(name: str, warc: Path, workers: int, site: bool) -> Callable[[int], object]:
            def once(repeat: int) -> None:
                extract(_config(warc, workers, site), str(root / f"{name}-{repeat}"))
                shutdown_workers()  # each repeat starts its workers, as a command does; their CPU is then counted

            return once

        per_core: dict[str, Callable[[int], object]] = {
            "resiliparse": lambda _: [extract_plain_text(p, main_content=True) for p in pages],
            "tootsie": run("tootsie", warc, 1, site=False),
            "tootsie+site": run("site", warc, 1, site=True),
        }
        _rounds(per_core, 1)  # warm-up: imports and first-call costs stay out of the figures
        core_seconds, core_cpu = _rounds(per_core, args.repeats)
        scaling = {
            "workers=1": run("w1", big, 1, site=False),
            f"workers={args.workers}": run("wn", big, args.workers, site=False),
        }
        with WorkerPeaks() as peaks:
            scale_seconds, scale_cpu = _rounds(scaling, args.repeats)
        ranges = len(record_ranges(str(big)))
    worker_peak_mb = peaks.max_mb()
    speedups = [one / many for one, many in zip(*scale_seconds.values(), strict=True)]
    result = {
        "pages": len(pages),
        "mean_page_bytes": round(html_bytes / len(pages)),
        "repeats": args.repeats,
        "per_core": {name: _summary(s, len(pages), html_bytes) for name, s in core_seconds.items()},
        "ratio_vs_resiliparse": _ratios(core_seconds),
        "cpu_ratio_vs_resiliparse": _ratios(core_cpu),
        "across_cores": {
            "pages": len(pages) * args.copies,
            "warc_ranges": ranges,
            **{
                name: _summary(s, len(pages) * args.copies, html_bytes * args.copies)
                for name, s in scale_seconds.items()
            },
            "speedup_median": round(statistics.median(speedups), 3),
            "speedup_min_max": [round(min(speedups), 3), round(max(speedups), 3)],
            "efficiency": round(statistics.median(speedups) / args.workers, 3),
            "cpu_seconds_median": {name: round(statistics.median(s), 2) for name, s in scale_cpu.items()},
        },
        "worker_peak_rss_mb": round(worker_peak_mb, 1),
        "load_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }
    print(f"per core, {len(pages)} pages (mean {result['mean_page_bytes']:,} bytes):")
    for name, summary in result["per_core"].items():
        ratio = result["ratio_vs_resiliparse"].get(name, {}).get("median", 1.0)
        cpu_ratio = result["cpu_ratio_vs_resiliparse"].get(name, {}).get("median", 1.0)
        print(
            f"  {name:14s} {summary['pages_per_s']:8.1f} pages/s {summary['mb_per_s']:7.2f} MB/s"
            f"  ratio {ratio} (CPU seconds: {cpu_ratio})"
        )
    print(f"across cores, {len(pages) * args.copies} pages in one .warc.gz read as {ranges} ranges:")
    for name in scale_seconds:
        summary, cpu = result["across_cores"][name], result["across_cores"]["cpu_seconds_median"][name]
        print(f"  {name:14s} {summary['pages_per_s']:8.1f} pages/s {summary['mb_per_s']:7.2f} MB/s  {cpu} CPU s")
    print(
        f"  speed-up {result['across_cores']['speedup_median']} (efficiency {result['across_cores']['efficiency']},"
        f" goal >= 0.9); worker peak RSS {result['worker_peak_rss_mb']} MB;"
        f" load {result['load_1min_before_after']}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
