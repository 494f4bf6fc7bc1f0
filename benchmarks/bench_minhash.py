"""Throughput of tootsie's MinHash against datasketch's, text to signature, on real text.

Documents are cut from the running Python's standard library (source files and
module docstrings) into pieces of 2-5 KB, shuffled with a fixed seed. Both
sides get the same normalized words (`tootsie.datakit.minhash.words`) and the
same word 5-grams, 286 permutations, one process:

- tootsie: `MinHasher.signatures` on batches of `dedup.BATCH_ROWS` documents,
  as the dedup stage calls it;
- datasketch: per document, `MinHash(num_perm=286).update_batch(shingles)` with
  the shingles as UTF-8 bytes (its default scheme and SHA-1 hash).

Each side is timed `--repeats` times (interleaved) and its best run reported,
both in wall seconds and in CPU seconds of this process (steadier on a shared
VM; both sides run in one thread). Accuracy is checked too: on `--pairs` edited copies,
the mean absolute error of each side's Jaccard estimate against the true word
5-gram Jaccard. Prints figures, then one JSON line.

    python benchmarks/bench_minhash.py --docs 3000 --repeats 3
"""

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from corpus import stdlib_texts  # noqa: E402

from tootsie.datakit.dedup import BATCH_ROWS  # noqa: E402
from tootsie.datakit.minhash import MinHashConfig, estimated_jaccard, words  # noqa: E402
from tootsie.datakit.stdlib_source import StdlibSourceConfig, iter_code_and_prose  # noqa: E402

NGRAM = 5
NUM_PERMS = 286


def stdlib_pieces(seed: int = 0, min_chars: int = 2000, max_chars: int = 5000) -> list[str]:
    """Every piece of `min_chars`..`max_chars` characters cut from stdlib docstrings and code, shuffled."""
    rng = np.random.default_rng(seed)
    prose = [text for source, _, text in iter_code_and_prose(StdlibSourceConfig(max_code_bytes=1)) if source == "prose"]
    pieces = []
    for text in prose + stdlib_texts():
        start = 0
        while len(text) - start >= min_chars:
            size = int(rng.integers(min_chars, max_chars + 1))
            pieces.append(text[start : start + size])
            start += size
    return [pieces[i] for i in rng.permutation(len(pieces))]


def stdlib_documents(count: int, seed: int = 0) -> list[str]:
    """The first `count` of `stdlib_pieces(seed)`."""
    pieces = stdlib_pieces(seed)
    if len(pieces) < count:
        raise SystemExit(f"only {len(pieces)} documents of 2-5 KB in this stdlib; ask for {len(pieces)} or fewer")
    return pieces[:count]


def word_shingles(text: str) -> list[bytes]:
    """The word 5-grams tootsie hashes, as bytes (the whole text when it has fewer than 5 words)."""
    tokens = words(text)
    return [b" ".join(tokens[i : i + NGRAM]) for i in range(max(len(tokens) - NGRAM + 1, 1 if tokens else 0))]


def true_jaccard(a: str, b: str) -> float:
    """Exact Jaccard of the two texts' word 5-gram sets."""
    sa, sb = set(word_shingles(a)), set(word_shingles(b))
    return len(sa & sb) / len(sa | sb)


def edited(text: str, rate: float, rng: np.random.Generator) -> str:
    """`text` with each whitespace-separated token replaced by a random other token with probability `rate`."""
    tokens = re.split(r"(\s+)", text)
    pool = tokens[::2]
    for i in range(0, len(tokens), 2):
        if rng.random() < rate:
            tokens[i] = pool[int(rng.integers(len(pool)))] + "x"
    return "".join(tokens)


def time_tootsie(docs: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds for tootsie to sign `docs` in dedup-sized batches."""
    hasher = MinHashConfig(num_perms=NUM_PERMS).build()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(docs), BATCH_ROWS):
        hasher.signatures(docs[i : i + BATCH_ROWS])
    return time.perf_counter() - wall, time.process_time() - cpu


def time_datasketch(docs: list[str], minhash_class: type) -> tuple[float, float]:
    """(wall, CPU) seconds for datasketch to sign `docs`, one MinHash per document."""
    wall, cpu = time.perf_counter(), time.process_time()
    for text in docs:
        sketch = minhash_class(num_perm=NUM_PERMS)
        sketch.update_batch(word_shingles(text))
    return time.perf_counter() - wall, time.process_time() - cpu


def accuracy(docs: list[str], minhash_class: type, pairs: int, seed: int) -> dict[str, float]:
    """Mean absolute error of both estimators against the true Jaccard on edited copies."""
    rng = np.random.default_rng(seed)
    hasher = MinHashConfig(num_perms=NUM_PERMS).build()
    truth, ours, theirs = [], [], []
    for text in docs[:pairs]:
        copy = edited(text, float(rng.uniform(0.0, 0.1)), rng)
        truth.append(true_jaccard(text, copy))
        signatures = hasher.signatures([text, copy])
        ours.append(estimated_jaccard(signatures[[0]], signatures[[1]])[0])
        sketches = [minhash_class(num_perm=NUM_PERMS) for _ in range(2)]
        for sketch, t in zip(sketches, (text, copy), strict=True):
            sketch.update_batch(word_shingles(t))
        theirs.append(sketches[0].jaccard(sketches[1]))
    t = np.array(truth)
    return {"mean_true_jaccard": float(t.mean()), "tootsie_mae": float(np.abs(np.array(ours) - t).mean()), "datasketch_mae": float(np.abs(np.array(theirs) - t).mean())}


def main() -> None:
    """Build the documents, time both implementations, check accuracy, print figures and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=3000, help="documents to sign")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per implementation (best is reported)")
    parser.add_argument("--pairs", type=int, default=300, help="edited pairs for the accuracy check")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        from datasketch import MinHash
    except ImportError:
        print("datasketch is not installed (it is a benchmark-only dependency): pip install datasketch, then rerun")
        return
    import datasketch

    docs = stdlib_documents(args.docs, args.seed)
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    shingles = sum(len(word_shingles(d)) for d in docs)
    print(f"{len(docs)} documents, {mb:.2f} MB, {shingles / len(docs):.0f} word 5-grams per document, {NUM_PERMS} permutations")
    timers = {"tootsie": lambda: time_tootsie(docs), "datasketch": lambda: time_datasketch(docs, MinHash)}
    best = {name: [float("inf"), float("inf")] for name in timers}
    for _ in range(args.repeats):
        for name, timer in timers.items():
            best[name] = [min(old, new) for old, new in zip(best[name], timer(), strict=True)]
    result: dict[str, object] = {"docs": len(docs), "mb": round(mb, 3), "num_perms": NUM_PERMS, "datasketch_version": datasketch.__version__}
    for name, (wall, cpu) in best.items():
        result |= {f"{name}_docs_per_s": round(len(docs) / wall, 1), f"{name}_mb_per_s": round(mb / wall, 3), f"{name}_docs_per_cpu_s": round(len(docs) / cpu, 1)}
        print(f"{name:<11} wall {wall:6.3f} s {len(docs) / wall:7.0f} docs/s {mb / wall:6.2f} MB/s | CPU {cpu:6.3f} s {len(docs) / cpu:7.0f} docs/CPU-s {mb / cpu:6.2f} MB/CPU-s")
    result["speedup_wall"] = round(best["datasketch"][0] / best["tootsie"][0], 2)
    result["speedup_cpu"] = round(best["datasketch"][1] / best["tootsie"][1], 2)
    print(f"speedup: {result['speedup_wall']:.2f}x wall, {result['speedup_cpu']:.2f}x CPU (goal >= 3x)")
    errors = accuracy(docs, MinHash, args.pairs, args.seed)
    print(f"accuracy on {args.pairs} edited pairs (mean true J {errors['mean_true_jaccard']:.3f}): MAE tootsie {errors['tootsie_mae']:.4f}, datasketch {errors['datasketch_mae']:.4f}")
    print(json.dumps(result | {k: round(v, 4) for k, v in errors.items()}))


if __name__ == "__main__":
    main()
