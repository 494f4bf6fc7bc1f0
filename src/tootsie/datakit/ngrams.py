"""Word n-gram keys of normalized text, and an index from keys to the texts that hold them.

Decontamination compares an eval set with a corpus by word n-grams, so both
sides must split text into words the same way, whatever the formatting around
it. Normalization, in this order:

1. Unicode NFKC (full-width letters, ligatures, `½` → `1⁄2`, composed accents);
2. lowercase;
3. every run of characters that are not letters, digits or combining marks
   (punctuation, symbols, markdown, quotes of any shape, whitespace, line
   breaks) separates words and is dropped.

A word's hash is xxh3_64 of its UTF-8 bytes; a window of `m` consecutive words
has the key `T[m] + sum_j h[i + j] * M[j]  (mod 2**64)`, where the `M[j]` are
odd constants and `T[m]` tags the window length (both xxh3_64 of fixed
labels). With random word hashes and odd `M[j]`, two different windows collide
with probability 2**-64, and all keys of a batch come from `m` vectorized
multiply-adds instead of one hash call per n-gram. Only the distinct words of a
batch go through Python (one xxhash call each).

`NgramIndex` maps each distinct key of a set of items (eval questions) to the
items holding it: sorted keys, searched with `np.searchsorted` behind a bit
table that rules out most document n-grams with one gather, and postings in
CSR form; `overlaps` turns a batch of documents into (document, item, fraction
of the item's keys found) triples. It is saved as plain `.npy` files that
worker processes memory-map (no pickle).

Example: `normalized_words("**Q:** Natalia’s  “cookies”\\ncost $1,200.")` is
`["q", "natalia", "s", "cookies", "cost", "1", "200"]`, the same as for
`"q natalia's cookies cost 1 200"`, so the two texts share every n-gram key.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from jaxtyping import Bool, Float64, Int32, Int64, UInt64

from tootsie.datakit.parquet_io import write_npy_atomic

NON_ASCII_SEPARATOR = r"[^\x00-\x7f\p{L}\p{N}\p{M}]+"
"""RE2 pattern of non-ASCII characters that separate words: anything but letters, digits and combining marks."""
_ASCII_SEPARATORS_TO_SPACE = bytes(32 if b < 128 and not chr(b).isalnum() else b for b in range(256))
"""Byte map sending ASCII punctuation, symbols and whitespace to a space; keeps letters, digits and non-ASCII bytes."""
INDEX_ARRAYS = ("keys", "offsets", "postings", "sizes", "lengths")


def normalize_texts(texts: pa.Array | pa.ChunkedArray | Sequence[str | None]) -> pa.StringArray:
    """NFKC, lowercase, and every separator character replaced by an ASCII space; a null text becomes empty.

    Non-ASCII separators go through one regex pass and ASCII ones through a
    byte table (ASCII bytes never occur inside a multi-byte UTF-8 character),
    which keeps this fast on mostly-ASCII text.
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    array = texts.cast(pa.string()) if isinstance(texts, pa.Array) else pa.array(list(texts), type=pa.string())
    lowered = pc.utf8_lower(pc.utf8_normalize(array.fill_null(""), form="NFKC"))
    spaced = pc.replace_substring_regex(lowered, pattern=NON_ASCII_SEPARATOR, replacement=" ")
    _, offsets, data = spaced.buffers()
    mapped = pa.py_buffer(data.to_pybytes().translate(_ASCII_SEPARATORS_TO_SPACE)) if data is not None else None
    return pa.StringArray.from_buffers(len(spaced), offsets, mapped, None, 0, spaced.offset)


def normalized_words(text: str) -> list[str]:
    """The words of one text after normalization (for inspection and tests)."""
    return normalize_texts([text])[0].as_py().split()


def word_hashes(
    texts: pa.Array | pa.ChunkedArray | Sequence[str | None],
) -> tuple[UInt64[np.ndarray, " words"], Int64[np.ndarray, " texts"]]:
    """xxh3_64 of every word of every text, in order (one flat array), and each text's word count.

    Each distinct word of the batch is hashed once (one Python call per distinct word).
    """
    spaced = normalize_texts(texts)
    pieces = pc.ascii_split_whitespace(spaced)
    encoded = pc.dictionary_encode(pc.list_flatten(pieces))
    distinct = encoded.dictionary.cast(pa.binary())
    table = np.fromiter(
        (xxhash.xxh3_64_intdigest(word) for word in distinct.to_pylist()), dtype=np.uint64, count=len(distinct)
    )
    indices = encoded.indices.to_numpy()
    keep = (pc.binary_length(distinct).to_numpy() > 0)[indices]
    parents = pc.list_parent_indices(pieces).to_numpy()[keep]
    return table[indices[keep]], np.bincount(parents, minlength=len(spaced)).astype(np.int64)


@cache
def _mixers(length: int) -> tuple[UInt64[np.ndarray, " length"], np.uint64]:
    """Odd per-position multipliers `M[0:length]` and the length tag `T[length]`."""
    multipliers = [xxhash.xxh3_64_intdigest(f"tootsie-ngram-position-{j}".encode()) | 1 for j in range(length)]
    return np.array(multipliers, dtype=np.uint64), np.uint64(
        xxhash.xxh3_64_intdigest(f"tootsie-ngram-length-{length}".encode())
    )


def window_keys(hashes: UInt64[np.ndarray, " words"], length: int) -> UInt64[np.ndarray, " windows"]:
    """The key of each window of `length` consecutive words: `len(hashes) - length + 1` keys (none if too few words)."""
    if length < 1:
        raise ValueError(f"window length must be >= 1, got {length=}")
    count = len(hashes) - length + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    multipliers, tag = _mixers(length)
    keys = np.full(count, tag, dtype=np.uint64)
    for j in range(length):
        keys += hashes[j : j + count] * multipliers[j]
    return keys


def _text_windows(
    hashes: UInt64[np.ndarray, " words"], counts: Int64[np.ndarray, " texts"], length: int
) -> tuple[UInt64[np.ndarray, " windows"], Int64[np.ndarray, " windows"], Int64[np.ndarray, " windows"]]:
    """Keys of the windows that lie inside one text of a flat batch, with each window's text and start within it."""
    keys = window_keys(hashes, length)
    ends = np.cumsum(counts)
    owner = np.repeat(np.arange(len(counts)), counts)[: len(keys)]
    start = np.arange(len(keys)) - (ends - counts)[owner]
    inside = start + length <= counts[owner]
    return keys[inside], owner[inside], start[inside]


@dataclass(frozen=True, eq=False)
class NgramIndex:
    """The distinct n-gram keys of a set of items, each with the items that hold it."""

    keys: UInt64[np.ndarray, " keys"]
    """Sorted distinct keys."""
    offsets: Int64[np.ndarray, " keys_plus_1"]
    """Items holding `keys[k]` are `postings[offsets[k]:offsets[k + 1]]`."""
    postings: Int32[np.ndarray, " postings"]
    """Item numbers, grouped by key."""
    sizes: Int64[np.ndarray, " items"]
    """Distinct keys per item (0 for an item without words)."""
    lengths: Int64[np.ndarray, " lengths"]
    """Window lengths a document must be scanned with: n, and each word count (< n) of a short item text."""

    @classmethod
    def build(cls, items: Sequence[Sequence[str]], n: int) -> "NgramIndex":
        """Index items, each one or more texts.

        A text's keys are its n-grams, or one whole-text key if it has < n words.
        """
        texts = [text for item in items for text in item]
        text_item = np.repeat(np.arange(len(items)), [len(item) for item in items])
        hashes, counts = word_hashes(texts)
        found_keys, found_items = [], []
        short = sorted({int(c) for c in counts if 0 < c < n})
        for length in [n, *short]:
            keys, owner, start = _text_windows(hashes, counts, length)
            if length < n:
                whole = (start == 0) & (counts[owner] == length)
                keys, owner = keys[whole], owner[whole]
            found_keys.append(keys)
            found_items.append(text_item[owner])
        key_column, item_column = np.concatenate(found_keys), np.concatenate(found_items)
        order = np.lexsort((item_column, key_column))
        key_column, item_column = key_column[order], item_column[order]
        fresh = np.ones(len(key_column), dtype=bool)
        fresh[1:] = (key_column[1:] != key_column[:-1]) | (item_column[1:] != item_column[:-1])
        key_column, item_column = key_column[fresh], item_column[fresh]
        distinct, first = np.unique(key_column, return_index=True)
        return cls(
            keys=distinct,
            offsets=np.append(first, len(key_column)).astype(np.int64),
            postings=item_column.astype(np.int32),
            sizes=np.bincount(item_column, minlength=len(items)).astype(np.int64),
            lengths=np.array([n, *short], dtype=np.int64),
        )

    def save(self, directory: Path) -> None:
        """Write each array as `<name>.npy` (temporary name, then rename)."""
        directory.mkdir(parents=True, exist_ok=True)
        for name in INDEX_ARRAYS:
            write_npy_atomic(getattr(self, name), directory / f"{name}.npy")

    @classmethod
    def load(cls, directory: Path) -> "NgramIndex":
        """Memory-map an index written by `save`."""
        return cls(
            **{name: np.load(directory / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in INDEX_ARRAYS}
        )

    @cached_property
    def _prefilter(self) -> tuple[Bool[np.ndarray, " slots"], np.uint64]:
        """A table over the top bits of keys, about 1/16 full, that rules out most non-keys with one gather."""
        bits = int(np.clip(np.ceil(np.log2(max(len(self.keys), 1) * 16)), 16, 28))
        table = np.zeros(1 << bits, dtype=bool)
        table[self.keys >> np.uint64(64 - bits)] = True
        return table, np.uint64(64 - bits)

    def overlaps(
        self, hashes: UInt64[np.ndarray, " words"], counts: Int64[np.ndarray, " texts"]
    ) -> tuple[Int64[np.ndarray, " pairs"], Int64[np.ndarray, " pairs"], Float64[np.ndarray, " pairs"]]:
        """For each (text, item) pair sharing a key: the text, the item and the fraction of the item's keys in the text.

        `hashes` and `counts` are `word_hashes` of a batch of texts; windows that
        cross from one text into the next are never counted.
        """
        ends = np.cumsum(counts)
        found_texts, found_keys = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        table, shift = self._prefilter
        for length in self.lengths.tolist():
            keys = window_keys(hashes, length)
            candidates = np.flatnonzero(table[keys >> shift])
            position = np.minimum(np.searchsorted(self.keys, keys[candidates]), len(self.keys) - 1)
            hit = self.keys[position] == keys[candidates]
            starts, position = candidates[hit], position[hit]
            owner = np.searchsorted(ends, starts, side="right")
            inside = starts + length <= ends[owner]
            found_texts.append(owner[inside])
            found_keys.append(position[inside])
        pairs = np.unique(np.concatenate(found_texts) * len(self.keys) + np.concatenate(found_keys))
        texts, keys = pairs // len(self.keys), pairs % len(self.keys)
        starts, runs = self.offsets[keys], self.offsets[keys + 1] - self.offsets[keys]
        first_of_run = np.cumsum(runs) - runs
        posting = np.repeat(starts - first_of_run, runs) + np.arange(int(runs.sum()))
        items = self.postings[posting].astype(np.int64)
        text_items, shared = np.unique(np.repeat(texts, runs) * len(self.sizes) + items, return_counts=True)
        items = text_items % len(self.sizes)
        return text_items // len(self.sizes), items, shared / self.sizes[items]
