"""Tokenize a document directory into a token cache.

Documents are encoded in batches with `encode_batch` (which runs on all cores
inside `tokenizers`), wrapped with BOS/EOS as the config says, and appended to
a `TokenCacheWriter`. The ledger records the tokenizer's sha256, so a cache can
never be read with a different tokenizer by mistake.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tootsie.datakit.parquet_io import iter_texts
from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.datakit.tokenizer import BOS_TOKEN, EOS_TOKEN, file_sha256, load_tokenizer, special_token_id


@dataclass(frozen=True)
class TokenizeConfig:
    """Which documents to tokenize, with which tokenizer, and how to mark document edges."""

    input: str
    """A document directory (Parquet files with a `text` column)."""
    tokenizer: str
    """A local tokenizer.json, or a directory holding one."""
    add_bos: bool = True
    """Prepend the BOS token to every document."""
    add_eos: bool = True
    """Append the EOS token to every document."""
    batch_docs: int = 256
    """Documents per `encode_batch` call."""


def tokenize_documents(config: TokenizeConfig, output_path: str) -> dict[str, object]:
    """Encode every document of `config.input` into a cache at `output_path`; return its ledger."""
    tokenizer = load_tokenizer(config.tokenizer)
    tokenizer_file = Path(config.tokenizer)
    tokenizer_file = tokenizer_file / "tokenizer.json" if tokenizer_file.is_dir() else tokenizer_file
    bos = [special_token_id(tokenizer, BOS_TOKEN)] if config.add_bos else []
    eos = [special_token_id(tokenizer, EOS_TOKEN)] if config.add_eos else []
    writer = TokenCacheWriter(
        output_path,
        vocab_size=tokenizer.get_vocab_size(),
        ledger_extra={
            "tokenizer_sha256": file_sha256(tokenizer_file),
            "bos_id": bos[0] if bos else None,
            "eos_id": eos[0] if eos else None,
            "source": str(config.input),
        },
    )
    for texts in iter_texts(config.input, batch_rows=config.batch_docs):
        for encoding in tokenizer.encode_batch(texts, add_special_tokens=False):
            writer.append(np.asarray(bos + encoding.ids + eos))
    return writer.close()
