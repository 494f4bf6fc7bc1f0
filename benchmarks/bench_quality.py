"""Throughput of the quality stage (and of consolidate applying its attributes) on stdlib text.

Two document directories are built from the running Python's standard library:
`prose` (module docstrings and pydoc topics, the demo's prose source) scored
with `QualityRules()` (every family), and `code` (source files cut into
~4 KB documents, as in `corpus.py`) scored with `QualityRules.for_code()`.
Both are cycled, each copy marked with a header line, up to `--mb` megabytes
per source. For each worker count, `quality()` runs through the shard engine;
then `consolidate()` applies `quality_pass` and `c4_removed_spans` to the prose.
Prints docs/s, MB/s, MB/s per core (wall clock / workers) and MB per CPU
second (user + system time of this process and its workers, which stays
meaningful on a busy machine) per run; last line: one JSON object.

    python benchmarks/bench_quality.py --mb 20 --workers 1,2
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))

from corpus import documents  # noqa: E402

from tootsie.corpora.stdlib_source import StdlibSourceConfig, iter_code_and_prose  # noqa: E402
from tootsie.datakit.consolidate import AttributeFilter, ConsolidateConfig, consolidate  # noqa: E402
from tootsie.datakit.engine import EngineConfig  # noqa: E402
from tootsie.datakit.ids import content_id  # noqa: E402
from tootsie.datakit.quality import QualityConfig, QualityRules, quality  # noqa: E402


def prose_documents(megabytes: float) -> list[str]:
    """Docstring and pydoc-topic documents, cycled (each copy marked) until `megabytes` of text."""
    base = [text for source, _, text in iter_code_and_prose(StdlibSourceConfig(max_code_bytes=1)) if source == "prose"]
    out, produced, copy = [], 0, 0
    while produced < megabytes * 1e6:
        for text in base:
            doc = f"Copy {copy}.\n{text}"
            out.append(doc)
            produced += len(doc.encode("utf-8"))
            if produced >= megabytes * 1e6:
                break
        copy += 1
    return out


def write_documents(directory: Path, texts: list[str], shard_mb: float) -> tuple[int, int]:
    """Write `texts` as document shards of about `shard_mb`; return (documents, UTF-8 bytes)."""
    directory.mkdir(parents=True)
    shard: list[str] = []
    size = total = index = 0
    for i, text in enumerate(texts):
        shard.append(text)
        size += len(text.encode("utf-8"))
        if size >= shard_mb * 1e6 or i == len(texts) - 1:
            ids = [content_id(t) for t in shard]
            pq.write_table(
                pa.table({"id": ids, "text": shard, "source_id": ids}), directory / f"part-{index:05d}.parquet"
            )
            total, shard, size, index = total + size, [], 0, index + 1
    return len(texts), total


def cpu_seconds() -> float:
    """User + system CPU time of this process and its reaped children so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def report(label: str, docs: int, nbytes: int, wall: float, cpu: float, cores: int) -> dict[str, float]:
    """Print and return one run's figures."""
    mb = nbytes / 1e6
    rate = mb / wall
    row = {
        "docs": docs,
        "mb": round(mb, 2),
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "docs_per_s": round(docs / wall, 1),
    }
    row |= {"mb_per_s": round(rate, 3), "mb_per_s_per_core": round(rate / cores, 3), "mb_per_cpu_s": round(mb / cpu, 3)}
    print(
        f"{label:<28} {docs:>6} docs {mb:5.1f} MB {wall:6.2f} s {row['docs_per_s']:>6.0f} docs/s "
        f"{rate:6.2f} MB/s {row['mb_per_s_per_core']:6.2f} MB/s/core {row['mb_per_cpu_s']:6.2f} MB/cpu-s"
    )
    return row


def main() -> None:
    """Build the corpora, time quality per source and worker count, then consolidate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0, help="megabytes of text per source")
    parser.add_argument("--workers", default=f"1,{os.cpu_count() or 1}", help="comma-separated worker counts")
    parser.add_argument("--shard-mb", type=float, default=4.0, help="megabytes per document shard")
    args = parser.parse_args()
    worker_counts = sorted({int(w) for w in args.workers.split(",")})
    results: dict[str, object] = {"mb_per_source": args.mb, "cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpora = {
            "prose": (prose_documents(args.mb), QualityRules()),
            "code": (list(documents(args.mb)), QualityRules.for_code()),
        }
        for source, (texts, rules) in corpora.items():
            docs, nbytes = write_documents(root / source, texts, args.shard_mb)
            for workers in worker_counts:
                engine = EngineConfig(workers=workers, progress=False)
                out = root / f"quality-{source}-{workers}"
                started, cpu = time.perf_counter(), cpu_seconds()
                stats = quality(QualityConfig(input=str(root / source), rules=rules, engine=engine), str(out))
                row = report(
                    f"quality {source} workers={workers}",
                    docs,
                    nbytes,
                    time.perf_counter() - started,
                    cpu_seconds() - cpu,
                    workers,
                )
                results[f"quality_{source}_w{workers}"] = row | {"kept": stats["kept"]}
        workers = worker_counts[-1]
        attributes = str(root / f"quality-prose-{workers}")
        filters = (
            AttributeFilter("quality", attributes, "quality_pass", drop_value=False),
            AttributeFilter("c4_lines", attributes, "c4_removed_spans", remove_spans=True),
        )
        docs, nbytes = len(corpora["prose"][0]), sum(len(t.encode("utf-8")) for t in corpora["prose"][0])
        started, cpu = time.perf_counter(), cpu_seconds()
        stats = consolidate(
            ConsolidateConfig(
                input=str(root / "prose"), attributes=filters, engine=EngineConfig(workers=workers, progress=False)
            ),
            str(root / "consolidated"),
        )
        row = report(
            f"consolidate prose workers={workers}",
            docs,
            nbytes,
            time.perf_counter() - started,
            cpu_seconds() - cpu,
            workers,
        )
        results[f"consolidate_prose_w{workers}"] = row | {
            "output_docs": stats["output_docs"],
            "removed_by": stats["removed_by"],
            "chars_removed_by": stats["chars_removed_by"],
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
