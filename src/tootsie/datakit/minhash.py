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
   the spaces. "Hello, World!" -> ["hello", "world"]. A byte table does this for
   ASCII; other text replaces its few distinct non-word characters (or, past 16
   of them, runs the regex). Both give exactly the regex's words.
2. Tokens: a word becomes the low 32 bits of its xxh3_64, with the lowest bit
   set (so no token is 0); in `char` mode a token is a code point + 1. A batch is
   one byte buffer: NumPy finds the word boundaries and evaluates xxh3's
   formulas for 1-16 byte inputs on all words at once (99% of words in code and
   prose; bit-exact, tested against xxhash); longer words call xxhash.
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
   per permutation and block of shingles from many documents, one uint64
   multiply, one add and a per-document `minimum.reduceat`: three passes over
   memory, about 0.75 ns per shingle and permutation and 70% of the time of
   `signatures` on the 2-core dev VM (`benchmarks/bench_minhash.py`, row
   `sketch:tootsie`). That is the price of 286 independent permutations; rensa's
   bucketed sketch does about shingles + perms work and ran about 9x faster there.
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
    sigs = hasher.signatures(
        ["the quick brown fox jumps over the lazy dog", "the quick brown fox jumps over the lazy cat"]
    )
    estimated_jaccard(sigs[[0]], sigs[[1]])  # [0.668]: 4 of the 6 distinct word 5-grams are shared, J = 0.667
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import xxhash
from jaxtyping import Bool, Float, Int64, UInt8, UInt32, UInt64

EMPTY = np.uint32(0xFFFFFFFF)
"""Every value of the signature of a document without tokens (it joins no LSH bucket)."""
# Shingles per block (4 MB of uint64), ~1,300 documents of 2-5 KB; 2^16..2^19 within noise on the dev VM.
_CHUNK_ROWS = 1 << 19
# Characters tokenized per buffer, ~75 such documents: 2^17..2^20 ran 1.6x faster than a whole
# 1,024-document batch (3.5 M).
_TEXT_CHARS = 1 << 18
_NON_WORD = re.compile(r"\W+")
# Byte c -> itself if a word byte (ASCII letter, digit, `_`, or any byte >= 128 of a UTF-8 sequence),
# else a space; A-Z -> a-z.
_ASCII_TABLE = bytes(
    c + 32 if 65 <= c <= 90 else c if chr(c).isalnum() or c == ord("_") or c >= 128 else ord(" ") for c in range(256)
)
_ASCII_BYTES = bytes(range(128))
_MAX_REPLACES = 16  # distinct non-ASCII non-word characters replaced one pass each; beyond, one regex pass is cheaper
_LOW32 = np.uint64(0xFFFFFFFF)
_SIGN = np.uint64(1 << 63)
_U32 = np.uint64(32)
_SPACE = 32
# xxh3_64 with seed 0 and the default secret (xxhash.h v0.8): multipliers, and the secret words
# each short-input path XORs in.
_PRIME64_2, _PRIME64_3 = np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)
_PRIME_MX1, _PRIME_MX2 = np.uint64(0x165667919E3779F9), np.uint64(0x9FB21C651E98DF25)
_FLIP_1TO3 = np.uint64(0x87275A9B)  # readLE32(secret) ^ readLE32(secret + 4)
_FLIP_4TO8 = np.uint64(0xC73AB174C5ECD5A2)  # readLE64(secret + 8) ^ readLE64(secret + 16)
_FLIP_9TO16 = np.uint64(0x6782737BEA4239B9), np.uint64(0xAF56BC3B0996523A)  # secret words 24 ^ 32 and 40 ^ 48


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
            raise ValueError(
                f"num_perms must be a positive multiple of num_bands, got {self.num_perms=}, {self.num_bands=};"
                " e.g. 286 and 26"
            )
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


def _normalized(text: str) -> bytes:
    """`text` lowercased as UTF-8 with every non-word character replaced by a space (step 1 of the module docstring)."""
    if text.isascii():  # the table lowercases ASCII, so str.lower is needed only for other text
        return text.encode("ascii").translate(_ASCII_TABLE)
    # `\W` is exactly "not str.isalnum() and not _" (checked over every code point in the tests), and a UTF-8
    # sequence only matches at character boundaries, so replacing each distinct non-word character's bytes is safe.
    lowered = text.lower()
    encoded = lowered.encode("utf-8", "surrogatepass")  # a lone surrogate is a non-word character, replaced below
    non_word = [
        char
        for char in set(encoded.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass"))
        if not char.isalnum()
    ]
    if len(non_word) > _MAX_REPLACES:
        return _NON_WORD.sub(" ", lowered).encode("utf-8")
    for char in non_word:
        encoded = encoded.replace(char.encode("utf-8", "surrogatepass"), b" ")
    return encoded.translate(_ASCII_TABLE)


def words(text: str) -> list[bytes]:
    """The normalized words of `text` as UTF-8 bytes (see step 1 of the module docstring)."""
    return _normalized(text).split()


def normalize_for_shingles(text: str) -> str:
    """The text that shingles are cut from: normalized words joined by single spaces."""
    return b" ".join(words(text)).decode("utf-8")


def word_tokens(texts: Sequence[str]) -> tuple[UInt64[np.ndarray, " tokens"], Int64[np.ndarray, " docs"]]:
    """The word tokens of every text, concatenated, and the number per text (step 2 of the module docstring).

    One buffer holds the whole batch, so finding words and hashing them are NumPy passes rather than a
    Python call per word; words longer than 16 bytes (about 1% of words in code and prose) call xxhash.
    """
    parts = [_normalized(text) for text in texts]
    buffer = b" ".join(parts) + b" " * 8  # 8 spaces: room for the unaligned 8-byte view
    data = np.frombuffer(buffer, dtype=np.uint8)
    in_word = np.zeros(len(data) + 1, dtype=bool)
    np.not_equal(data, _SPACE, out=in_word[1:])
    edges = np.flatnonzero(in_word[1:] != in_word[:-1])  # alternating word starts and ends; the buffer ends in spaces
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    text_ends = np.cumsum(
        np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)) + 1
    )  # each part and its separator
    counts = np.diff(np.searchsorted(starts, text_ends), prepend=0)
    hashes = np.empty(len(starts), dtype=np.uint64)
    short = lengths <= 16
    hashes[short] = _xxh3_64_short(buffer, starts[short], lengths[short])
    long = np.flatnonzero(~short)
    hashes[long] = [
        xxhash.xxh3_64_intdigest(buffer[start:end])
        for start, end in zip(starts[long].tolist(), ends[long].tolist(), strict=True)
    ]
    return (hashes & _LOW32) | np.uint64(1), counts


def _xxh3_64_short(
    buffer: bytes, starts: Int64[np.ndarray, " words"], lengths: Int64[np.ndarray, " words"]
) -> UInt64[np.ndarray, " words"]:
    """xxh3_64 (seed 0) of the words `buffer[start : start + length]`, 1 <= length <= 16: xxhash.h's XXH3_len_1to3,
    4to8 and 9to16_64b, vectorized; the tests check them bit for bit against xxhash."""
    data: UInt8[np.ndarray, " bytes"] = np.frombuffer(buffer, dtype=np.uint8)
    read32 = np.ndarray(
        (len(data) - 3,), dtype="<u4", buffer=buffer, strides=(1,)
    )  # read32[i]: 4 bytes at i, unaligned
    read64 = np.ndarray((len(data) - 7,), dtype="<u8", buffer=buffer, strides=(1,))
    size = lengths.astype(np.uint64)
    out = np.empty(len(starts), dtype=np.uint64)

    i = np.flatnonzero(lengths < 4)  # XXH3_len_1to3_64b, then XXH64_avalanche
    s, n = starts[i], lengths[i]
    h = (
        (data[s].astype(np.uint64) << np.uint64(16))
        | (data[s + (n >> 1)].astype(np.uint64) << np.uint64(24))
        | data[s + n - 1]
        | (size[i] << np.uint64(8))
    )
    h ^= _FLIP_1TO3
    h ^= h >> np.uint64(33)
    h *= _PRIME64_2
    h ^= h >> np.uint64(29)
    h *= _PRIME64_3
    out[i] = h ^ (h >> _U32)

    i = np.flatnonzero((lengths >= 4) & (lengths <= 8))  # XXH3_len_4to8_64b, then XXH3_rrmxmx
    s, n = starts[i], lengths[i]
    h = ((read32[s].astype(np.uint64) << _U32) + read32[s + n - 4]) ^ _FLIP_4TO8
    h ^= ((h << np.uint64(49)) | (h >> np.uint64(15))) ^ ((h << np.uint64(24)) | (h >> np.uint64(40)))
    h *= _PRIME_MX2
    h ^= (h >> np.uint64(35)) + size[i]
    h *= _PRIME_MX2
    out[i] = h ^ (h >> np.uint64(28))

    i = np.flatnonzero(lengths > 8)  # XXH3_len_9to16_64b, then XXH3_avalanche
    s, n = starts[i], lengths[i]
    low, high = read64[s] ^ _FLIP_9TO16[0], read64[s + n - 8] ^ _FLIP_9TO16[1]
    h = size[i] + low.byteswap() + high + _mul128_fold64(low, high)
    h ^= h >> np.uint64(37)
    h *= _PRIME_MX1
    out[i] = h ^ (h >> _U32)
    return out


def _mul128_fold64(x: UInt64[np.ndarray, " n"], y: UInt64[np.ndarray, " n"]) -> UInt64[np.ndarray, " n"]:
    """The low XOR the high 64 bits of each 128-bit product x * y, from 32-bit halves (xxhash.h's XXH_mult64to128)."""
    x0, x1, y0, y1 = x & _LOW32, x >> _U32, y & _LOW32, y >> _U32
    low_low, high_low, low_high = x0 * y0, x1 * y0, x0 * y1
    cross = (low_low >> _U32) + (high_low & _LOW32) + low_high
    upper = (high_low >> _U32) + (cross >> _U32) + x1 * y1
    return ((cross << _U32) | (low_low & _LOW32)) ^ upper


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

    def tokens(self, texts: Sequence[str]) -> tuple[UInt64[np.ndarray, " tokens"], Int64[np.ndarray, " docs"]]:
        """Nonzero 32-bit tokens of every text, concatenated, and the number per text.

        The tokens are hashed words, or code points + 1 in `char` mode.
        """
        if self.config.shingle == "word":
            return word_tokens(texts)
        points = [np.frombuffer(normalize_for_shingles(text).encode("utf-32-le"), dtype="<u4") for text in texts]
        counts = np.fromiter(map(len, points), dtype=np.int64, count=len(points))
        return np.concatenate([np.zeros(0, dtype="<u4"), *points]).astype(np.uint64) + np.uint64(1), counts

    def shingle_keys(
        self, tokens: UInt64[np.ndarray, " tokens"], counts: Int64[np.ndarray, " docs"]
    ) -> tuple[UInt64[np.ndarray, " shingles"], Int64[np.ndarray, " docs"]]:
        """32-bit keys of every document's n-grams, concatenated, and the number of keys per document."""
        n = self.config.ngram
        per_doc = np.where(counts > 0, np.maximum(counts - n + 1, 1), 0)
        # Each document's tokens followed by n-1 zeros, so no window reads into the next document.
        padded = np.zeros(len(tokens) + (n - 1) * len(counts) + n, dtype=np.uint64)
        padded[np.arange(len(tokens)) + np.repeat(np.arange(len(counts)) * (n - 1), counts)] = tokens
        doc_starts = np.cumsum(counts + n - 1) - (counts + n - 1)
        windows = len(padded) - n + 1
        acc = np.full(windows, self._shingle_mult[0], dtype=np.uint64)
        term = np.empty(windows, dtype=np.uint64)
        for j in range(n):
            acc += np.multiply(padded[j : j + windows], self._shingle_mult[j + 1], out=term)
        starts = np.repeat(doc_starts, per_doc) + _ranks(per_doc)
        return acc[starts] >> _U32, per_doc

    def signatures(self, texts: Iterable[str]) -> UInt32[np.ndarray, "docs perms"]:
        """MinHash signatures of `texts`; a document without tokens gets the all-`EMPTY` signature."""
        keys, per_doc = zip(
            *(self.shingle_keys(*self.tokens(group)) for group in _groups(list(texts), _TEXT_CHARS)), strict=True
        )
        return self.signatures_of_keys(np.concatenate(keys), np.concatenate(per_doc))

    def signatures_of_keys(
        self, keys: UInt64[np.ndarray, " shingles"], per_doc: Int64[np.ndarray, " docs"]
    ) -> UInt32[np.ndarray, "docs perms"]:
        """Min over each document's keys of every permutation; one permutation at a time, `_CHUNK_ROWS` keys per block.

        Per permutation and block: a 1-D multiply, add and `minimum.reduceat`; NumPy's contiguous loops with a
        scalar operand ran about 1.5x faster than one (perms x keys) broadcast block on the dev VM. The add uses
        b ^ 2^63, which flips the top bit of every value, so a signed int64 minimum (faster than the unsigned one
        on AVX2) finds the same element; the flip is undone at the end.
        """
        docs = np.flatnonzero(per_doc)  # documents with keys; the rest keep the EMPTY signature
        ends = np.cumsum(per_doc[docs])
        starts = ends - per_doc[docs]
        mins = np.full((self.config.num_perms, len(docs)), np.iinfo(np.int64).max, dtype=np.int64)
        values = np.empty(min(_CHUNK_ROWS, len(keys)), dtype=np.uint64)
        for start in range(0, len(keys), _CHUNK_ROWS):
            stop = min(start + _CHUNK_ROWS, len(keys))
            first, last = np.searchsorted(
                ends, [start, stop - 1], side="right"
            )  # documents first..last overlap the block
            offsets = np.maximum(starts[first : last + 1] - start, 0)
            block, chunk, block_values = (
                np.empty((len(mins), len(offsets)), dtype=np.int64),
                keys[start:stop],
                values[: stop - start],
            )
            for row, a, b in zip(block, self._a, self._b ^ _SIGN, strict=True):
                np.multiply(chunk, a, out=block_values)
                np.add(block_values, b, out=block_values)
                np.minimum.reduceat(block_values.view(np.int64), offsets, out=row)
            np.minimum(mins[:, first : last + 1], block, out=mins[:, first : last + 1])
        signatures = np.full((len(per_doc), self.config.num_perms), EMPTY, dtype=np.uint32)
        signatures[docs] = ((mins.view(np.uint64) ^ _SIGN) >> _U32).T
        return signatures

    def band_keys(self, signatures: UInt32[np.ndarray, "docs perms"]) -> UInt64[np.ndarray, "bands docs"]:
        """One 64-bit key per band and document (band-major, so a band's keys are contiguous)."""
        rows = signatures.reshape(len(signatures), self.config.num_bands, self.config.rows_per_band).astype(np.uint64)
        halves = [((rows * m[1:]).sum(axis=2, dtype=np.uint64) + m[0]) >> np.uint64(32) for m in self._band_mult]
        return np.ascontiguousarray(((halves[0] << np.uint64(32)) | halves[1]).T)


def _groups(texts: list[str], chars: int) -> list[list[str]]:
    """`texts` cut into consecutive groups of at least `chars` characters (the last may be shorter, or empty)."""
    groups, start, size = [], 0, 0
    for i, text in enumerate(texts):
        size += len(text)
        if size >= chars:
            groups.append(texts[start : i + 1])
            start, size = i + 1, 0
    if start < len(texts) or not groups:
        groups.append(texts[start:])
    return groups


def _ranks(counts: Int64[np.ndarray, " groups"]) -> Int64[np.ndarray, " items"]:
    """0, 1, ..., c-1 for each count c, concatenated: positions inside consecutive groups."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def is_empty(signatures: UInt32[np.ndarray, "docs perms"]) -> Bool[np.ndarray, " docs"]:
    """Which signatures belong to documents without tokens."""
    return (signatures == EMPTY).all(axis=1)


def estimated_jaccard(
    left: UInt32[np.ndarray, "pairs perms"], right: UInt32[np.ndarray, "pairs perms"]
) -> Float[np.ndarray, " pairs"]:
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
        raise ValueError(
            f"ordinals must be in [0, 2^32) to pack a pair into 64 bits, got {pairs.min()=}, {pairs.max()=};"
            " split the corpus"
        )
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


def cluster_firsts(
    pairs: Int64[np.ndarray, "pairs 2"],
) -> tuple[Int64[np.ndarray, " members"], Int64[np.ndarray, " members"]]:
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
    """Cluster documents `ordinals` whose keys agree in any band and whose estimated Jaccard is >= `threshold`.

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
        keep = [
            estimated_jaccard(signatures[c[:, 0]], signatures[c[:, 1]]) >= threshold
            for c in np.array_split(candidates, len(candidates) // 65536 + 1)
        ]
        merged = candidates[np.concatenate(keep)]
    else:
        merged = candidates
    members, firsts = cluster_firsts(merged)
    return Clusters(members, firsts, len(candidates), len(merged), index_bytes)
