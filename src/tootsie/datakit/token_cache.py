"""The on-disk token cache: a flat token array, document offsets, and a ledger.

Layout of a cache directory:

    tokens.bin    all documents' token ids back to back (dtype from the ledger)
    offsets.bin   int64, num_docs + 1 entries; document i is tokens[offsets[i]:offsets[i+1]]
    loss_mask.bin uint8, one per token, present for chat caches only: 1 where the token is trained on
                  (assistant replies and their end of turn), 0 elsewhere
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
from fsspec import AbstractFileSystem

from tootsie.errors import TootsieError
from tootsie.jsonfile import write_json_atomic

CACHE_FORMAT = "tootsie-token-cache/1"
TOKENS_FILE = "tokens.bin"
OFFSETS_FILE = "offsets.bin"
LOSS_MASK_FILE = "loss_mask.bin"
LEDGER_FILE = "ledger.json"


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


class TokenCacheWriter:
    """Stream tokenized documents into a new cache; `close` writes the ledger that marks it done.

    Tokens and offsets both go straight to temporary files, so memory stays
    flat however many documents are written.
    """

    def __init__(
        self, directory: str | Path, vocab_size: int, ledger_extra: dict[str, object], loss_mask: bool = False
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.dtype = token_dtype(vocab_size)
        self.vocab_size = vocab_size
        self.ledger_extra = ledger_extra
        self._tokens_tmp = self.directory / f".{TOKENS_FILE}.tmp-{os.getpid()}"
        self._offsets_tmp = self.directory / f".{OFFSETS_FILE}.tmp-{os.getpid()}"
        self._tokens = open(self._tokens_tmp, "wb")
        self._offsets = open(self._offsets_tmp, "wb")
        self._offsets.write(np.zeros(1, dtype="<i8").tobytes())
        self._mask_tmp = self.directory / f".{LOSS_MASK_FILE}.tmp-{os.getpid()}" if loss_mask else None
        self._mask = open(self._mask_tmp, "wb") if self._mask_tmp else None
        self.num_tokens = 0
        self.num_docs = 0

    def append_flat(self, tokens: np.ndarray, lengths: np.ndarray, loss_mask: np.ndarray | None = None) -> None:
        """Add several documents given as one flat token array and their lengths (and, for a chat cache, the mask)."""
        if (self._mask is None) != (loss_mask is None) or (loss_mask is not None and len(loss_mask) != len(tokens)):
            raise TootsieError(
                f"{self.directory}: a loss mask must come with every append to a chat cache and with none otherwise, "
                f"one entry per token (got {None if loss_mask is None else len(loss_mask)} for {len(tokens)} tokens)"
            )
        self._tokens.write(np.asarray(tokens, dtype=self.dtype).tobytes())
        if self._mask is not None:
            self._mask.write(np.asarray(loss_mask, dtype=np.uint8).tobytes())
        ends = self.num_tokens + np.cumsum(np.asarray(lengths, dtype=np.int64))
        self._offsets.write(ends.astype("<i8").tobytes())
        self.num_tokens = int(ends[-1]) if len(ends) else self.num_tokens
        self.num_docs += len(lengths)

    def append(self, document_tokens: np.ndarray, loss_mask: np.ndarray | None = None) -> None:
        """Add one document's token ids (and its loss mask for a chat cache)."""
        self.append_flat(np.asarray(document_tokens), np.array([len(document_tokens)]), loss_mask)

    def close(self) -> dict[str, object]:
        """Move the files into place and write the ledger last; return the ledger."""
        self._tokens.close()
        self._offsets.close()
        os.replace(self._tokens_tmp, self.directory / TOKENS_FILE)
        os.replace(self._offsets_tmp, self.directory / OFFSETS_FILE)
        files = {TOKENS_FILE: self.num_tokens * self.dtype.itemsize, OFFSETS_FILE: (self.num_docs + 1) * 8}
        if self._mask is not None and self._mask_tmp is not None:
            self._mask.close()
            os.replace(self._mask_tmp, self.directory / LOSS_MASK_FILE)
            files[LOSS_MASK_FILE] = self.num_tokens
        ledger = {
            "format": CACHE_FORMAT,
            "dtype": self.dtype.name,
            "vocab_size": self.vocab_size,
            "num_docs": self.num_docs,
            "num_tokens": self.num_tokens,
            "files": files,
            **self.ledger_extra,
        }
        write_json_atomic(self.directory / LEDGER_FILE, ledger)
        return ledger


@dataclass(frozen=True)
class TokenCache:
    """A finished, validated token cache opened with memory maps."""

    directory: Path | str
    """The cache directory, local or a URL."""
    ledger: dict[str, object]
    """`ledger.json`: counts, dtype, tokenizer and source."""
    tokens: "np.ndarray | RangeReadTokens"
    """Every document's tokens, concatenated (memory-mapped, or read by range from a URL)."""
    offsets: np.ndarray
    """Document d's tokens are `tokens[offsets[d]:offsets[d + 1]]`."""
    loss_mask: "np.ndarray | RangeReadTokens | None" = None
    """uint8 per token for chat caches (1 = trained on), None for plain text caches."""

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


class RangeReadTokens:
    """A read-only token array in object storage: each slice is one byte-range read through fsspec."""

    def __init__(self, fs: AbstractFileSystem, path: str, dtype: np.dtype, length: int) -> None:
        self.fs, self.path, self.dtype, self.length = fs, path, dtype, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"remote token arrays support contiguous slices only, got {key!r}")
        start, stop, _ = key.indices(self.length)
        if stop <= start:
            return np.zeros(0, self.dtype)
        data = self.fs.cat_file(self.path, start=start * self.dtype.itemsize, end=stop * self.dtype.itemsize)
        return np.frombuffer(data, dtype=self.dtype)


def open_token_cache(directory: str | Path) -> TokenCache:
    """Open a cache after checking its ledger against its files: memory-mapped locally, byte-range reads for URLs."""
    location = str(directory)
    if "://" in location and not location.startswith("file://"):
        return _open_remote(location)
    root = Path(location.removeprefix("file://"))
    ledger_path = root / LEDGER_FILE
    if not ledger_path.is_file():
        raise TootsieError(f"{root} is not a finished token cache: {LEDGER_FILE} is missing (rerun the tokenize step)")
    ledger = _parse_ledger(ledger_path.read_text(encoding="utf-8"), str(ledger_path))
    for name, expected in ledger["files"].items():
        actual = (root / name).stat().st_size if (root / name).is_file() else None
        _check_size(f"{root / name}", actual, expected, str(ledger_path))
    dtype = np.dtype(ledger["dtype"]).newbyteorder("<")
    tokens = np.memmap(root / TOKENS_FILE, dtype=dtype, mode="r") if ledger["num_tokens"] else np.zeros(0, dtype)
    offsets = np.fromfile(root / OFFSETS_FILE, dtype="<i8")
    loss_mask = None
    if LOSS_MASK_FILE in ledger["files"]:
        loss_mask = (
            np.memmap(root / LOSS_MASK_FILE, dtype=np.uint8, mode="r")
            if ledger["num_tokens"]
            else np.zeros(0, np.uint8)
        )
    return TokenCache(directory=root, ledger=ledger, tokens=tokens, offsets=offsets, loss_mask=loss_mask)


def _parse_ledger(text: str, where: str) -> dict[str, object]:
    try:
        ledger = json.loads(text)
    except json.JSONDecodeError as error:
        raise TootsieError(f"{where} is not valid JSON ({error}); delete the cache and retokenize") from error
    if ledger.get("format") != CACHE_FORMAT:
        raise TootsieError(f"{where} has format {ledger.get('format')!r}, expected {CACHE_FORMAT!r}")
    return ledger


def _check_size(file: str, actual: int | None, expected: object, ledger: str) -> None:
    if actual != expected:
        raise TootsieError(
            f"{file} has {actual} bytes but {ledger} says {expected}; the cache is damaged, retokenize it"
        )


def _open_remote(url: str) -> TokenCache:
    """A cache behind an fsspec URL (s3://, gs://, memory://...): ledger and offsets read whole, tokens by range."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)

    def join(name: str) -> str:
        return f"{root.rstrip('/')}/{name}"

    if not fs.exists(join(LEDGER_FILE)):
        raise TootsieError(f"{url} is not a finished token cache: {LEDGER_FILE} is missing (rerun the tokenize step)")
    ledger = _parse_ledger(fs.cat_file(join(LEDGER_FILE)).decode("utf-8"), f"{url}/{LEDGER_FILE}")
    for name, expected in ledger["files"].items():
        _check_size(
            f"{url}/{name}", fs.size(join(name)) if fs.exists(join(name)) else None, expected, f"{url}/{LEDGER_FILE}"
        )
    dtype = np.dtype(ledger["dtype"]).newbyteorder("<")
    offsets = np.frombuffer(fs.cat_file(join(OFFSETS_FILE)), dtype="<i8")
    tokens = RangeReadTokens(fs, join(TOKENS_FILE), dtype, int(ledger["num_tokens"]))
    loss_mask = None
    if LOSS_MASK_FILE in ledger["files"]:
        loss_mask = RangeReadTokens(fs, join(LOSS_MASK_FILE), np.dtype(np.uint8), int(ledger["num_tokens"]))
    return TokenCache(directory=url, ledger=ledger, tokens=tokens, offsets=offsets, loss_mask=loss_mask)
