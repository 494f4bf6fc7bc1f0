"""Throughput and memory of normalize and tokenize, and tokenize vs raw `encode_batch` at equal parallelism.

For each corpus size (default 30 MB and 300 MB, 10x apart), each stage in a
fresh subprocess so peak-memory readings are clean:
  1. normalize (JSONL → Parquet) with the shard engine, once;
  2. a tokenizer trained once on the first size's documents;
  3. `--repeats` rounds, each running, in an order that alternates per round:
     - tokenize (Parquet → token cache, a fresh output directory every time)
       with `--workers` processes, one tokenizer thread each;
     - the peer: raw `tokenizers` `encode_batch` over the same Parquet texts in
       batches of the same 256 documents, in one process with
       `RAYON_NUM_THREADS=--workers` (tokenizers 0.23 reads that variable; the library's own fast path: Rayon
       threads), so both sides use the same number of cores.
Prints per stage the median and min-max of seconds, docs/s, MB/s, MB/s per
core and peak RSS, and the per-round ratio raw-encode seconds / tokenize
seconds (median and min-max; > 1 means tokenize is faster). Last line: one
JSON object.

    python benchmarks/bench_datakit.py --sizes 30,300 --workers 2 --repeats 3
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from corpus import write_jsonl_corpus  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from tootsie.datakit.engine import EngineConfig
stage, args = sys.argv[1], json.loads(sys.argv[2])
started = time.perf_counter()
if stage == "normalize":
    from tootsie.datakit.normalize import NormalizeConfig, normalize
    result = normalize(
        NormalizeConfig(inputs=(args["input"],), engine=EngineConfig(workers=args["workers"], progress=False)),
        args["out"],
    )
elif stage == "tokenize":
    from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
    result = tokenize_documents(
        TokenizeConfig(
            input=args["input"],
            tokenizer=args["tokenizer"],
            engine=EngineConfig(workers=args["workers"], progress=False),
        ),
        args["out"],
    )
elif stage == "raw_encode":
    from tootsie.datakit.parquet_io import iter_texts
    from tootsie.datakit.tokenizer import load_tokenizer
    tokenizer, tokens = load_tokenizer(args["tokenizer"]), 0
    for texts in iter_texts(args["input"], batch_rows=256):
        tokens += sum(len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False))
    result = {"tokens": tokens}
elif stage == "train_tokenizer":
    from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
    result = train_tokenizer(TokenizerTrainConfig(inputs=(args["input"],), vocab_size=8192), args["out"])
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "self_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "result": result}))
"""


def run_stage(stage: str, env: dict[str, str] | None = None, **args: object) -> dict:
    """Run one stage in a fresh interpreter (with extra environment `env`) and return its timing and memory record."""
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, stage, json.dumps(args)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def bench_size(root: Path, megabytes: int, workers: int, repeats: int, tokenizer: Path | None) -> tuple[dict, Path]:
    """All stages at one corpus size; trains the tokenizer on the first size if none is given."""
    raw = root / f"raw-{megabytes}"
    docs, text_bytes = write_jsonl_corpus(raw, megabytes)
    normalized_dir = str(root / f"norm-{megabytes}")
    normalized = run_stage("normalize", input=str(raw), out=normalized_dir, workers=workers)
    if tokenizer is None:
        run_stage("train_tokenizer", input=normalized_dir, out=str(root / "tok"))
        tokenizer = root / "tok" / "tokenizer.json"
    threads = {"RAYON_NUM_THREADS": str(workers)}  # the peer's Rayon pool; tokenize's workers run one thread each
    runs: dict[str, list[dict]] = {"tokenize": [], "raw_encode_batch": []}
    for round_index in range(repeats):
        order = ["tokenize", "raw_encode_batch"][:: 1 if round_index % 2 == 0 else -1]
        for stage in order:
            if stage == "tokenize":
                out = str(root / f"cache-{megabytes}-{round_index}")
                runs[stage].append(
                    run_stage(
                        "tokenize", threads, input=normalized_dir, tokenizer=str(tokenizer), out=out, workers=workers
                    )
                )
                shutil.rmtree(out)
            else:
                runs[stage].append(run_stage("raw_encode", threads, input=normalized_dir, tokenizer=str(tokenizer)))
        print(
            f"  {megabytes} MB round {round_index + 1}/{repeats}: tokenize {runs['tokenize'][-1]['seconds']:.1f} s, "
            f"raw encode_batch {runs['raw_encode_batch'][-1]['seconds']:.1f} s",
            flush=True,
        )
    ratios = [r["seconds"] / t["seconds"] for t, r in zip(runs["tokenize"], runs["raw_encode_batch"], strict=True)]
    mb = text_bytes / 1e6
    figures = {
        "megabytes": round(mb, 1),
        "docs": docs,
        "normalize": _rates([normalized], docs, mb, workers),
        "tokenize": _rates(runs["tokenize"], docs, mb, workers),
        "raw_encode_batch": _rates(runs["raw_encode_batch"], docs, mb, workers),
        "tokenize_vs_raw_encode_ratio": _spread(ratios, 3),
        "tokens": runs["tokenize"][0]["result"]["num_tokens"],
    }
    return figures, tokenizer


def _spread(values: list[float], digits: int) -> dict[str, float]:
    return {
        "median": round(float(np.median(values)), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def _rates(records: list[dict], docs: int, mb: float, cores: int) -> dict:
    """Median and min-max over `records` (one per repeat) of each rate, and the largest peak RSS."""
    seconds = [r["seconds"] for r in records]
    return {
        "seconds": _spread(seconds, 2),
        "docs_per_s": _spread([docs / s for s in seconds], 0),
        "mb_per_s": _spread([mb / s for s in seconds], 2),
        "mb_per_s_per_core": _spread([mb / s / cores for s in seconds], 2),
        "peak_rss_mb_worker": round(max(r["worker_rss_mb"] for r in records), 1),
        "peak_rss_mb_main": round(max(r["self_rss_mb"] for r in records), 1),
    }


def main() -> None:
    """Parse flags, run every size, print a table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="30,300", help="corpus sizes in MB, comma-separated")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="tokenize processes = the peer's Rayon threads"
    )
    parser.add_argument("--repeats", type=int, default=3, help="rounds of tokenize and raw encode_batch, interleaved")
    args = parser.parse_args()
    results, tokenizer = [], None
    with tempfile.TemporaryDirectory(prefix="tootsie-bench-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            figures, tokenizer = bench_size(Path(tmp), size, args.workers, args.repeats, tokenizer)
            results.append(figures)
            print(
                f"{figures['megabytes']} MB, {figures['docs']} docs, {args.workers} cores per side, "
                f"{args.repeats} rounds (median [min-max])"
            )
            for stage in ("normalize", "tokenize", "raw_encode_batch"):
                r = figures[stage]
                print(
                    f"  {stage:<17} {r['seconds']['median']:>8.1f} s "
                    f"[{r['seconds']['min']:.1f}-{r['seconds']['max']:.1f}]  "
                    f"{r['mb_per_s']['median']:>6.2f} MB/s [{r['mb_per_s']['min']:.2f}-{r['mb_per_s']['max']:.2f}]  "
                    f"{r['mb_per_s_per_core']['median']:>6.2f} MB/s/core  "
                    f"worker RSS {r['peak_rss_mb_worker']:>7.1f} MB  main RSS {r['peak_rss_mb_main']:>7.1f} MB"
                )
            ratio = figures["tokenize_vs_raw_encode_ratio"]
            print(
                f"  tokenize / raw encode_batch throughput: "
                f"{ratio['median']:.2f} [{ratio['min']:.2f}-{ratio['max']:.2f}]"
            )
    print(
        json.dumps(
            {
                "benchmark": "datakit",
                "workers": args.workers,
                "repeats": args.repeats,
                "cpu_count": os.cpu_count(),
                "loadavg_1min_end": os.getloadavg()[0],
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
