"""Pack a token cache into fixed-length sequences by concatenate-and-chunk.

Sequence i is `tokens[i*seq_len : (i+1)*seq_len]` of the cache's flat array, so
documents run across sequence boundaries and no token is padding. Each token
carries the index of the document it came from (its segment id), which lets
attention be blocked between documents and the loss skip cross-document
predictions. `DocumentSequences` is the alternative for components whose
documents must not be split: one document per sequence, truncated and padded.
`WholeDocumentSequences` packs several whole documents (chat conversations)
into each sequence, in cache order, first-fit: a document goes into the current
sequence if it fits in what is left, else it opens the next one; the rest is
padding. A document longer than seq_len gets a sequence of its own and is
truncated to its first seq_len tokens (its tail is never trained on).

The three are the registered `packing` choices (`PACKINGS`): `{kind:
concatenate}` (the default), `{kind: document}` and `{kind: whole_documents}`.
Every source also reads the cache's per-token loss mask (`token_mask`): 1
everywhere for text caches, the assistant tokens for chat caches.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tootsie.configfile import registry_union
from tootsie.datakit.token_cache import TokenCache
from tootsie.errors import TootsieError


@dataclass(frozen=True)
class PackedSequences:
    """Fixed-length windows over a token cache."""

    cache: TokenCache
    seq_len: int

    def __post_init__(self) -> None:
        if self.cache.num_tokens < self.seq_len:
            raise TootsieError(
                f"token cache {self.cache.directory} has {self.cache.num_tokens} tokens,"
                f" fewer than one sequence of {self.seq_len}"
            )

    @property
    def num_sequences(self) -> int:
        """Whole sequences available (the tail shorter than seq_len is dropped)."""
        return self.cache.num_tokens // self.seq_len

    def read(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and segment ids, each `[len(indices), seq_len]` int32.

        Tokens are copied as contiguous slices; segment ids come from the
        document boundaries that fall inside each window (a cumulative sum of
        boundary marks), never from a per-token search.
        """
        starts = np.asarray(indices, dtype=np.int64) * self.seq_len
        tokens = np.empty((len(starts), self.seq_len), dtype=np.int32)
        for row, start in enumerate(starts):
            tokens[row] = self.cache.tokens[start : start + self.seq_len]
        offsets = self.cache.offsets
        first = np.searchsorted(offsets, starts, side="right") - 1
        last = np.searchsorted(offsets, starts + self.seq_len - 1, side="right") - 1
        counts = last - first
        rows = np.repeat(np.arange(len(starts)), counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        marks = np.zeros((len(starts), self.seq_len), dtype=np.int32)
        marks[rows, offsets[np.repeat(first + 1, counts) + within] - starts[rows]] = 1
        segments = (first[:, None] % 2**31 + np.cumsum(marks, axis=1)).astype(np.int32)
        return tokens, segments

    def token_mask(self, indices: np.ndarray) -> np.ndarray:
        """The cache's loss mask over each window, `[len(indices), seq_len]` float32 (ones for text caches)."""
        starts = np.asarray(indices, dtype=np.int64) * self.seq_len
        return _gather_mask(self.cache, starts, starts + self.seq_len, self.seq_len)


def _require_documents(cache: TokenCache, packing: str) -> None:
    """Refuse an empty cache for a packing that reads documents (there is no sequence to draw)."""
    if cache.num_docs == 0:
        raise TootsieError(f"token cache {cache.directory} has 0 documents; {packing} packing needs at least one")


@dataclass(frozen=True)
class DocumentSequences:
    """One document per sequence, never split: truncated to seq_len, padded with segment id -1.

    For domains where a document cut in two is meaningless (a math problem and
    its solution, a function and its tests): the model always sees a document
    from its start, at the cost of the padding and of any tail past seq_len.
    """

    cache: TokenCache
    seq_len: int

    def __post_init__(self) -> None:
        _require_documents(self.cache, "document")

    @property
    def num_sequences(self) -> int:
        """One sequence per document."""
        return self.cache.num_docs

    def read(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (padding 0) and segment ids (padding -1), each `[len(indices), seq_len]` int32."""
        documents = np.asarray(indices, dtype=np.int64)
        tokens = np.zeros((len(documents), self.seq_len), dtype=np.int32)
        segments = np.full((len(documents), self.seq_len), -1, dtype=np.int32)
        for row, doc in enumerate(documents):
            start = int(self.cache.offsets[doc])
            stop = min(int(self.cache.offsets[doc + 1]), start + self.seq_len)
            tokens[row, : stop - start] = self.cache.tokens[start:stop]
            segments[row, : stop - start] = doc % 2**31
        return tokens, segments

    def token_mask(self, indices: np.ndarray) -> np.ndarray:
        """The cache's loss mask over each (truncated) document, zero on padding."""
        documents = np.asarray(indices, dtype=np.int64)
        starts = self.cache.offsets[documents]
        stops = np.minimum(self.cache.offsets[documents + 1], starts + self.seq_len)
        return _gather_mask(self.cache, starts, stops, self.seq_len)


@dataclass(frozen=True)
class WholeDocumentSequences:
    """Whole documents packed first-fit in cache order, never split; one longer than seq_len is truncated alone."""

    cache: TokenCache
    seq_len: int

    def __post_init__(self) -> None:
        _require_documents(self.cache, "whole-document")

    @cached_property
    def first_documents(self) -> np.ndarray:
        """Sequence i holds documents `first_documents[i]` up to `first_documents[i + 1]` (exclusive)."""
        lengths = np.minimum(np.diff(self.cache.offsets), self.seq_len).tolist()
        firsts, used = [0], 0
        for doc, length in enumerate(lengths):
            if used + length > self.seq_len:
                firsts.append(doc)
                used = 0
            used += length
        firsts.append(len(lengths))
        return np.array(firsts, dtype=np.int64)

    @property
    def num_sequences(self) -> int:
        """Sequences after packing."""
        return len(self.first_documents) - 1

    def read(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (padding 0) and segment ids (document index, padding -1), each `[len(indices), seq_len]` int32."""
        rows = np.asarray(indices, dtype=np.int64)
        tokens = np.zeros((len(rows), self.seq_len), dtype=np.int32)
        segments = np.full((len(rows), self.seq_len), -1, dtype=np.int32)
        for (row, column), (start, stop, doc) in self._pieces(rows).items():
            tokens[row, column : column + stop - start] = self.cache.tokens[start:stop]
            segments[row, column : column + stop - start] = doc % 2**31
        return tokens, segments

    def token_mask(self, indices: np.ndarray) -> np.ndarray:
        """The cache's loss mask laid out as `read` lays out the tokens, zero on padding."""
        rows = np.asarray(indices, dtype=np.int64)
        mask = np.zeros((len(rows), self.seq_len), dtype=np.float32)
        for (row, column), (start, stop, _) in self._pieces(rows).items():
            piece = np.ones(stop - start) if self.cache.loss_mask is None else self.cache.loss_mask[start:stop]
            mask[row, column : column + stop - start] = piece
        return mask

    def _pieces(self, rows: np.ndarray) -> dict[tuple[int, int], tuple[int, int, int]]:
        """(row, column) where each document of the rows lands → its (start, stop) in the cache and its index."""
        pieces = {}
        for row, sequence in enumerate(rows.tolist()):
            column = 0
            for doc in range(int(self.first_documents[sequence]), int(self.first_documents[sequence + 1])):
                start = int(self.cache.offsets[doc])
                stop = min(int(self.cache.offsets[doc + 1]), start + self.seq_len)
                pieces[row, column] = (start, stop, doc)
                column += stop - start
        return pieces


def _gather_mask(cache: TokenCache, starts: np.ndarray, stops: np.ndarray, seq_len: int) -> np.ndarray:
    """Row r holds the cache's loss mask over `[starts[r], stops[r])` (ones for a text cache), zero after."""
    mask = np.zeros((len(starts), seq_len), dtype=np.float32)
    for row, (start, stop) in enumerate(zip(starts.tolist(), stops.tolist(), strict=True)):
        mask[row, : stop - start] = 1.0 if cache.loss_mask is None else cache.loss_mask[start:stop]
    return mask


def next_token_loss_mask(segment_ids: np.ndarray, token_mask: np.ndarray | None = None) -> np.ndarray:
    """1.0 where position t predicts token t+1 of the same document (and `token_mask` is on at t+1), else 0.0.

    `token_mask` is the cache's per-token loss mask laid out like the tokens: a
    chat cache trains only on predicting assistant tokens.
    """
    mask = np.zeros(segment_ids.shape, dtype=np.float32)
    mask[:, :-1] = (segment_ids[:, 1:] == segment_ids[:, :-1]) & (segment_ids[:, :-1] >= 0)
    if token_mask is not None:
        mask[:, :-1] *= token_mask[:, 1:]
    return mask


@dataclass(frozen=True)
class ConcatenateConfig:
    """`concatenate`: documents back to back, cut every seq_len tokens (pretraining)."""

    def build(self, cache: TokenCache, seq_len: int) -> PackedSequences:
        """The cache's fixed-length windows."""
        return PackedSequences(cache, seq_len)


@dataclass(frozen=True)
class DocumentConfig:
    """`document`: one document per sequence, truncated to seq_len and padded."""

    def build(self, cache: TokenCache, seq_len: int) -> DocumentSequences:
        """One sequence per document."""
        return DocumentSequences(cache, seq_len)


@dataclass(frozen=True)
class WholeDocumentsConfig:
    """`whole_documents`: several whole documents per sequence, first-fit in order, never split (SFT)."""

    def build(self, cache: TokenCache, seq_len: int) -> WholeDocumentSequences:
        """The cache's documents packed into sequences."""
        return WholeDocumentSequences(cache, seq_len)


PACKINGS: dict[str, type] = {
    "concatenate": ConcatenateConfig,
    "document": DocumentConfig,
    "whole_documents": WholeDocumentsConfig,
}
PackingChoice = registry_union(PACKINGS)
"""Any registered packing config, written `{kind: NAME}` in config files."""
