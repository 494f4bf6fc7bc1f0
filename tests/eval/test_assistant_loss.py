"""A tiny SFT run: warm start from a base trained here, loss on assistant tokens only, held-out loss falls."""

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tootsie.cli.main import main
from tootsie.configfile import dump_config
from tootsie.corpora.stdlib_chat import HELDOUT_FILE, TRAIN_FILE, StdlibChatConfig, build_stdlib_chat
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.chat_templates import CHAT_TEMPLATES, render_chat
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import ChatTokenizeConfig, TokenizeConfig, tokenize_chat, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.demos.sft_demo import CHAT_SETS, SftSettings, sft_config
from tootsie.errors import TootsieError
from tootsie.eval.assistant_loss import assistant_loss
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig
from tootsie.train.schedule import WSDConfig

SEQ_LEN = 256
MODEL = LlamaConfig(vocab_size=512, hidden_dim=48, intermediate_dim=128, num_layers=2, num_heads=2, num_kv_heads=1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sft_lowers_heldout_assistant_loss_below_the_base(tmp_path: Path, capsys) -> None:
    texts, rendered, caches = [], [], {}
    for name, modules in CHAT_SETS.items():
        build_stdlib_chat(StdlibChatConfig(modules=modules), str(tmp_path / "chat" / name))
        for line in (tmp_path / "chat" / name / TRAIN_FILE).read_text(encoding="utf-8").splitlines():
            messages = json.loads(line)["messages"]
            texts.append(" ".join(m["content"] for m in messages))
            rendered.append(render_chat(CHAT_TEMPLATES["llama3"], messages, False))
    for folder, documents in (("docs", texts), ("rendered", rendered)):
        table = pa.table({"id": [str(i) for i in range(len(documents))], "text": documents})
        write_table_atomic(table, tmp_path / folder / "p.parquet")
    # the tokenizer sees rendered chats, so the template's markers become a few tokens; the base sees plain text
    train_tokenizer(TokenizerTrainConfig(inputs=(str(tmp_path / "rendered"),), vocab_size=512), str(tmp_path / "tok"))
    tokenizer = str(tmp_path / "tok" / "tokenizer.json")
    tokenize_documents(TokenizeConfig(input=str(tmp_path / "docs"), tokenizer=tokenizer), str(tmp_path / "text"))
    for name in CHAT_SETS:
        for split, file in (("train", TRAIN_FILE), ("heldout", HELDOUT_FILE)):
            source = str(tmp_path / "chat" / name / file)
            tokenize_chat(ChatTokenizeConfig(input=source, tokenizer=tokenizer), str(tmp_path / f"{name}-{split}"))
            caches[name, split] = str(tmp_path / f"{name}-{split}")
    base = TrainConfig(
        model=MODEL,
        data=MixtureConfig(
            caches={"text": str(tmp_path / "text")},
            stages=(MixtureStage(0, {"text": 1.0}),),
            seq_len=128,
            batch_schedule=BatchSchedule.constant(8),
        ),
        num_steps=40,
        schedule=WSDConfig(peak_lr=3e-3, warmup_steps=4, decay_steps=10, total_steps=40),
        checkpoints=CheckpointConfig(every_steps=40, every_minutes=None),
    )
    run_training(base, str(tmp_path / "base"))
    heldout = {name: caches[name, "heldout"] for name in CHAT_SETS}
    sft = sft_config(
        MODEL,
        str(tmp_path / "base"),
        {name: caches[name, "train"] for name in CHAT_SETS},
        SftSettings(steps=40, peak_lr=3e-3, seq_len=SEQ_LEN, batch_size=4),
        InLoopEvalConfig(heldout=heldout, tokenizer=tokenizer, every_steps=40, max_sequences=4),
    )
    (tmp_path / "sft.yaml").write_text(dump_config(sft), encoding="utf-8")
    assert main(["train", "--config", str(tmp_path / "sft.yaml"), "--out", str(tmp_path / "sft")]) == 0
    capsys.readouterr()
    assert (
        main(["sft", "--evaluate", "--config", str(tmp_path / "sft.yaml"), "--out", str(tmp_path / "sft"), "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    print(result)
    assert result["assistant_tokens"] > 100
    assert result["sft"] < result["base"] - 0.1
    for name in CHAT_SETS:
        assert result["heldout"][name]["sft"] < result["heldout"][name]["base"]


def test_assistant_loss_needs_a_chat_cache(make_cache) -> None:
    import jax

    from tootsie.models.llama import LlamaModel

    model = LlamaModel(MODEL, key=jax.random.PRNGKey(0))
    with pytest.raises(TootsieError, match="no loss mask"):
        assistant_loss(model, make_cache("text", [[1, 2, 3]]), SEQ_LEN)
