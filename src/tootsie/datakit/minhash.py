"""MinHash signatures and LSH clustering for fuzzy deduplication, vectorized with NumPy.

What: each document becomes a signature of `num_perms` 32-bit min-hashes of its
shingle set; the probability that two signatures agree in one position is the
Jaccard similarity of the two shingle sets. Signatures are cut into `num_bands`
bands of `rows_per_band` rows; documents sharing any band are candidate pairs;
candidates whose estimated Jaccard reaches a threshold are merged with a
union-find, and each component is one cluster of near-duplicates.

Defaults follow Marin's datakit: 286 permutations in 26 bands of 11 rows over
word 5-grams. The chance that a pair at Jaccard J shares a band is
1 - (1 - J^11)^26: 0.01 at J = 0.5, 0.41 at 0.7, 0.90 at 0.8, 0.99 at 0.85.

Pipeline and hashing. Every hash below is strongly universal (pairwise
independent), with a proof in the cited paper: the same guarantee as the
classic `(a*h + b) mod (2^61 - 1)`, which needs 128-bit products that NumPy
lacks, while these need one wrapping uint64 multiply-add.

1. Normalize: lowercase; every character that is not a letter, digit or `_`
   (Python's `\\W`: punctuation, symbols, whitespace) becomes a space; split on
   the spaces. "Hello, World!" -> ["hello", "world"]. ASCII text takes a fast
   byte-table path that gives the same words as the regex.
2. Tokens: a word becomes the low 32 bits of its xxh3_64, with the lowest bit
   set (so no token is 0); in `char` mode a token is a code point + 1.
3. Shingle keys: n consecutive tokens t_1..t_n map to
   `key = ((m_0 + sum_j m_j * t_j) mod 2^64) >> 32`, the multilinear hash that
   Lemire & Kaser (2014, "Strongly universal string hashing is fast") prove
   strongly universal for 32-bit characters. A document shorter than n tokens
   has one shingle: its whole token sequence, zero-padded (tokens are never 0).
4. Permutations: `h_k(x) = ((a_k * x + b_k) mod 2^64) >> 32` with uniform 64-bit
   a_k, b_k: Dietzfelbinger's multiply-add-shift, strongly universal for 32-bit
   keys into 32-bit values (Thorup 2015, "High speed hashing for integers and
   strings", section 3.3). The mod 2^64 is the hardware wrap of uint64, so there
   is nothing to overflow. Since `>> 32` is monotone, min(h_k) = min(a_k x + b_k) >> 32:
   per block of shingles from many documents, one (perms x shingles) uint64
   multiply, one add, and a per-document `minimum.reduceat`.
5. Band keys: the rows of a band are hashed by two independent multilinear
   hashes (step 3 with other multipliers) into the two halves of one uint64,
   so distinct bands collide with probability 2^-64.

All multipliers come from `numpy.random.default_rng(seed)` in a fixed order.

LSH without Python dicts: per band, a stable argsort of the band keys puts
documents with equal keys next to each other in document order; each run of m
documents yields the pairs (first, member) and (previous, member), 2(m-1)
instead of m(m-1)/2 pairs. Unverified, that gives exactly the components of
all pairs; verified, it bounds the work on runs of thousands of templated pages
while near-duplicates still meet in each of the bands they share.

Example:
    hasher = MinHashConfig().build()
    sigs = hasher.signatures(["the quick brown fox jumps over the lazy dog", "the quick brown fox jumps over the lazy cat"])
    estimated_jaccard(sigs[[0]], sigs[[1]])  # [0.668]: 4 of the 6 distinct word 5-grams are shared, J = 0.667
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import xxhash
from jaxtyping import Bool, Float, Int64, UInt32, UInt64

EMPTY = np.uint32(0xFFFFFFFF)
"""Every value of the signature of a document without tokens (it joins no LSH bucket)."""
_CHUNK_ROWS = 4096  # shingles per (perms x rows) uint64 block (9.4 MB): fastest of 1024..16384 on the 2-core dev VM
_NON_WORD = re.compile(r"\W+")
_ASCII_TABLE = bytes(c if chr(c).isalnum() or c == ord("_") or c >= 128 else ord(" ") for c in range(256))
_LOW32 = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True)
class MinHashConfig:
    """Shingling and hashing parameters of MinHash-LSH; any change changes every signature."""

    num_perms: int = 286
    """Hash functions (signature length); Marin uses 286."""
    num_bands: int = 26
    """LSH bands; must divide num_perms. Marin uses 26 (11 rows per band)."""
    ngram: int = 5
    """Tokens per shingle: words in `word` mode, characters in `char` mode."""
    shingle: Literal["word", "char"] = "word"
    """Shingle unit: `word` n-grams (default) or `char` n-grams of the normalized text."""
    seed: int = 0
    """Seed of the NumPy generator that draws every hash multiplier."""

    def __post_init__(self) -> None:
        if self.num_perms < 1 or self.num_bands < 1 or self.num_perms % self.num_bands:
            raise ValueError(f"num_perms must be a positive multiple of num_bands, got {self.num_perms=}, {self.num_bands=}; e.g. 286 and 26")
        if self.ngram < 1:
            raise ValueError(f"ngram must be >= 1, got {self.ngram=}; Marin uses 5")
        if self.shingle not in ("word", "char"):
            raise ValueError(f"shingle must be 'word' or 'char', got {self.shingle=}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed=}")

    @property
    def rows_per_band(self) -> int:
        """Signature rows hashed into one band key."""
        return self.num_perms // self.num_bands

    def build(self) -> "MinHasher":
        """A hasher with its multipliers drawn from `seed`."""
        return MinHasher(self)


def words(text: str) -> list[bytes]:
    """The normalized words of `text` as UTF-8 bytes (see step 1 of the module docstring)."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.encode("ascii").translate(_ASCII_TABLE).split()
    return _NON_WORD.sub(" ", lowered).encode("utf-8").split()


def normalize_for_shingles(text: str) -> str:
    """The text that shingles are cut from: normalized words joined by single spaces."""
    return b" ".join(words(text)).decode("utf-8")


class MinHasher:
    """Computes signatures and band keys for one `MinHashConfig`."""

    def __init__(self, config: MinHashConfig) -> None:
        self.config = config
        rng = np.random.default_rng(config.seed)

        def draw(n: int) -> UInt64[np.ndarray, " n"]:
            return rng.integers(0, 2**64, size=n, dtype=np.uint64)

        self._shingle_mult = draw(config.ngram + 1)
        self._a, self._b = draw(config.num_perms), draw(config.num_perms)
        self._band_mult = draw(2 * (config.rows_per_band + 1)).reshape(2, -1)

    def tokens(self, text: str) -> UInt64[np.ndarray, " tokens"]:
        """Nonzero 32-bit tokens of `text`: hashed words, or code points + 1 in `char` mode."""
        if self.config.shingle == "char":
            normalized = normalize_for_shingles(text)
            return np.frombuffer(normalized.encode("utf-32-le"), dtype="<u4").astype(np.uint64) + np.uint64(1)
        hashes = np.fromiter(map(xxhash.xxh3_64_intdigest, words(text)), dtype=np.uint64)
        return (hashes & _LOW32) | np.uint64(1)

    def shingle_keys(self, token_lists: Sequence[UInt64[np.ndarray, " tokens"]]) -> tuple[UInt64[np.ndarray, " shingles"], Int64[np.ndarray, " docs"]]:
        """32-bit keys of every document's n-grams, concatenated, and the number of keys per document."""
        n = self.config.ngram
        counts = np.array([len(t) for t in token_lists], dtype=np.int64)
        per_doc = np.where(counts > 0, np.maximum(counts - n + 1, 1), 0)
        # Each document's tokens followed by n-1 zeros, so no window reads into the next document.
        gap = np.zeros(n - 1, dtype=np.uint64)
        padded = np.concatenate([part for tokens in token_lists for part in (tokens, gap)] + [np.zeros(n, dtype=np.uint64)])
        doc_starts = np.cumsum(counts + n - 1) - (counts + n - 1)
        windows = len(padded) - n + 1
        acc = np.full(windows, self._shingle_mult[0], dtype=np.uint64)
        for j in range(n):
            acc += self._shingle_mult[j + 1] * padded[j : j + windows]
        starts = np.repeat(doc_starts, per_doc) + _ranks(per_doc)
        return acc[starts] >> np.uint64(32), per_doc

    def signatures(self, texts: Iterable[str]) -> UInt32[np.ndarray, "docs perms"]:
        """MinHash signatures of `texts`; a document without tokens gets the all-`EMPTY` signature."""
        keys, per_doc = self.shingle_keys([self.tokens(t) for t in texts])
        return self.signatures_of_keys(keys, per_doc)

    def signatures_of_keys(self, keys: UInt64[np.ndarray, " shingles"], per_doc: Int64[np.ndarray, " docs"]) -> UInt32[np.ndarray, "docs perms"]:
        """Min over each document's keys of every permutation, in (perms x `_CHUNK_ROWS`) blocks of shingles."""
        mins = np.full((self.config.num_perms, len(per_doc)), np.iinfo(np.uint64).max, dtype=np.uint64)
        doc_of_row = np.repeat(np.arange(len(per_doc)), per_doc)
        block = np.empty((self.config.num_perms, min(_CHUNK_ROWS, len(keys))), dtype=np.uint64)
        for start in range(0, len(keys), _CHUNK_ROWS):
            rows = min(_CHUNK_ROWS, len(keys) - start)
            values = block[:, :rows]
            np.multiply(self._a[:, None], keys[None, start : start + rows], out=values)
            np.add(values, self._b[:, None], out=values)
            docs = doc_of_row[start : start + rows]
            firsts = np.flatnonzero(np.concatenate([[True], docs[1:] != docs[:-1]]))
            targets = docs[firsts]
            mins[:, targets] = np.minimum(mins[:, targets], np.minimum.reduceat(values, firsts, axis=1))
        return (mins.T >> np.uint64(32)).astype(np.uint32)

    def band_keys(self, signatures: UInt32[np.ndarray, "docs perms"]) -> UInt64[np.ndarray, "bands docs"]:
        """One 64-bit key per band and document (band-major, so a band's keys are contiguous)."""
        rows = signatures.reshape(len(signatures), self.config.num_bands, self.config.rows_per_band).astype(np.uint64)
        halves = [((rows * m[1:]).sum(axis=2, dtype=np.uint64) + m[0]) >> np.uint64(32) for m in self._band_mult]
        return np.ascontiguousarray(((halves[0] << np.uint64(32)) | halves[1]).T)


def _ranks(counts: Int64[np.ndarray, " groups"]) -> Int64[np.ndarray, " items"]:
    """0, 1, ..., c-1 for each count c, concatenated: positions inside consecutive groups."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def is_empty(signatures: UInt32[np.ndarray, "docs perms"]) -> Bool[np.ndarray, " docs"]:
    """Which signatures belong to documents without tokens."""
    return (signatures == EMPTY).all(axis=1)


def estimated_jaccard(left: UInt32[np.ndarray, "pairs perms"], right: UInt32[np.ndarray, "pairs perms"]) -> Float[np.ndarray, " pairs"]:
    """The fraction of equal signature rows: an unbiased estimate of each pair's Jaccard similarity."""
    return (left == right).mean(axis=1)


def band_pairs(keys: UInt64[np.ndarray, " docs"], ordinals: Int64[np.ndarray, " docs"]) -> Int64[np.ndarray, "pairs 2"]:
    """Candidate pairs (earlier, later) of one band: star on each run's first member plus the chain of neighbours."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    new_run = np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]])
    positions = np.arange(len(keys))
    first = np.maximum.accumulate(np.where(new_run, positions, 0))
    members = np.flatnonzero(~new_run)
    star = np.stack([first[members], members], axis=1)
    chain = np.stack([members - 1, members], axis=1)
    return ordinals[order[np.concatenate([star, chain])]]


def unique_pairs(pairs: Int64[np.ndarray, "pairs 2"]) -> Int64[np.ndarray, "unique 2"]:
    """Distinct pairs, sorted, with the smaller ordinal first."""
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= 2**32):
        raise ValueError(f"ordinals must be in [0, 2^32) to pack a pair into 64 bits, got {pairs.min()=}, {pairs.max()=}; split the corpus")
    low, high = pairs.min(axis=1), pairs.max(axis=1)
    packed = np.unique((low.astype(np.uint64) << np.uint64(32)) | high.astype(np.uint64))
    return np.stack([packed >> np.uint64(32), packed & _LOW32], axis=1).astype(np.int64)


class UnionFind:
    """Disjoint sets over 0..n-1 with path compression and union by rank (near-constant time per operation)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.rank = bytearray(n)

    def find(self, x: int) -> int:
        """The root of x's set, compressing the path to it."""
        parent = self.parent
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, x: int, y: int) -> None:
        """Merge the sets of x and y, hanging the lower-ranked root under the other."""
        rx, ry = self.find(x), self.find(y)
        if rx == ry:
            return
        if self.rank[rx] < self.rank[ry]:
            rx, ry = ry, rx
        self.parent[ry] = rx
        if self.rank[rx] == self.rank[ry]:
            self.rank[rx] += 1


def cluster_firsts(pairs: Int64[np.ndarray, "pairs 2"]) -> tuple[Int64[np.ndarray, " members"], Int64[np.ndarray, " members"]]:
    """Connected components of `pairs`: every document in a pair, and the smallest ordinal of its component."""
    nodes = np.unique(pairs)
    local = np.searchsorted(nodes, pairs)
    sets = UnionFind(len(nodes))
    for x, y in local.tolist():
        sets.union(x, y)
    roots = np.array([sets.find(i) for i in range(len(nodes))], dtype=np.int64)
    first_of_root = np.full(len(nodes), len(nodes), dtype=np.int64)
    np.minimum.at(first_of_root, roots, np.arange(len(nodes)))
    return nodes, nodes[first_of_root[roots]]


@dataclass(frozen=True)
class Clusters:
    """The result of `lsh_clusters`: clustered documents, their clusters' first members, and counts."""

    members: Int64[np.ndarray, " members"]
    """Ordinals of the documents in a cluster of two or more, ascending."""
    firsts: Int64[np.ndarray, " members"]
    """For each member, the smallest ordinal in its cluster (the document to keep)."""
    candidate_pairs: int
    """Distinct pairs that shared at least one band key."""
    merged_pairs: int
    """Candidate pairs that passed verification and were unioned."""
    index_bytes: int
    """Peak bytes of the index: one band's keys, sort order and ordinals, plus the candidate pairs."""


def lsh_clusters(
    bands: Iterable[UInt64[np.ndarray, " docs"]],
    ordinals: Int64[np.ndarray, " docs"],
    signatures: UInt32[np.ndarray, "all perms"],
    threshold: float | None,
) -> Clusters:
    """Cluster documents (given by `ordinals`) whose keys agree in any band and whose estimated Jaccard is >= `threshold`.

    `ordinals` ascend and leave out documents without tokens (`is_empty`), whose
    identical signatures would all collide; `bands` yields one key array per
    band, aligned with `ordinals` (one band at a time, so only one is in
    memory); `signatures` is indexed by ordinal (an array or a memmap). With
    `threshold` None every candidate pair is merged unverified.
    """
    per_band, band_bytes = [], 0
    for keys in bands:
        per_band.append(unique_pairs(band_pairs(keys, ordinals)))
        band_bytes = max(band_bytes, keys.nbytes + 8 * len(keys) + ordinals.nbytes)
    candidates = unique_pairs(np.concatenate(per_band)) if per_band else np.zeros((0, 2), np.int64)
    index_bytes = band_bytes + sum(p.nbytes for p in per_band) + candidates.nbytes
    if threshold is not None:
        keep = [estimated_jaccard(signatures[c[:, 0]], signatures[c[:, 1]]) >= threshold for c in np.array_split(candidates, len(candidates) // 65536 + 1)]
        merged = candidates[np.concatenate(keep)]
    else:
        merged = candidates
    members, firsts = cluster_firsts(merged)
    return Clusters(members, firsts, len(candidates), len(merged), index_bytes)
