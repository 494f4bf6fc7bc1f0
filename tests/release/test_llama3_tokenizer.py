"""A Llama 3-style tokenizer end to end: token cache, 2 training steps, BPB, `tootsie export hf`, AutoTokenizer.

Needs the `hf` extra (transformers); skipped with a reason otherwise.
"""

import json
import math

import numpy as np
import pyarrow as pa
import pytest
from tokenizers import Tokenizer

from tests.datakit.llama3_tokenizer import TEXTS, build_llama3_tokenizer
from tootsie.cli.main import main
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.token_bytes import document_token_bytes
from tootsie.datakit.token_cache import open_token_cache
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig

transformers = pytest.importorskip(
    "transformers", reason="the hf extra (torch==2.13.0, transformers) is not installed: pip install -e '.[hf]'"
)


def _cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_llama3_tokenizer_trains_scores_and_exports(tmp_path, capsys) -> None:
    tokenizer_file = build_llama3_tokenizer(tmp_path / "llama3")
    base = 400  # the trained BPE size: Llama 3's 128000, where its specials start
    caches = {}
    for name, texts in (("train", TEXTS[:100]), ("heldout", TEXTS[100:])):
        docs = tmp_path / f"{name}_docs"
        write_table_atomic(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), docs / "p.parquet")
        config = TokenizeConfig(input=str(docs), tokenizer=str(tokenizer_file), engine=EngineConfig(workers=1))
        caches[name] = tokenize_documents(config, str(tmp_path / name))
    assert (caches["train"]["bos_id"], caches["train"]["eos_id"]) == (base, base + 1)

    run_training(
        TrainConfig(
            model=LlamaConfig(
                vocab_size=416, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1
            ),
            data=MixtureConfig(
                caches={"train": str(tmp_path / "train")},
                stages=(MixtureStage(0, {"train": 1.0}),),
                seq_len=32,
                batch_schedule=BatchSchedule.constant(4),
            ),
            num_steps=2,
            schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=1, total_steps=2),
            checkpoints=CheckpointConfig(every_steps=100, every_minutes=None),
        ),
        str(tmp_path / "run"),
    )

    bpb = _cli_json(
        capsys, "eval", "bpb", "--checkpoint", str(tmp_path / "run"), "--data", f"heldout={tmp_path / 'heldout'}",
        "--tokenizer", str(tokenizer_file), "--seq-len", "32",
    )  # fmt: skip
    assert bpb["step"] == 2 and math.isfinite(bpb["bpb"]["heldout"]) and bpb["bpb"]["heldout"] > 0
    # Every predicted token's decoded bytes: all the text but the first token of each whole 32-token window and
    # the tail past the last one. Each token releases the bytes of the characters it completes
    # (document_token_bytes), which add up to the documents' UTF-8 size.
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    cache = open_token_cache(str(tmp_path / "heldout"))
    released = np.concatenate([document_token_bytes(tokenizer, cache.document(d)) for d in range(cache.num_docs)])
    assert released.sum() == sum(len(text.encode("utf-8")) for text in TEXTS[100:])
    windows = released[: cache.num_tokens // 32 * 32].reshape(-1, 32)
    assert bpb["bytes"]["heldout"] == windows[:, 1:].sum()

    export = _cli_json(
        capsys, "export", "hf", str(tmp_path / "run"), "--out", str(tmp_path / "hf"), "--tokenizer", str(tokenizer_file)
    )
    assert (export["bos_token_id"], export["eos_token_id"]) == (base, base + 1)
    hf_config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (hf_config["bos_token_id"], hf_config["eos_token_id"]) == (base, base + 1)
    tokenizer_config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert (tokenizer_config["bos_token"], tokenizer_config["eos_token"]) == ("<|begin_of_text|>", "<|end_of_text|>")

    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"), local_files_only=True)
    assert (hf_tokenizer.bos_token_id, hf_tokenizer.eos_token_id) == (base, base + 1)
    assert hf_tokenizer.convert_tokens_to_ids("<|eot_id|>") == base + 9
    text = TEXTS[100]
    ids = hf_tokenizer(text).input_ids
    assert ids == [base, *tokenizer.encode(text, add_special_tokens=False).ids]  # what the cache holds, BOS first
    assert hf_tokenizer.decode(ids, skip_special_tokens=True) == text
