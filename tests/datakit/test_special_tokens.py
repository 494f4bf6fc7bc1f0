"""BOS/EOS come from the tokenizer a user brings: its config, its post-processor, or its added tokens."""

import json

import numpy as np
import pyarrow as pa
import pytest
from tokenizers import Tokenizer

from tests.datakit.llama3_tokenizer import TEXTS, build_llama3_tokenizer
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.special_tokens import load_with_special_tokens, resolve_special_tokens
from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.token_cache import open_token_cache
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.errors import TootsieError


@pytest.fixture(scope="module")
def llama3(tmp_path_factory):
    """A Llama 3-style tokenizer folder (tokenizer.json + tokenizer_config.json)."""
    return build_llama3_tokenizer(tmp_path_factory.mktemp("llama3"))


def test_llama3_config_names_bos_and_eos(llama3) -> None:
    tokenizer, special = load_with_special_tokens(llama3.parent)
    base = tokenizer.token_to_id("<|begin_of_text|>")
    assert (special.bos, special.eos) == ("<|begin_of_text|>", "<|end_of_text|>")
    assert (special.bos_id, special.eos_id) == (base, base + 1)
    assert special.source == {"bos": "tokenizer_config.json", "eos": "tokenizer_config.json"}
    assert special.added["<|eot_id|>"] == base + 9 and len(special.added) == 10


def test_without_a_config_bos_comes_from_the_template_and_eos_from_the_added_tokens(tmp_path) -> None:
    file = build_llama3_tokenizer(tmp_path, config=False)
    _, special = load_with_special_tokens(file)
    assert (special.bos, special.eos) == ("<|begin_of_text|>", "<|end_of_text|>")
    assert special.source == {"bos": "post_processor", "eos": "added_tokens"}


def test_config_object_form_and_explicit_null(tmp_path) -> None:
    file = build_llama3_tokenizer(tmp_path)
    config = {"bos_token": None, "eos_token": {"content": "<|eot_id|>", "__type": "AddedToken"}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer, special = load_with_special_tokens(file)
    assert special.bos is None and special.eos_id == tokenizer.token_to_id("<|eot_id|>")
    with pytest.raises(TootsieError, match="no BOS token.*--no-bos"):
        special.require("bos")


def test_a_config_token_missing_from_the_vocabulary_names_the_file(tmp_path) -> None:
    file = build_llama3_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    with pytest.raises(TootsieError, match="tokenizer_config.json names '</s>'"):
        load_with_special_tokens(file)


def test_tootsie_names_are_the_last_resort(tmp_path) -> None:
    tokenizer = Tokenizer.from_file(str(build_llama3_tokenizer(tmp_path, config=False)))
    tokenizer.post_processor = None
    tokenizer.add_special_tokens(["<|bos|>", "<|eos|>"])
    special = resolve_special_tokens(tokenizer, None)
    assert (special.bos, special.eos) == ("<|bos|>", "<|eos|>")
    assert special.source == {"bos": "added_tokens", "eos": "added_tokens"}


def test_llama3_cache_records_its_specials_and_counts_the_bytes_of_its_text(llama3, tmp_path) -> None:
    docs = tmp_path / "docs"
    write_table_atomic(pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS}), docs / "part-0.parquet")
    config = TokenizeConfig(input=str(docs), tokenizer=str(llama3.parent), engine=EngineConfig(workers=1))
    ledger = tokenize_documents(config, str(tmp_path / "cache"))
    tokenizer, special = load_with_special_tokens(llama3)
    assert (ledger["bos_id"], ledger["eos_id"]) == (special.bos_id, special.eos_id)
    recorded = json.loads((tmp_path / "cache" / "ledger.json").read_text())["special_tokens"]
    assert recorded["bos_token"] == "<|begin_of_text|>" and recorded["added"]["<|eot_id|>"] == special.bos_id + 9
    cache = open_token_cache(tmp_path / "cache")
    first = cache.document(0)
    assert first[0] == special.bos_id and first[-1] == special.eos_id
    assert tokenizer.decode(first.tolist()) == TEXTS[0]
    counts = TokenBytes(tokenizer).prefix(cache, cache.num_tokens)
    per_doc = np.add.reduceat(counts, cache.offsets[:-1])
    assert per_doc.tolist() == [len(text.encode("utf-8")) for text in TEXTS]
    assert (counts[cache.offsets[:-1]] == 0).all()  # BOS stands for no text
