"""Throughput of tootsie's MinHash vs datasketch and rensa, text to signature, each peer on its documented fast path.

Documents are cut from the running Python's standard library (source files and
module docstrings) into pieces of 2-5 KB, shuffled with a fixed seed. Every
implementation turns the raw texts of a batch of `dedup.BATCH_ROWS` documents
into 286-value signatures of the same set, the document's word 5-grams, in one
thread of this process (`RAYON_NUM_THREADS=1` for rensa, set before it loads):

- `tootsie`: `MinHasher.signatures(batch)`. Normalizes and splits the words
  (`tootsie.datakit.minhash.words`), hashes each word (xxh3_64, low 32 bits),
  combines 5 consecutive word tokens into a 32-bit shingle key (multilinear
  hash), then 286 multiply-add-shift permutations and a min per document.
- `datasketch-bulk`: `MinHash.bulk(map(word_shingles, batch), num_perm=286)`,
  datasketch's batch API (one shared initialization, one `update_batch` per
  document). A shingle is 5 consecutive normalized words joined by spaces, as
  UTF-8 bytes; datasketch hashes each with SHA-1 (its default `sha1_hash32`)
  and applies 286 affine permutations mod 2^32 (its default scheme, `affine32`).
- `datasketch-bulk-xxh32`: the same with `hashfunc=xxhash.xxh32_intdigest`:
  datasketch's docs suggest a faster hash (farmhash) than SHA-1 for speed.
- `rensa-matrix`: `RMinHash.digest_matrix_from_token_byte_sets(map(word_shingles,
  batch), 286, 0)`, rensa's bulk API: a (docs x 286) digest matrix, no Python
  object per document. Rensa hashes each shingle's bytes (FxHash) and sketches
  with R-MinHash (Fast Similarity Sketching: each token fills a few slots, not
  all 286; the rest get a fallback hash). The same shingle bytes as datasketch.
- `rensa-update`: one `RMinHash(num_perm=286, seed=0)` per document,
  `.update(shingles)`, `.digest()`: rensa's per-document API.
- `rensa-matrix@192`: `rensa-matrix` with 192 slots, where its Jaccard error
  equals tootsie's at 286 (R-MinHash samples a set's shingles nearly without
  replacement, so on sets of a few hundred shingles it is more accurate per
  slot than 286 independent permutations).

Both bulk APIs get a lazy `map`, not a list: holding a batch's 400,000 shingle
objects at once made rensa's matrix path 1.5x slower. Building the peers'
shingles (`words`, then joining 5 words) is inside their timed region: it is
part of text-to-signature, and tootsie does the same work inside `signatures`.
Three more rows split the work: `shingling` times only that Python shingle
building, and `sketch:tootsie` / `sketch:rensa` only the permutations and minima
on the same precomputed 32-bit shingle keys (`MinHasher.signatures_of_keys` vs
`RMinHash.digest_matrix_from_flat_token_hashes`).

Each repeat runs every implementation once, the order rotating by one place per
repeat, so slow phases of a shared machine hit all of them alike. Reported per
implementation: the median and min-max over repeats of docs/s in wall seconds
and in CPU seconds of this process (all threads; steadier on a shared VM), and
tootsie's speed-up over each peer per repeat (median and min-max). Accuracy:
on `--pairs` edited copies, each estimator's mean absolute error against the
true word 5-gram Jaccard, with its standard error. Prints a table, then one
JSON line.

    python benchmarks/bench_minhash.py --docs 3000 --repeats 9 --pairs 2000
"""

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # rensa's batch APIs use a Rayon pool; one thread, like the others

import numpy as np
import xxhash

sys.path.insert(0, str(Path(__file__).parent))

from corpus import stdlib_texts  # noqa: E402

from tootsie.corpora.stdlib_source import StdlibSourceConfig, iter_code_and_prose  # noqa: E402
from tootsie.datakit.dedup import BATCH_ROWS  # noqa: E402
from tootsie.datakit.minhash import MinHashConfig, estimated_jaccard, words  # noqa: E402

NGRAM = 5
NUM_PERMS = 286
SEED = 0
# Rensa slots with the MAE of tootsie's 286 permutations: on 2,000 edited pairs of these documents (median 365
# shingles), rensa 192 gave 0.0194 and 0.0202 (seeds 0, 1), tootsie 286 gave 0.0194-0.0203 (seeds 0-2).
RENSA_EQUAL_ERROR_PERMS = 192


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
    if len(tokens) < NGRAM:
        return [b" ".join(tokens)] if tokens else []
    return list(
        map(b" ".join, zip(*(tokens[i:] for i in range(NGRAM))))
    )  # the fastest pure-Python 5-gram join measured


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


def batches(docs: list[str]) -> list[list[str]]:
    """`docs` cut into dedup-sized batches."""
    return [docs[i : i + BATCH_ROWS] for i in range(0, len(docs), BATCH_ROWS)]


def implementations(docs: list[str]) -> dict[str, Callable[[], None]]:
    """Each implementation signing every batch of `docs`, as a no-argument function (see the module docstring)."""
    from datasketch import MinHash
    from rensa import RMinHash

    hasher = MinHashConfig(num_perms=NUM_PERMS, seed=SEED).build()
    cut = batches(docs)
    keyed = [hasher.shingle_keys(*hasher.tokens(batch)) for batch in cut]
    offsets = [np.concatenate([[0], np.cumsum(per_doc)]).astype(np.uint64) for _, per_doc in keyed]

    def tootsie() -> None:
        for batch in cut:
            hasher.signatures(batch)

    def datasketch_bulk(**kwargs: object) -> None:
        for batch in cut:
            MinHash.bulk(map(word_shingles, batch), num_perm=NUM_PERMS, seed=SEED, **kwargs)

    def rensa_matrix(num_perms: int = NUM_PERMS) -> None:
        for batch in cut:
            RMinHash.digest_matrix_from_token_byte_sets(map(word_shingles, batch), num_perms, SEED)

    def rensa_update() -> None:
        for text in docs:
            sketch = RMinHash(num_perm=NUM_PERMS, seed=SEED)
            sketch.update(word_shingles(text))
            sketch.digest()

    def shingling() -> None:
        for text in docs:  # one document's shingles alive at a time, as with the lazy `map` above
            word_shingles(text)

    def sketch_tootsie() -> None:
        for keys, per_doc in keyed:
            hasher.signatures_of_keys(keys, per_doc)

    def sketch_rensa() -> None:
        for (keys, _), row_offsets in zip(keyed, offsets, strict=True):
            RMinHash.digest_matrix_from_flat_token_hashes(keys, row_offsets, NUM_PERMS, SEED)

    return {
        "tootsie": tootsie,
        "datasketch-bulk": datasketch_bulk,
        "datasketch-bulk-xxh32": lambda: datasketch_bulk(hashfunc=xxhash.xxh32_intdigest),
        "rensa-matrix": rensa_matrix,
        "rensa-update": rensa_update,
        f"rensa-matrix@{RENSA_EQUAL_ERROR_PERMS}": lambda: rensa_matrix(RENSA_EQUAL_ERROR_PERMS),
        "shingling": shingling,
        "sketch:tootsie": sketch_tootsie,
        "sketch:rensa": sketch_rensa,
    }


def timed(run: Callable[[], None]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call of `run`."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def accuracy(docs: list[str], pairs: int, seed: int) -> dict[str, dict[str, float]]:
    """Mean absolute error (and its standard error, and the mean signed error) of each estimator on edited copies."""
    from datasketch import MinHash
    from rensa import RMinHash

    rng = np.random.default_rng(seed)
    originals = docs[:pairs]
    copies = [edited(text, float(rng.uniform(0.0, 0.1)), rng) for text in originals]
    truth = np.array([true_jaccard(a, b) for a, b in zip(originals, copies, strict=True)])
    signatures = MinHashConfig(num_perms=NUM_PERMS, seed=SEED).build().signatures(originals + copies)
    shingles = [word_shingles(text) for text in originals + copies]
    estimates = {"tootsie": estimated_jaccard(signatures[:pairs], signatures[pairs:])}
    for name, num_perms in [("rensa", NUM_PERMS), (f"rensa@{RENSA_EQUAL_ERROR_PERMS}", RENSA_EQUAL_ERROR_PERMS)]:
        rows = np.array(
            RMinHash.digest_matrix_from_token_byte_sets(shingles, num_perms, SEED).to_rows(), dtype=np.uint32
        )
        estimates[name] = estimated_jaccard(rows[:pairs], rows[pairs:])
    for name, kwargs in [("datasketch", {}), ("datasketch-xxh32", {"hashfunc": xxhash.xxh32_intdigest})]:
        sketches = MinHash.bulk(shingles, num_perm=NUM_PERMS, seed=SEED, **kwargs)
        estimates[name] = np.array([a.jaccard(b) for a, b in zip(sketches[:pairs], sketches[pairs:], strict=True)])
    out = {"truth": {"mean": float(truth.mean()), "pairs": pairs}}
    for name, estimate in estimates.items():
        error = estimate - truth
        out[name] = {
            "mae": float(np.abs(error).mean()),
            "mae_se": float(np.abs(error).std(ddof=1) / np.sqrt(pairs)),
            "bias": float(error.mean()),
        }
    return out


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max."""
    return {"median": float(np.median(values)), "min": float(min(values)), "max": float(max(values))}


def main() -> None:
    """Build documents, time every implementation in rotating order, check accuracy, print a table and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=3000, help="documents to sign")
    parser.add_argument(
        "--repeats", type=int, default=9, help="rounds; each runs every implementation once, in rotating order"
    )
    parser.add_argument("--pairs", type=int, default=1000, help="edited pairs for the accuracy check")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        import datasketch
        import rensa  # noqa: F401 - its version is read from the package metadata
    except ImportError as error:
        print(f"{error.name} is not installed (a benchmark-only dependency): pip install -e '.[bench]', then rerun")
        return
    from importlib.metadata import version

    docs = stdlib_documents(args.docs, args.seed)
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    shingles = sum(len(word_shingles(d)) for d in docs)
    print(
        f"{len(docs)} documents, {mb:.2f} MB, {shingles / len(docs):.0f} word 5-grams per document, "
        f"{NUM_PERMS} permutations, batches of {BATCH_ROWS}"
    )
    print(
        f"datasketch {datasketch.__version__}, rensa {version('rensa')}, numpy {np.__version__}, "
        f"RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}"
    )
    runs = implementations(docs)
    names = list(runs)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    load = [os.getloadavg()[0]]  # 1-minute load average before the run and after each repeat
    for repeat in range(args.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(timed(runs[name]))
        load.append(os.getloadavg()[0])

    result: dict[str, object] = {"docs": len(docs), "mb": round(mb, 3), "num_perms": NUM_PERMS, "repeats": args.repeats}
    result |= {
        "datasketch_version": datasketch.__version__,
        "rensa_version": version("rensa"),
        "loadavg_1min": spread(load),
    }
    print(
        f"\n1-minute load average on {os.cpu_count()} CPUs, before the run and after each repeat: "
        f"median {np.median(load):.2f} [{min(load):.2f}-{max(load):.2f}]"
    )
    print(
        f"{'implementation':<22} {'docs/s wall: median [min-max]':>32} "
        f"{'docs/CPU-s: median [min-max]':>32} {'CPU/wall':>9}"
    )
    for name in names:
        wall = spread([len(docs) / w for w, _ in times[name]])
        cpu = spread([len(docs) / c for _, c in times[name]])
        load = np.median([c / w for w, c in times[name]])
        result[name] = {"docs_per_s": wall, "docs_per_cpu_s": cpu, "cpu_over_wall": float(load)}
        print(
            f"{name:<22} {wall['median']:>12,.0f} [{wall['min']:>7,.0f}-{wall['max']:>7,.0f}] "
            f"{cpu['median']:>14,.0f} [{cpu['min']:>7,.0f}-{cpu['max']:>7,.0f}] {load:>9.2f}"
        )
    print("\ntootsie's speed-up per repeat, median [min-max]:")
    for peer in [
        "datasketch-bulk",
        "datasketch-bulk-xxh32",
        "rensa-matrix",
        "rensa-update",
        f"rensa-matrix@{RENSA_EQUAL_ERROR_PERMS}",
    ]:
        wall = spread([p[0] / t[0] for t, p in zip(times["tootsie"], times[peer], strict=True)])
        cpu = spread([p[1] / t[1] for t, p in zip(times["tootsie"], times[peer], strict=True)])
        result[f"speedup_over_{peer}"] = {"wall": wall, "cpu": cpu}
        print(
            f"  over {peer:<22} wall {wall['median']:5.2f}x [{wall['min']:.2f}-{wall['max']:.2f}]  "
            f"CPU {cpu['median']:5.2f}x [{cpu['min']:.2f}-{cpu['max']:.2f}]"
        )
    sketch = spread([r[1] / t[1] for t, r in zip(times["sketch:tootsie"], times["sketch:rensa"], strict=True)])
    print(f"  sketch only (same shingle keys), CPU: {sketch['median']:.2f}x [{sketch['min']:.2f}-{sketch['max']:.2f}]")
    result["sketch_only_speedup_cpu"] = sketch

    errors = accuracy(docs, args.pairs, args.seed)
    result["accuracy"] = errors
    print(
        f"\naccuracy on {args.pairs} edited pairs (mean true J {errors['truth']['mean']:.3f}), "
        "MAE +- standard error (mean signed error):"
    )
    for name in ["tootsie", "datasketch", "datasketch-xxh32", "rensa", f"rensa@{RENSA_EQUAL_ERROR_PERMS}"]:
        e = errors[name]
        print(f"  {name:<17} {e['mae']:.4f} +- {e['mae_se']:.4f} ({e['bias']:+.4f})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
