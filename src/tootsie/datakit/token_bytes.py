"""UTF-8 bytes each cached token adds to its document's decoded text: the denominator of bits-per-byte.

Counts come from decoding, not from the tokenizer's vocabulary, so they hold
for any HF tokenizer (byte-level BPE, Llama 3's Split + ByteLevel, Metaspace
SentencePiece...). Each document is decoded token by token with the
tokenizers `DecodeStream`, which holds back a token until the bytes it starts
form whole characters: a token's count is the UTF-8 size of the text it
releases, special tokens count zero, and a document's counts add up to the
UTF-8 size of its decoded text. Example: `" café"` split as `" caf" + "Ã" + "©"`
(the two bytes of é) counts 4, 0, 2.
"""

import numpy as np
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from tootsie.datakit.token_cache import TokenCache


def document_token_bytes(tokenizer: Tokenizer, ids: np.ndarray) -> np.ndarray:
    """Bytes of decoded text each token of one document releases (int32, same length as `ids`)."""
    stream = DecodeStream(skip_special_tokens=True)
    counts = np.zeros(len(ids), dtype=np.int32)
    for position, token_id in enumerate(ids.tolist()):
        text = stream.step(tokenizer, token_id)
        if text:
            counts[position] = len(text.encode("utf-8"))
    return counts


class TokenBytes:
    """Byte counts of cached tokens for one tokenizer, decoded once per document and kept per cache.

    An evaluation that scores the same held-out caches every N steps decodes
    each document once; only the documents a request reaches are decoded.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self._counts: dict[str, np.ndarray] = {}

    def prefix(self, cache: TokenCache, stop: int) -> np.ndarray:
        """Byte counts of the cache's tokens `[0, stop)` (whole documents are decoded, the rest is kept)."""
        key = str(cache.directory)
        done = self._counts.get(key, np.zeros(0, dtype=np.int32))
        if len(done) < stop:
            first = int(np.searchsorted(cache.offsets, len(done), side="right")) - 1
            last = int(np.searchsorted(cache.offsets, stop, side="left"))
            parts = [done] + [
                document_token_bytes(self.tokenizer, cache.document(doc))
                for doc in range(first, min(last, cache.num_docs))
            ]
            done = self._counts[key] = np.concatenate(parts)
        return done[:stop]
