"""Benchmark: decontamination scan throughput (docs/s and MB/s per core) on real local text.

Corpus: `benchmarks/corpus.py`'s documents (this Python's standard-library
sources cut into pieces of about `--doc-chars` characters, repeated with a
varied first line past the library's ~30 MB), `--mb` MB, written as a
document directory. One document in `--plant-every` gets a GSM8K-style eval
question planted in it (so the hit path runs and recall is checked), and
another a *sibling*: a question from the same templates that is not in the
eval set (how often siblings reach the threshold shows what 13-gram overlap
cannot tell apart). Eval set: `--eval-items` questions from the test suite's
template generator (1,319 = the size of GSM8K's test split).

Reported: the stage's wall time with `--workers` processes (index build,
scan, report) as docs/s and MB/s per core (wall time x workers); the same per
CPU-second of all its processes (robust to other load on the machine); and a
one-process breakdown of the scan (normalize + split + word hashing; n-gram
keys + lookup + overlaps).

Run from the repository root:
    /tmp/venv/bin/python benchmarks/bench_decontaminate.py --mb 40 --workers 1
The last line printed is a JSON object with every figure.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for the test suite's eval-set generator
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for corpus.py

from corpus import documents as corpus_documents  # noqa: E402

from tests.datakit.test_decontaminate import gsm8k_style_items, plant, write_documents, write_jsonl  # noqa: E402
from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate  # noqa: E402
from tootsie.datakit.engine import EngineConfig  # noqa: E402
from tootsie.datakit.ids import content_id  # noqa: E402
from tootsie.datakit.ngrams import NgramIndex, word_hashes  # noqa: E402


def cpu_seconds() -> float:
    """CPU time of this process and its finished child processes (the stage's workers)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def phase_breakdown(docs_dir: Path, index: NgramIndex) -> dict[str, float]:
    """Seconds spent in each scan phase, in this process, over the whole corpus."""
    seconds = {"normalize_split_hash": 0.0, "ngram_keys_lookup_overlap": 0.0}
    for path in sorted(docs_dir.glob("part-*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024, columns=["text"]):
            start = time.perf_counter()
            hashes, counts = word_hashes(batch.column("text"))
            hashed = time.perf_counter()
            index.overlaps(hashes, counts)
            seconds["normalize_split_hash"] += hashed - start
            seconds["ngram_keys_lookup_overlap"] += time.perf_counter() - hashed
    return seconds


def main() -> None:
    """Build the corpus and eval set, run the stage, print figures and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=40.0, help="corpus size in MB of text")
    parser.add_argument("--doc-chars", type=int, default=4000, help="characters per document")
    parser.add_argument("--eval-items", type=int, default=1319, help="eval questions (GSM8K test has 1,319)")
    parser.add_argument(
        "--plant-every", type=int, default=100, help="plant an eval question in one document in this many"
    )
    parser.add_argument("--shards", type=int, default=8, help="document shards")
    parser.add_argument("--workers", type=int, default=1, help="worker processes of the stage")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where to write the corpus (default: a temporary directory, removed after)",
    )
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-decon-"))
    try:
        generated = gsm8k_style_items(2 * args.eval_items, seed=0)
        items, siblings = generated[: args.eval_items], generated[args.eval_items :]
        documents = list(corpus_documents(args.mb, args.doc_chars))
        rng = random.Random(0)
        planted, sibling_docs = {}, []
        for k in range(0, len(documents), args.plant_every):
            item = items[rng.randrange(len(items))]
            documents[k] = plant(item["question"], documents[k], k, rng)
            planted[k] = item["id"]
            sibling = k + args.plant_every // 2
            if sibling < len(documents):
                documents[sibling] = plant(
                    siblings[rng.randrange(len(siblings))]["question"], documents[sibling], k, rng
                )
                sibling_docs.append(sibling)
        write_documents(workdir / "docs", documents, shards=args.shards)
        eval_file = write_jsonl(workdir / "gsm8k_style_test.jsonl", items)
        corpus_mb = sum(len(d.encode("utf-8")) for d in documents) / 1e6
        config = DecontaminateConfig(
            input=str(workdir / "docs"),
            eval_files=(str(eval_file),),
            engine=EngineConfig(workers=args.workers, progress=False),
        )

        start = time.perf_counter()
        index = NgramIndex.build([[item["question"]] for item in items], config.ngram)
        index_seconds = time.perf_counter() - start
        start, cpu_start = time.perf_counter(), cpu_seconds()
        stats = decontaminate(config, str(workdir / "out"))
        stage_seconds, stage_cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
        phases = phase_breakdown(workdir / "docs", index)

        rows = {}
        for path in sorted((workdir / "out").glob("part-*.parquet")):
            rows.update((row["id"], row) for row in pq.read_table(path).to_pylist())
        found = sum(eval_id in rows[content_id(documents[k])]["matched_eval_ids"] for k, eval_id in planted.items())
        sibling_rows = [rows[content_id(documents[k])] for k in sibling_docs]
        sibling_overlap = statistics.median(row["max_overlap"] for row in sibling_rows) if sibling_rows else 0.0
        sibling_flagged = sum(row["contaminated"] for row in sibling_rows) / max(len(sibling_rows), 1)
        core_seconds = stage_seconds * args.workers
        result = {
            "docs": len(documents),
            "corpus_mb": round(corpus_mb, 2),
            "eval_items": len(items),
            "eval_ngrams": int(len(index.keys)),
            "workers": args.workers,
            "index_build_s": round(index_seconds, 4),
            "stage_s": round(stage_seconds, 3),
            "stage_cpu_s": round(stage_cpu, 3),
            "docs_per_s_per_core": round(len(documents) / core_seconds, 1),
            "mb_per_s_per_core": round(corpus_mb / core_seconds, 2),
            "docs_per_cpu_s": round(len(documents) / stage_cpu, 1),
            "mb_per_cpu_s": round(corpus_mb / stage_cpu, 2),
            "scan_phases_s": {name: round(value, 3) for name, value in phases.items()},
            "scan_only_mb_per_s": round(corpus_mb / sum(phases.values()), 2),
            "planted": len(planted),
            "planted_recall": round(found / max(len(planted), 1), 4),
            "siblings": len(sibling_rows),
            "sibling_flagged_fraction": round(sibling_flagged, 4),
            "sibling_median_max_overlap": round(sibling_overlap, 4),
            "stats": stats,
        }
        print(
            f"corpus: {len(documents):,} docs, {corpus_mb:.1f} MB; eval: {len(items):,} items, "
            f"{len(index.keys):,} distinct {config.ngram}-grams (index built in {index_seconds * 1e3:.0f} ms)"
        )
        print(
            f"stage with {args.workers} worker(s): {stage_seconds:.2f} s wall -> "
            f"{result['docs_per_s_per_core']:,} docs/s/core, {result['mb_per_s_per_core']} MB/s/core"
        )
        print(
            f"stage CPU time (all processes): {stage_cpu:.2f} s -> "
            f"{result['docs_per_cpu_s']:,} docs per CPU-second, {result['mb_per_cpu_s']} MB per CPU-second"
        )
        print(f"scan phases in one process: {result['scan_phases_s']} -> {result['scan_only_mb_per_s']} MB/s")
        print(
            f"planted recall: {found}/{len(planted)}; siblings flagged: {sibling_flagged:.1%} "
            f"(median max_overlap {sibling_overlap:.3f}); stats: {stats}"
        )
        print(json.dumps(result))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
