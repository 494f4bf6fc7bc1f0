"""Pack a token cache into fixed-length sequences by concatenate-and-chunk.

Sequence i is `tokens[i*seq_len : (i+1)*seq_len]` of the cache's flat array, so
documents run across sequence boundaries and no token is padding. Each token
carries the index of the document it came from (its segment id), which lets
attention be blocked between documents and the loss skip cross-document
predictions. `DocumentSequences` is the alternative for components whose
documents must not be split: one document per sequence, truncated and padded.
"""

from dataclasses import dataclass

import numpy as np

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
        if self.cache.num_docs == 0:
            raise TootsieError(
                f"token cache {self.cache.directory} has 0 tokens in 0 documents;"
                " document packing needs at least one document"
            )

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


def next_token_loss_mask(segment_ids: np.ndarray) -> np.ndarray:
    """1.0 where position t predicts token t+1 of the same document, else 0.0 (last position and padding included)."""
    mask = np.zeros(segment_ids.shape, dtype=np.float32)
    mask[:, :-1] = (segment_ids[:, 1:] == segment_ids[:, :-1]) & (segment_ids[:, :-1] >= 0)
    return mask
