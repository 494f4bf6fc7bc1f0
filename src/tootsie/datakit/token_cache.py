"""The on-disk token cache: a flat token array, document offsets, and a ledger.

Layout of a cache directory:

    tokens.bin    all documents' token ids back to back (dtype from the ledger)
    offsets.bin   int64, num_docs + 1 entries; document i is tokens[offsets[i]:offsets[i+1]]
    ledger.json   format, dtype, counts, tokenizer hash, BOS/EOS policy, byte sizes of the files

Both arrays are raw little-endian binaries so they can be memory-mapped locally
or read by byte range from object storage. The ledger is written last: a
directory without one is unfinished, and a ledger whose sizes disagree with the
files is an error that names the file.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tootsie.errors import TootsieError

CACHE_FORMAT = "tootsie-token-cache/1"
TOKENS_FILE = "tokens.bin"
OFFSETS_FILE = "offsets.bin"
LEDGER_FILE = "ledger.json"


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


class TokenCacheWriter:
    """Append tokenized documents to a new cache; `close` writes the ledger that marks it done."""

    def __init__(self, directory: str | Path, vocab_size: int, ledger_extra: dict[str, object]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.dtype = token_dtype(vocab_size)
        self.vocab_size = vocab_size
        self.ledger_extra = ledger_extra
        self._tokens_tmp = self.directory / f".{TOKENS_FILE}.tmp-{os.getpid()}"
        self._tokens = open(self._tokens_tmp, "wb")
        self._offsets = [0]

    def append(self, document_tokens: np.ndarray) -> None:
        """Add one document's token ids."""
        self._tokens.write(np.asarray(document_tokens, dtype=self.dtype).tobytes())
        self._offsets.append(self._offsets[-1] + len(document_tokens))

    def close(self) -> dict[str, object]:
        """Move the files into place and write the ledger last; return the ledger."""
        self._tokens.close()
        offsets = np.asarray(self._offsets, dtype="<i8")
        offsets_tmp = self.directory / f".{OFFSETS_FILE}.tmp-{os.getpid()}"
        offsets.tofile(offsets_tmp)
        os.replace(self._tokens_tmp, self.directory / TOKENS_FILE)
        os.replace(offsets_tmp, self.directory / OFFSETS_FILE)
        ledger = {
            "format": CACHE_FORMAT,
            "dtype": self.dtype.name,
            "vocab_size": self.vocab_size,
            "num_docs": len(offsets) - 1,
            "num_tokens": int(offsets[-1]),
            "files": {TOKENS_FILE: int(offsets[-1]) * self.dtype.itemsize, OFFSETS_FILE: offsets.nbytes},
            **self.ledger_extra,
        }
        ledger_tmp = self.directory / f".{LEDGER_FILE}.tmp-{os.getpid()}"
        ledger_tmp.write_text(json.dumps(ledger, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(ledger_tmp, self.directory / LEDGER_FILE)
        return ledger


@dataclass(frozen=True)
class TokenCache:
    """A finished, validated token cache opened with memory maps."""

    directory: Path
    ledger: dict[str, object]
    tokens: np.ndarray
    offsets: np.ndarray

    @property
    def num_tokens(self) -> int:
        """Total tokens over all documents."""
        return int(self.offsets[-1])

    @property
    def num_docs(self) -> int:
        """Number of documents."""
        return len(self.offsets) - 1

    def document(self, index: int) -> np.ndarray:
        """Token ids of document `index`."""
        return np.asarray(self.tokens[self.offsets[index] : self.offsets[index + 1]])


def open_token_cache(directory: str | Path) -> TokenCache:
    """Open a cache after checking its ledger against the files on disk."""
    root = Path(directory)
    ledger_path = root / LEDGER_FILE
    if not ledger_path.is_file():
        raise TootsieError(f"{root} is not a finished token cache: {LEDGER_FILE} is missing (rerun the tokenize step)")
    try:
        ledger = json.loads(ledger_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TootsieError(f"{ledger_path} is not valid JSON ({error}); delete the cache and retokenize") from error
    if ledger.get("format") != CACHE_FORMAT:
        raise TootsieError(f"{ledger_path} has format {ledger.get('format')!r}, expected {CACHE_FORMAT!r}")
    for name, expected in ledger["files"].items():
        actual = (root / name).stat().st_size if (root / name).is_file() else None
        if actual != expected:
            raise TootsieError(f"{root / name} has {actual} bytes but {ledger_path} says {expected}; the cache is damaged, retokenize it")
    dtype = np.dtype(ledger["dtype"]).newbyteorder("<")
    tokens = np.memmap(root / TOKENS_FILE, dtype=dtype, mode="r") if ledger["num_tokens"] else np.zeros(0, dtype)
    offsets = np.fromfile(root / OFFSETS_FILE, dtype="<i8")
    return TokenCache(directory=root, ledger=ledger, tokens=tokens, offsets=offsets)
