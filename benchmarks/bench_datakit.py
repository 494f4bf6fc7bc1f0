"""Throughput and memory of normalize and tokenize, and tokenize vs raw `encode_batch`.

For each corpus size (default 30 MB and 300 MB, 10x apart) this runs, each in a
fresh subprocess so peak-memory readings are clean:
  1. normalize (JSONL → Parquet) with the shard engine,
  2. tokenize (Parquet → token cache) with a tokenizer trained once on a sample,
  3. raw `tokenizers` `encode_batch` over the same texts (the peer baseline),
and prints docs/s, MB/s, MB/s per core, peak RSS of the largest worker, and the
tokenize / raw-encode throughput ratio. Last line: one JSON object.

    python benchmarks/bench_datakit.py --sizes 30,300 --workers 2
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from corpus import write_jsonl_corpus  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from tootsie.datakit.engine import EngineConfig
stage, args = sys.argv[1], json.loads(sys.argv[2])
started = time.perf_counter()
if stage == "normalize":
    from tootsie.datakit.normalize import NormalizeConfig, normalize
    result = normalize(NormalizeConfig(inputs=(args["input"],), engine=EngineConfig(workers=args["workers"], progress=False)), args["out"])
elif stage == "tokenize":
    from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
    result = tokenize_documents(TokenizeConfig(input=args["input"], tokenizer=args["tokenizer"], engine=EngineConfig(workers=args["workers"], progress=False)), args["out"])
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


def run_stage(stage: str, **args: object) -> dict:
    """Run one stage in a fresh interpreter and return its timing and memory record."""
    completed = subprocess.run([sys.executable, "-c", CHILD, stage, json.dumps(args)], capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def bench_size(root: Path, megabytes: int, workers: int, tokenizer: Path | None) -> tuple[dict, Path]:
    """All stages at one corpus size; trains the tokenizer on the first size if none is given."""
    raw = root / f"raw-{megabytes}"
    docs, text_bytes = write_jsonl_corpus(raw, megabytes)
    normalized = run_stage("normalize", input=str(raw), out=str(root / f"norm-{megabytes}"), workers=workers)
    if tokenizer is None:
        run_stage("train_tokenizer", input=str(root / f"norm-{megabytes}"), out=str(root / "tok"))
        tokenizer = root / "tok" / "tokenizer.json"
    tokenized = run_stage("tokenize", input=str(root / f"norm-{megabytes}"), tokenizer=str(tokenizer), out=str(root / f"cache-{megabytes}"), workers=workers)
    raw_encode = run_stage("raw_encode", input=str(root / f"norm-{megabytes}"), tokenizer=str(tokenizer))
    mb = text_bytes / 1e6
    figures = {
        "megabytes": round(mb, 1),
        "docs": docs,
        "normalize": _rates(normalized, docs, mb, workers),
        "tokenize": _rates(tokenized, docs, mb, workers),
        "raw_encode_batch": _rates(raw_encode, docs, mb, os.cpu_count() or 1),  # Rayon threads use every core
        "tokenize_vs_raw_encode_ratio": round(raw_encode["seconds"] / tokenized["seconds"], 3),
        "tokens": tokenized["result"]["num_tokens"],
    }
    return figures, tokenizer


def _rates(record: dict, docs: int, mb: float, workers: int) -> dict:
    return {
        "seconds": round(record["seconds"], 2),
        "docs_per_s": round(docs / record["seconds"]),
        "mb_per_s": round(mb / record["seconds"], 2),
        "mb_per_s_per_core": round(mb / record["seconds"] / workers, 2),
        "peak_rss_mb_worker": round(record["worker_rss_mb"], 1),
        "peak_rss_mb_main": round(record["self_rss_mb"], 1),
    }


def main() -> None:
    """Parse flags, run every size, print a table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="30,300", help="corpus sizes in MB, comma-separated")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    results, tokenizer = [], None
    with tempfile.TemporaryDirectory(prefix="tootsie-bench-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            figures, tokenizer = bench_size(Path(tmp), size, args.workers, tokenizer)
            results.append(figures)
            print(f"{figures['megabytes']} MB, {figures['docs']} docs, {args.workers} workers")
            for stage in ("normalize", "tokenize", "raw_encode_batch"):
                r = figures[stage]
                print(f"  {stage:<17} {r['seconds']:>8.1f} s  {r['docs_per_s']:>8} docs/s  {r['mb_per_s']:>6.2f} MB/s  {r['mb_per_s_per_core']:>6.2f} MB/s/core  worker RSS {r['peak_rss_mb_worker']:>7.1f} MB  main RSS {r['peak_rss_mb_main']:>7.1f} MB")
            print(f"  tokenize / raw encode_batch throughput: {figures['tokenize_vs_raw_encode_ratio']:.2f}")
    print(json.dumps({"benchmark": "datakit", "workers": args.workers, "cpu_count": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
