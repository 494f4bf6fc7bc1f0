"""Throughput of the stateless `batch(step)` with a many-component Feistel-shuffled mixture.

Builds `--components` synthetic token caches (random tokens, random document
lengths) in a temporary directory, warms the page cache, then times
`MixtureDataset.batch(step)` over consecutive steps on one core (this process)
and prints tokens/s and sequences/s, plus a split between index math
(`sequence_sources`) and token reads. A plain random-slice memmap read of the
same number of sequences is the peer baseline, run in the same process.

    python benchmarks/bench_batch.py --components 20 --seq-len 4096 --batch-size 256 --steps 20
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureDataset, MixtureStage
from tootsie.data.permutation import permutation_config
from tootsie.datakit.token_cache import TokenCacheWriter, open_token_cache


def make_caches(root: Path, components: int, tokens_per_component: int, seed: int = 0) -> dict[str, str]:
    """Synthetic caches with uniform random token ids and document lengths 50..5000."""
    rng = np.random.default_rng(seed)
    caches = {}
    for c in range(components):
        lengths = rng.integers(50, 5000, size=tokens_per_component // 2500)
        writer = TokenCacheWriter(root / f"c{c:02d}", vocab_size=50_000, ledger_extra={})
        writer.append_flat(rng.integers(0, 50_000, size=int(lengths.sum()), dtype=np.uint16), lengths)
        writer.close()
        caches[f"component_{c:02d}"] = str(root / f"c{c:02d}")
    return caches


def main() -> None:
    """Parse flags, build caches, time batch(step) and the baseline, print figures and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--components", type=int, default=20)
    parser.add_argument("--tokens-per-component", type=int, default=5_000_000)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--permutation", default="feistel")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tootsie-bench-batch-") as tmp:
        caches = make_caches(Path(tmp), args.components, args.tokens_per_component)
        for path in caches.values():
            np.asarray(open_token_cache(path).tokens).sum()  # warm the page cache
        rng = np.random.default_rng(1)
        weights = {name: float(w) for name, w in zip(caches, rng.dirichlet(np.ones(args.components)))}
        config = MixtureConfig(
            caches=caches,
            stages=(MixtureStage(0, weights),),
            seq_len=args.seq_len,
            batch_schedule=BatchSchedule.constant(args.batch_size),
            permutation=permutation_config(args.permutation),
        )
        dataset = MixtureDataset(config)
        dataset.batch(0)
        started = time.perf_counter()
        for step in range(1, args.steps + 1):
            dataset.batch(step)
        batch_seconds = time.perf_counter() - started
        started = time.perf_counter()
        for step in range(1, args.steps + 1):
            dataset.sequence_sources(dataset.sequence_range(step))
        index_seconds = time.perf_counter() - started
        baseline = open_token_cache(next(iter(caches.values()))).tokens
        starts = rng.integers(0, len(baseline) - args.seq_len, size=args.steps * args.batch_size)
        started = time.perf_counter()
        for start in starts:
            np.array(baseline[start : start + args.seq_len])
        baseline_seconds = time.perf_counter() - started
    tokens = args.steps * args.batch_size * args.seq_len
    result = {
        "benchmark": "batch",
        "components": args.components,
        "permutation": args.permutation,
        "seq_len": args.seq_len,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "tokens_per_s": round(tokens / batch_seconds),
        "sequences_per_s": round(args.steps * args.batch_size / batch_seconds),
        "index_math_share": round(index_seconds / batch_seconds, 3),
        "baseline_random_slice_tokens_per_s": round(tokens / baseline_seconds),
        "ratio_to_baseline": round(baseline_seconds / batch_seconds, 3),
    }
    print(
        f"batch(step): {result['tokens_per_s'] / 1e6:.1f} M tokens/s, "
        f"{result['sequences_per_s']} sequences/s on one core; "
        f"index math {100 * result['index_math_share']:.0f} % of the time"
    )
    print(
        f"baseline random {args.seq_len}-token memmap slices: "
        f"{result['baseline_random_slice_tokens_per_s'] / 1e6:.1f} M tokens/s "
        f"(batch/baseline {result['ratio_to_baseline']:.2f})"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
