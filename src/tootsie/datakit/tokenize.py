"""Tokenize a document directory into a token cache, shard by shard, then merge.

Map (one shard per document Parquet file, in parallel, resumable): documents
are encoded in batches with `encode_batch`, wrapped with BOS/EOS as the config
says (the tokenizer's own, found by `datakit.special_tokens`), and written to a
per-shard cache under `.shards/`. Reduce: the shard caches are concatenated in
shard order into the final flat `tokens.bin` and `offsets.bin`, and the ledger
(tokenizer sha256, `bos_id`/`eos_id`, the resolved `special_tokens`, counts,
the shards merged, and the `source`: relative to the prefix under the
executor, as given by hand, `executor.portable`) is written last. A SIGKILL
at any point loses at most the shards in flight, and a rerun produces
byte-identical files.

Chat data (`ChatTokenizeConfig`, `tokenize_chat`) takes another path: JSONL
conversations are checked, rendered with a chat template and encoded one by
one in a single process into a cache that also holds `loss_mask.bin`; the
ledger records the template and the drops by reason.
"""

import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tootsie.configfile import unhashed
from tootsie.datakit.chat_data import ChatEncoder, chat_cache_ledger, iter_conversations
from tootsie.datakit.chat_templates import load_chat_template
from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards
from tootsie.datakit.parquet_io import iter_texts, parquet_files
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.datakit.token_cache import TokenCache, TokenCacheWriter, open_token_cache
from tootsie.datakit.tokenizer import TOKENIZER_FILE, file_sha256
from tootsie.executor.portable import portable

SHARDS_DIR = ".shards"
MERGE_BLOCK_TOKENS = 1 << 24


@dataclass(frozen=True)
class TokenizeConfig:
    """Which documents to tokenize, with which tokenizer, and how to mark document edges."""

    input: str
    """A document directory (Parquet files with a `text` column)."""
    tokenizer: str
    """A local tokenizer.json, or a directory holding one (and maybe its tokenizer_config.json)."""
    add_bos: bool = True
    """Prepend the tokenizer's BOS token to every document."""
    add_eos: bool = True
    """Append the tokenizer's EOS token to every document."""
    batch_docs: int = unhashed(256)
    """Documents per `encode_batch` call."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Parallelism, retries and failure budget (not hashed)."""


def resolve_tokenizer_file(path: str) -> Path:
    """A tokenizer.json path, or the tokenizer.json inside a directory."""
    candidate = Path(path)
    return candidate / TOKENIZER_FILE if candidate.is_dir() else candidate


def encode_texts(
    tokenizer: object, texts: list[str], bos: list[int], eos: list[int], dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """One flat token array for a batch of texts (with BOS/EOS) and each document's length."""
    encodings = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    lengths = np.fromiter((len(ids) + len(bos) + len(eos) for ids in encodings), dtype=np.int64, count=len(encodings))
    flat = np.empty(int(lengths.sum()), dtype=dtype)
    position = 0
    for ids in encodings:
        flat[position : position + len(bos)] = bos
        position += len(bos)
        flat[position : position + len(ids)] = ids
        position += len(ids)
        flat[position : position + len(eos)] = eos
        position += len(eos)
    return flat, lengths


def tokenize_shard(task: ShardTask, config: TokenizeConfig) -> dict[str, int]:
    """Map: encode one document shard into a shard cache at `task.output_dir`."""
    if config.engine.workers > 1:  # one thread per worker process: Rayon threads on top would oversubscribe the cores
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    tokenizer, special = load_with_special_tokens(config.tokenizer)
    bos = [special.require("bos")] if config.add_bos else []
    eos = [special.require("eos")] if config.add_eos else []
    writer = TokenCacheWriter(task.output_dir, vocab_size=tokenizer.get_vocab_size(), ledger_extra={})
    for texts in iter_texts(task.inputs[0], batch_rows=config.batch_docs):
        if texts:
            writer.append_flat(*encode_texts(tokenizer, texts, bos, eos, writer.dtype))
    ledger = writer.close()
    return {"docs": ledger["num_docs"], "tokens": ledger["num_tokens"]}


def append_cache(writer: TokenCacheWriter, shard: TokenCache) -> None:
    """Copy a whole cache into `writer` in blocks of about MERGE_BLOCK_TOKENS tokens."""
    lengths = np.diff(shard.offsets)
    doc = 0
    while doc < shard.num_docs:
        stop = int(np.searchsorted(shard.offsets, shard.offsets[doc] + MERGE_BLOCK_TOKENS, side="right")) - 1
        stop = min(max(stop, doc + 1), shard.num_docs)
        writer.append_flat(shard.tokens[shard.offsets[doc] : shard.offsets[stop]], lengths[doc:stop])
        doc = stop


def tokenize_documents(config: TokenizeConfig, output_path: str) -> dict[str, object]:
    """Encode every document of `config.input` into one cache at `output_path`; return its ledger."""
    out = Path(output_path)
    tokenizer_file = resolve_tokenizer_file(config.tokenizer)
    tokenizer, special = load_with_special_tokens(tokenizer_file)
    bos = special.require("bos") if config.add_bos else None
    eos = special.require("eos") if config.add_eos else None
    tasks = [
        ShardTask(name=path.stem, inputs=(str(path),), output_dir=str(out / SHARDS_DIR / path.stem))
        for path in parquet_files(config.input)
    ]
    results = map_shards(tokenize_shard, config, tasks, out / SHARDS_DIR / "done", config.engine, label="tokenize")
    writer = TokenCacheWriter(
        out,
        vocab_size=tokenizer.get_vocab_size(),
        ledger_extra={
            "tokenizer_sha256": file_sha256(tokenizer_file),
            "bos_id": bos,
            "eos_id": eos,
            "special_tokens": special.ledger(),
            "source": portable(config.input),
            "shards": list(results.stats),
            "failed_shards": results.failed,
        },
    )
    for task in tasks:
        if task.name in results.stats:
            append_cache(writer, open_token_cache(task.output_dir))
    ledger = writer.close()
    shutil.rmtree(out / SHARDS_DIR)
    return ledger


@dataclass(frozen=True)
class ChatTokenizeConfig:
    """Which conversations to tokenize, with which tokenizer and chat template."""

    input: str
    """A JSONL file of `{"messages": [...]}` lines, or a directory of *.jsonl files."""
    tokenizer: str
    """A local tokenizer.json, or a directory holding one (and maybe its tokenizer_config.json)."""
    chat_template: str = "llama3"
    """A built-in template name (llama3, chatml) or the path of a Jinja template file."""


def tokenize_chat(config: ChatTokenizeConfig, output_path: str) -> dict[str, object]:
    """Encode every well-formed conversation into a cache with a loss mask; return its ledger."""
    tokenizer_file = resolve_tokenizer_file(config.tokenizer)
    tokenizer, special = load_with_special_tokens(tokenizer_file)
    template = load_chat_template(config.chat_template)
    encoder = ChatEncoder(
        tokenizer,
        template,
        bos_token=special.bos or "",
        eos_token=special.eos or "",
    )
    rejected: Counter[str] = Counter()
    ledger_extra = {
        **chat_cache_ledger(tokenizer_file, special, str(config.input), config.chat_template, template),
        "rejected": rejected,
    }
    writer = TokenCacheWriter(
        output_path, vocab_size=tokenizer.get_vocab_size(), ledger_extra=ledger_extra, loss_mask=True
    )
    loss_tokens = 0
    for messages in iter_conversations(config.input, rejected):
        ids, mask = encoder.encode(messages)
        writer.append(ids, mask)
        loss_tokens += int(mask.sum())
    ledger_extra["loss_tokens"] = loss_tokens
    ledger_extra["rejected"] = dict(sorted(rejected.items()))
    return writer.close()
