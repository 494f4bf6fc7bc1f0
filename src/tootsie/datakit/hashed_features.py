"""Hashed word unigram + bigram features of documents, the input of the quality classifier.

fastText's supervised features (and DCLM's quality classifier's): a document
becomes the bag of its word n-grams, each hashed into one of `2**bucket_bits`
buckets. Tokens are lower-cased words (runs of letters, digits and `_`) and
single punctuation characters, so `"Hello, world!"` gives `hello , world !`
and the bigrams `hello ,`, `, world`, `world !`.

The work is vectorized over a batch of documents: Arrow (RE2) lower-cases and
splits, `dictionary_encode` finds the batch's distinct tokens, only those are
hashed with xxh3_64 in Python, and bigram hashes are mixed from their two
unigram hashes in numpy (splitmix64's finalizer). A feature's bucket is the
top `bucket_bits` bits of its 64-bit hash, so the same text gives the same
buckets on every machine.

Example: `featurize(["a b", ""], FeatureConfig())` gives 3 features (`a`,
`b`, `a b`), all of document 0: `counts == [3, 0]`.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from jaxtyping import Int64, UInt64

FEATURE_VERSION = 1
"""Bumped whenever tokenization or hashing changes, so an old model file is refused rather than misread."""
PUNCTUATION = r"([^\pL\pN_\s])"
"""RE2 pattern of one character that is neither a word character nor whitespace: a token of its own."""
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class FeatureConfig:
    """How documents become hashed n-gram features; saved in the model file, so scoring matches training."""

    bucket_bits: int = 20
    """log2 of the hash buckets: 2**20 (fastText's default 2M is 2**21; DCLM-style models use 2**20-2**22)."""
    bigrams: bool = True
    """Add word bigrams to the unigrams (fastText `-wordNgrams 2`)."""
    max_chars: int = 100_000
    """Only the first this many characters of a document are read (bounds memory on huge documents)."""

    def __post_init__(self) -> None:
        if not 10 <= self.bucket_bits <= 26:
            raise ValueError(f"FeatureConfig.bucket_bits must be in [10, 26], got {self.bucket_bits!r}")
        if self.max_chars < 1:
            raise ValueError(f"FeatureConfig.max_chars must be >= 1, got {self.max_chars!r}")

    @property
    def buckets(self) -> int:
        """Number of hash buckets (weights of the linear model)."""
        return 1 << self.bucket_bits


def _mix(x: UInt64[np.ndarray, " n"]) -> UInt64[np.ndarray, " n"]:
    """splitmix64's finalizer: every input bit moves every output bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def tokens(texts: Sequence[str | None], config: FeatureConfig) -> pa.ListArray:
    """Per document, its lower-cased word and punctuation tokens (a list array; may hold empty strings)."""
    array = pa.array(texts, pa.large_string()).fill_null("")
    clipped = pc.utf8_slice_codeunits(array, 0, config.max_chars)
    spaced = pc.replace_substring_regex(pc.utf8_lower(clipped), PUNCTUATION, r" \1 ")
    return pc.utf8_split_whitespace(spaced)


def token_hashes(
    texts: Sequence[str | None], config: FeatureConfig
) -> tuple[UInt64[np.ndarray, " tokens"], Int64[np.ndarray, " tokens"], Int64[np.ndarray, " batch"]]:
    """xxh3_64 of every token of a batch (each distinct token hashed once), its document, and tokens per document."""
    split = tokens(texts, config)
    encoded = split.flatten().dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    hashes = np.fromiter(
        (xxhash.xxh3_64_intdigest(token.encode("utf-8")) for token in distinct), dtype=np.uint64, count=len(distinct)
    )
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    docs = pc.list_parent_indices(split).to_numpy().astype(np.int64)
    if "" in distinct:  # splitting "" or " x " leaves empty strings
        real = indices != distinct.index("")
        indices, docs = indices[real], docs[real]
    return hashes[indices], docs, np.bincount(docs, minlength=len(split)).astype(np.int64)


class Features(NamedTuple):
    """The hashed features of a batch of documents, one entry per (document, n-gram occurrence)."""

    buckets: Int64[np.ndarray, " features"]
    """Bucket id of each feature, in [0, 2**bucket_bits)."""
    docs: Int64[np.ndarray, " features"]
    """Index (in the batch) of the document each feature belongs to."""
    counts: Int64[np.ndarray, " batch"]
    """Features per document (0 for an empty document)."""


def featurize(texts: Sequence[str | None], config: FeatureConfig) -> Features:
    """The hashed unigram (and bigram) features of every document of a batch."""
    hashes, doc_of_token, lengths = token_hashes(texts, config)
    shift = np.uint64(64 - config.bucket_bits)
    if not config.bigrams or len(hashes) < 2:
        return Features((hashes >> shift).astype(np.int64), doc_of_token, lengths)
    pair = _mix(hashes[:-1] * _GOLDEN ^ hashes[1:])
    within = doc_of_token[:-1] == doc_of_token[1:]  # not a pair across two documents
    buckets = np.concatenate([hashes, pair[within]]) >> shift
    docs = np.concatenate([doc_of_token, doc_of_token[:-1][within]])
    return Features(buckets.astype(np.int64), docs, lengths + np.maximum(lengths - 1, 0))
