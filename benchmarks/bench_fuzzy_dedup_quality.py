"""Precision and recall of fuzzy dedup on generated near-duplicates of real text, by true Jaccard.

Base documents are 2-5 KB pieces of the standard library (code and docstrings,
as in `bench_minhash.py`), minus every piece whose estimated Jaccard with an
earlier one is >= 0.3 (the stdlib has near-duplicate files, e.g. the codec
tables in `encodings/`, which would blur the labels). Each base gets `--variants` near-duplicates, each of
one kind (word substitutions, insertions, deletions, a mix, or reordered
paragraphs plus a mix) at an edit rate aimed at a Jaccard drawn uniformly from
[0.5, 1.0]; the true word 5-gram Jaccard of every pair in a family is then
computed exactly, with the shingles the stage uses. All documents are shuffled
into shards and `dedup` runs on them (paragraph dedup off).

A pair counts as merged when both documents end in the same group (the same
`fuzzy_cluster`, or the same document for exact copies). Reported per true
Jaccard bucket: pairs and the fraction merged (for buckets >= the threshold
that is recall, below it the false-merge rate). Recall is over the labelled
in-family pairs; precision is over every merged pair, including merges across
families (whose true Jaccard is computed too), and separately over base-variant
pairs (two variants of one base are often merged through the base while their
own Jaccard is lower: clusters are transitive). Also: bytes per document of the
LSH index and of the signatures the reduce verifies with, and stage throughput.

    python benchmarks/bench_fuzzy_dedup_quality.py --bases 1500 --variants 2
"""

import argparse
import itertools
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))

from bench_minhash import stdlib_pieces, word_shingles  # noqa: E402

from tootsie.datakit.dedup import DedupConfig, dedup  # noqa: E402
from tootsie.datakit.engine import EngineConfig  # noqa: E402
from tootsie.datakit.ids import content_id  # noqa: E402
from tootsie.datakit.minhash import MinHashConfig, lsh_clusters  # noqa: E402

KINDS = ("substitute", "insert", "delete", "mixed", "reorder")
BUCKETS = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0000001]


def edit_rate(target: float) -> float:
    """Token edit rate that lands near Jaccard `target`: sets of equal size sharing a fraction s have J = s / (2 - s),
    and an edit breaks the 5 shingles covering it."""
    shared = 2 * target / (1 + target)
    return 1 - shared ** (1 / 5)


def make_variant(text: str, kind: str, target: float, vocabulary: list[str], rng: np.random.Generator) -> str:
    """A near-duplicate of `text`: whitespace-separated tokens edited per `kind`, separators (line breaks) kept."""
    if kind == "reorder":
        paragraphs = re.split(r"\n\s*\n", text)
        text = "\n\n".join(paragraphs[i] for i in rng.permutation(len(paragraphs)))
        kind = "mixed"
    rate = edit_rate(target)
    tokens = re.split(r"(\s+)", text)
    out = []
    for i, token in enumerate(tokens):
        if i % 2 or rng.random() >= rate:
            out.append(token)
            continue
        op = kind if kind != "mixed" else ("substitute", "insert", "delete")[int(rng.integers(3))]
        new = vocabulary[int(rng.integers(len(vocabulary)))]
        out.append({"substitute": new, "insert": f"{token} {new}", "delete": ""}[op])
    return "".join(out)


def jaccard(a: set[bytes], b: set[bytes]) -> float:
    """Jaccard similarity of two shingle sets (1.0 for two empty sets)."""
    return len(a & b) / len(a | b) if a | b else 1.0


def dissimilar_bases(count: int, seed: int) -> list[str]:
    """`count` stdlib pieces, none with an estimated Jaccard >= 0.3 to an earlier one."""
    pieces = stdlib_pieces(seed)
    hasher = MinHashConfig(
        num_bands=143
    ).build()  # 2 rows per band: a pair at J = 0.3 shares a band with probability ~1
    signatures = hasher.signatures(pieces)
    clusters = lsh_clusters(iter(hasher.band_keys(signatures)), np.arange(len(pieces)), signatures, 0.3)
    dropped = set(clusters.members[clusters.members != clusters.firsts].tolist())
    kept = [piece for i, piece in enumerate(pieces) if i not in dropped]
    if len(kept) < count:
        raise SystemExit(
            f"only {len(kept)} mutually dissimilar base documents in this stdlib; ask for --bases {len(kept)} or fewer"
        )
    return kept[:count]


def build(bases: int, variants: int, seed: int) -> tuple[list[str], list[int], list[str]]:
    """Documents (bases and their variants, shuffled), the family of each, and its kind ("base" or an edit kind)."""
    rng = np.random.default_rng(seed)
    base_docs = dissimilar_bases(bases, seed)
    vocabulary = sorted({token for doc in base_docs[:200] for token in doc.split()})
    docs, family, kinds = [], [], []
    for index, base in enumerate(base_docs):
        docs.append(base)
        family.append(index)
        kinds.append("base")
        for _ in range(variants):
            kind = KINDS[int(rng.integers(len(KINDS)))]
            docs.append(make_variant(base, kind, float(rng.uniform(0.5, 1.0)), vocabulary, rng))
            family.append(index)
            kinds.append(kind)
    order = rng.permutation(len(docs))
    return [docs[i] for i in order], [family[i] for i in order], [kinds[i] for i in order]


def write_shards(directory: Path, docs: list[str], shards: int) -> None:
    """Write `docs` as a document directory of `shards` Parquet files."""
    directory.mkdir(parents=True)
    for index, part in enumerate(np.array_split(np.arange(len(docs)), shards)):
        texts = [docs[i] for i in part]
        ids = [content_id(t) for t in texts]
        pq.write_table(pa.table({"id": ids, "text": texts, "source_id": ids}), directory / f"part-{index:05d}.parquet")


def groups(out: Path) -> list[int]:
    """Each document's group: its fuzzy cluster, else the first document with its id."""
    table = pa.concat_tables([pq.read_table(p) for p in sorted(out.glob("part-*.parquet"))])
    first_with_id: dict[str, int] = {}
    result = []
    for ordinal, (doc_id, cluster) in enumerate(
        zip(table.column("id").to_pylist(), table.column("fuzzy_cluster").to_pylist(), strict=True)
    ):
        first = first_with_id.setdefault(doc_id, ordinal)
        result.append(cluster if cluster >= 0 else first)
    return result


def main() -> None:
    """Generate the benchmark, run dedup, and print bucketed merge rates, recall, precision and index size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bases", type=int, default=1500, help="base documents")
    parser.add_argument("--variants", type=int, default=2, help="near-duplicates per base")
    parser.add_argument("--threshold", type=float, default=0.8, help="dedup threshold (estimated Jaccard)")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    docs, family, kinds = build(args.bases, args.variants, args.seed)
    shingles = [set(word_shingles(d)) for d in docs]
    with tempfile.TemporaryDirectory() as tmp:
        write_shards(Path(tmp) / "docs", docs, args.shards)
        started = time.perf_counter()
        stats = dedup(
            DedupConfig(
                input=str(Path(tmp) / "docs"),
                threshold=args.threshold,
                paragraphs=False,
                engine=EngineConfig(workers=args.workers, progress=False),
            ),
            str(Path(tmp) / "out"),
        )
        seconds = time.perf_counter() - started
        group = groups(Path(tmp) / "out")

    members: dict[int, list[int]] = defaultdict(list)
    for ordinal, f in enumerate(family):
        members[f].append(ordinal)
    labelled = [
        (i, j, jaccard(shingles[i], shingles[j]))
        for docs_of_family in members.values()
        for i, j in itertools.combinations(docs_of_family, 2)
    ]
    clustered: dict[int, list[int]] = defaultdict(list)
    for ordinal, g in enumerate(group):
        clustered[g].append(ordinal)
    cross = [
        jaccard(shingles[i], shingles[j])
        for docs_of_group in clustered.values()
        for i, j in itertools.combinations(docs_of_group, 2)
        if family[i] != family[j]
    ]

    truth = np.array([j for _, _, j in labelled])
    merged = np.array([group[a] == group[b] for a, b, _ in labelled])
    rows = []
    print(
        f"{len(docs)} documents ({args.bases} bases x {args.variants} variants), "
        f"{len(labelled)} labelled pairs, threshold {args.threshold}"
    )
    print(f"{'true Jaccard':<14}{'pairs':>7}{'merged':>8}{'rate':>8}")
    for lo, hi in itertools.pairwise(BUCKETS):
        in_bucket = (truth >= lo) & (truth < hi)
        rate = float(merged[in_bucket].mean()) if in_bucket.any() else float("nan")
        rows.append(
            {
                "bucket": f"[{lo:.1f},{min(hi, 1.0):.1f}{']' if hi > 1 else ')'}",
                "pairs": int(in_bucket.sum()),
                "merged": int(merged[in_bucket].sum()),
                "rate": round(rate, 4),
            }
        )
        print(f"{rows[-1]['bucket']:<14}{rows[-1]['pairs']:>7}{rows[-1]['merged']:>8}{rate:>8.3f}")
    above = truth >= args.threshold
    true_merges = int((merged & above).sum()) + sum(j >= args.threshold for j in cross)
    all_merges = int(merged.sum()) + len(cross)
    recall = float(merged[above].mean())
    precision = true_merges / all_merges if all_merges else 1.0
    num_perms = MinHashConfig().num_perms
    result = {
        "docs": len(docs),
        "labelled_pairs": len(labelled),
        "threshold": args.threshold,
        "recall_at_threshold": round(recall, 4),
        "precision_at_threshold": round(precision, 4),
        "cross_family_merges": len(cross),
        "buckets": rows,
        "index_bytes_per_doc": round(stats["lsh_index_bytes"] / len(docs), 1),
        "signature_bytes_per_doc": 4 * num_perms,
        "candidate_pairs": stats["candidate_pairs"],
        "merged_pairs": stats["merged_pairs"],
        "dedup_seconds": round(seconds, 2),
        "dedup_docs_per_s": round(len(docs) / seconds, 1),
    }
    direct = np.array([(kinds[a] == "base") != (kinds[b] == "base") for a, b, _ in labelled])
    result["precision_base_variant"] = round(float((truth[direct & merged] >= args.threshold).mean()), 4)
    by_kind = {}
    for kind in KINDS:
        pairs = [
            m
            for (a, b, j), m in zip(labelled, merged, strict=True)
            if j >= args.threshold and {kinds[a], kinds[b]} == {"base", kind}
        ]
        by_kind[kind] = round(float(np.mean(pairs)), 4) if pairs else None
    result["recall_by_kind"] = by_kind
    print(
        f"recall (true J >= {args.threshold}): {recall:.4f} (goal >= 0.95)   "
        f"precision: {precision:.4f} ({len(cross)} merges across families)"
    )
    print(
        "precision of base-variant pairs alone (no transitive merges between variants): "
        f"{result['precision_base_variant']:.4f}"
    )
    print("recall of base-variant pairs by kind: " + ", ".join(f"{k} {v}" for k, v in by_kind.items()))
    print(
        f"LSH index: {result['index_bytes_per_doc']} bytes/doc; "
        f"signatures for verification: {4 * num_perms} bytes/doc (memory-mapped)"
    )
    print(f"dedup stage: {seconds:.2f} s, {len(docs) / seconds:.0f} docs/s with {args.workers} workers")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
