"""Throughput of `tootsie datakit extract` vs calling resiliparse directly, on the same real HTML pages.

Pages: the running Python's documentation rendered to HTML by `pydoc`
(`tootsie.corpora.pydoc_source.pydoc_pages`, which the demo's web source
also uses: `pydoc.html.page` of the public standard-library modules in name order),
packed into one `.warc.gz` as 200 `text/html` responses. Two ways to get the
main text of every page, one thread of this process each:

- `resiliparse`: the pages already decoded to `str` in memory, then
  `extract_plain_text(html, main_content=True)` per page: the library alone,
  no I/O, no decoding, no output;
- `tootsie`: `tootsie.datakit.extract.extract` with `workers=1` from the WARC
  file to Parquet shards and `stats.json`: reading the WARC (fastwarc), status
  and type checks, charset handling, resiliparse's extraction, NFC, the guards,
  xxh3 ids, Parquet writes and the exact-dedup reduce.

Each repeat runs both once, the order alternating, so slow phases of a shared
machine hit both alike. Reported: median and min-max pages/s over repeats, the
median ratio tootsie / resiliparse (goal >= 0.8), and the 1-minute load
average before and after. Prints a table, then one JSON line.

    python benchmarks/bench_extract.py --pages 400 --repeats 7
"""

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from resiliparse.extract.html2text import extract_plain_text

from tootsie.corpora.pydoc_source import pydoc_pages
from tootsie.corpora.warc_write import WarcRecord, http_response, write_warc
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract


def main() -> None:
    """Build the WARC, time both ways in interleaved repeats, print the table and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    pages = [html for _, html in pydoc_pages(args.pages)]
    with tempfile.TemporaryDirectory() as tmp:
        warc = write_warc(
            Path(tmp) / "pydoc.warc.gz",
            [WarcRecord("response", f"https://docs.local/{i}", http_response(p.encode())) for i, p in enumerate(pages)],
        )
        config = ExtractConfig(inputs=(str(warc),), engine=EngineConfig(workers=1, progress=False))
        rates: dict[str, list[float]] = {"resiliparse": [], "tootsie": []}
        docs = 0
        for repeat in range(args.repeats):
            order = ("resiliparse", "tootsie") if repeat % 2 == 0 else ("tootsie", "resiliparse")
            for name in order:
                start = time.perf_counter()
                if name == "resiliparse":
                    for page in pages:
                        extract_plain_text(page, main_content=True)
                else:
                    docs = extract(config, str(Path(tmp) / f"out-{repeat}"))["output_docs"]
                rates[name].append(len(pages) / (time.perf_counter() - start))
    ratios = [t / r for t, r in zip(rates["tootsie"], rates["resiliparse"])]
    result = {
        "pages": len(pages),
        "mean_page_bytes": round(sum(len(p.encode()) for p in pages) / len(pages)),
        "output_docs": docs,
        "repeats": args.repeats,
        **{f"{n}_pages_per_s": round(statistics.median(v), 1) for n, v in rates.items()},
        **{f"{n}_min_max": [round(min(v), 1), round(max(v), 1)] for n, v in rates.items()},
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_min_max": [round(min(ratios), 3), round(max(ratios), 3)],
        "load_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }
    for name, values in rates.items():
        print(f"{name:12s} {statistics.median(values):8.1f} pages/s  (min {min(values):.1f}, max {max(values):.1f})")
    print(f"tootsie / resiliparse: {result['ratio_median']} (goal >= 0.8)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
