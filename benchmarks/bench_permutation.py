"""Throughput of every registered permutation, in indices per second, at data-loader scale.

For each kind (default all four, each with its registry defaults) this
evaluates `--count` indices of a permutation of `[0, --length)`, once as one
contiguous range (what `batch(step)` asks for) and once as uniformly random
indices, `--repeats` times each, and prints the best rate. Last line: one
JSON object.

    python benchmarks/bench_permutation.py --length 1000000000 --count 10000000
"""

import argparse
import json
import time

import numpy as np

from tootsie.data.permutation import PERMUTATIONS, make_permutation


def best_rate(permutation, indices: np.ndarray, repeats: int) -> float:
    """Indices per second of the fastest of `repeats` evaluations."""
    permutation(indices[:1000])
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        permutation(indices)
        best = min(best, time.perf_counter() - started)
    return indices.size / best


def main() -> None:
    """Parse flags, time each kind on both access patterns, print a table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=10**9, help="N, the permutation's domain (default 1e9)")
    parser.add_argument("--count", type=int, default=10**7, help="indices evaluated per timing (default 1e7)")
    parser.add_argument("--repeats", type=int, default=3, help="timings per kind and pattern; the best is kept")
    parser.add_argument("--kinds", default=",".join(PERMUTATIONS), help="comma-separated kinds (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = args.length // 3
    patterns = {
        "contiguous": np.arange(start, start + args.count, dtype=np.int64),
        "random": np.random.default_rng(args.seed).integers(0, args.length, size=args.count),
    }
    results: dict[str, dict[str, float]] = {}
    for kind in args.kinds.split(","):
        permutation = make_permutation(kind, args.length, args.seed)
        results[kind] = {name: best_rate(permutation, indices, args.repeats) for name, indices in patterns.items()}
        print(
            f"{kind:>8}: " + "  ".join(f"{name} {rate / 1e6:7.1f} M indices/s" for name, rate in results[kind].items()),
            flush=True,
        )
    print(
        json.dumps({"length": args.length, "count": args.count, "repeats": args.repeats, "indices_per_second": results})
    )


if __name__ == "__main__":
    main()
