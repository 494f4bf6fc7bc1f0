"""Tokenizer training, token caches, and byte counts that bits-per-byte relies on."""

import json

import numpy as np
import pyarrow as pa
import pytest

from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.token_bytes import TokenBytes, document_token_bytes
from tootsie.datakit.token_cache import open_token_cache
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import (
    BOS_TOKEN,
    EOS_TOKEN,
    TokenizerTrainConfig,
    load_tokenizer,
    train_tokenizer,
)
from tootsie.errors import TootsieError
from tootsie.executor.hashing import canonical

TEXTS = [f"def function_{i}(x):\n    return x * {i}  # café ☕ {i}\n" for i in range(200)]


@pytest.fixture
def trained(tmp_path):
    docs = tmp_path / "docs"
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS}), docs / "part-00000.parquet"
    )
    train_tokenizer(TokenizerTrainConfig(inputs=(str(docs),), vocab_size=300), str(tmp_path / "tok"))
    return docs, tmp_path / "tok" / "tokenizer.json"


def test_cache_round_trips_documents(trained, tmp_path) -> None:
    docs, tokenizer_file = trained
    ledger = tokenize_documents(TokenizeConfig(input=str(docs), tokenizer=str(tokenizer_file)), str(tmp_path / "cache"))
    cache = open_token_cache(tmp_path / "cache")
    tokenizer = load_tokenizer(tokenizer_file)
    assert cache.num_docs == len(TEXTS) == ledger["num_docs"]
    assert cache.tokens.dtype == np.uint16
    for i in (0, 57, 199):
        ids = cache.document(i)
        assert ids[0] == tokenizer.token_to_id(BOS_TOKEN) and ids[-1] == tokenizer.token_to_id(EOS_TOKEN)
        assert tokenizer.decode(ids[1:-1].tolist()) == TEXTS[i]


def test_byte_counts_add_up_to_the_utf8_size(trained, tmp_path) -> None:
    docs, tokenizer_file = trained
    tokenizer = load_tokenizer(tokenizer_file)
    tokenize_documents(TokenizeConfig(input=str(docs), tokenizer=str(tokenizer_file)), str(tmp_path / "cache"))
    cache = open_token_cache(tmp_path / "cache")
    for i in (0, 1, 150):
        counts = document_token_bytes(tokenizer, cache.document(i))
        assert counts[0] == counts[-1] == 0  # BOS and EOS stand for no text
        assert counts.sum() == len(TEXTS[i].encode("utf-8"))
    # a prefix that stops inside a document decodes whole documents and returns exactly the tokens asked for
    token_bytes = TokenBytes(tokenizer)
    stop = int(cache.offsets[3]) + 5
    head = token_bytes.prefix(cache, stop)
    assert len(head) == stop and head[: cache.offsets[3]].sum() == sum(len(t.encode("utf-8")) for t in TEXTS[:3])
    whole = token_bytes.prefix(cache, cache.num_tokens)
    assert whole.sum() == sum(len(t.encode("utf-8")) for t in TEXTS) and np.array_equal(whole[:stop], head)


def test_a_multibyte_character_counts_on_the_token_that_completes_it(trained) -> None:
    _, tokenizer_file = trained
    tokenizer = load_tokenizer(tokenizer_file)
    ids = [tokenizer.token_to_id(c) for c in "Ã©"]  # the two byte-level tokens of "é" (0xC3 0xA9)
    assert document_token_bytes(tokenizer, np.array(ids)).tolist() == [0, 2]


def test_damaged_cache_names_the_file(trained, tmp_path) -> None:
    docs, tokenizer_file = trained
    tokenize_documents(TokenizeConfig(input=str(docs), tokenizer=str(tokenizer_file)), str(tmp_path / "cache"))
    with open(tmp_path / "cache" / "tokens.bin", "ab") as handle:
        handle.write(b"\0\0")
    with pytest.raises(TootsieError, match="tokens.bin has"):
        open_token_cache(tmp_path / "cache")


def test_unfinished_cache_is_not_read(tmp_path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tokens.bin").write_bytes(b"\0" * 8)
    with pytest.raises(TootsieError, match="not a finished token cache"):
        open_token_cache(tmp_path / "cache")


def test_missing_tokenizer_says_how_to_get_one(tmp_path) -> None:
    with pytest.raises(TootsieError, match="train-tokenizer"):
        load_tokenizer(tmp_path / "none.json")


def test_ledger_records_the_tokenizer(trained, tmp_path) -> None:
    docs, tokenizer_file = trained
    tokenize_documents(TokenizeConfig(input=str(docs), tokenizer=str(tokenizer_file)), str(tmp_path / "cache"))
    ledger = json.loads((tmp_path / "cache" / "ledger.json").read_text())
    info = json.loads((tokenizer_file.parent / "tokenizer_info.json").read_text())
    assert ledger["tokenizer_sha256"] == info["sha256"]


def test_split_digits_gives_one_token_per_digit_and_keeps_old_hashes(tmp_path) -> None:
    docs = tmp_path / "docs"
    texts = [f"{i} + {i * 7} = {i * 8}\n" for i in range(300)]
    write_table_atomic(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), docs / "p.parquet")
    for split in (None, True):
        config = TokenizerTrainConfig(inputs=(str(docs),), vocab_size=300, split_digits=split)
        train_tokenizer(config, str(tmp_path / f"tok-{split}"))
    whole, digits = (load_tokenizer(tmp_path / f"tok-{split}") for split in (None, True))
    assert len(whole.encode("1234 + 567").ids) < len(digits.encode("1234 + 567").ids)
    assert [digits.decode([i]) for i in digits.encode("1234").ids] == ["1", "2", "3", "4"]
    assert digits.decode(digits.encode("x 1234 + 567 = 1801").ids) == "x 1234 + 567 = 1801"
    unset = canonical(TokenizerTrainConfig(inputs=("d",)), hash_of=lambda path: path)
    assert "split_digits" not in unset  # an existing tokenizer step keeps its hash
