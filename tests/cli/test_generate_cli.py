"""`tootsie generate` and `tootsie chat` on a saved checkpoint."""

import io
import json

import equinox as eqx
import jax
import pyarrow as pa
import pytest

from tootsie.cli.main import main
from tootsie.configfile import to_plain
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import save_checkpoint

CONFIG = LlamaConfig(
    vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1, attention="xla"
)


def _run(tmp_path) -> tuple[str, str]:
    texts = [f"def area{i}(width, height):\n    return width * height\n" for i in range(40)]
    write_table_atomic(pa.table({"id": [str(i) for i in range(40)], "text": texts}), tmp_path / "docs" / "p.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(tmp_path / "docs"),), vocab_size=300), str(tmp_path / "tok"))
    params = eqx.filter(LlamaModel(CONFIG, key=jax.random.PRNGKey(1)), eqx.is_array)
    save_checkpoint(
        tmp_path / "run" / "checkpoints", 5, {"model": params}, {"kind": "permanent", "model": to_plain(CONFIG)}
    )
    return str(tmp_path / "run"), str(tmp_path / "tok")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_generate_json_and_chat(tmp_path, capsys, monkeypatch) -> None:
    run, tokenizer = _run(tmp_path)
    common = [run, "--tokenizer", tokenizer, "--max-new-tokens", "6"]
    assert main(["generate", *common, "--prompt", "def area", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result) == {"text", "tokens", "stop_reason"}
    assert result["stop_reason"] in ("eos", "max_new_tokens") and 1 <= len(result["tokens"]) <= 6
    assert (len(result["tokens"]) == 6) == (result["stop_reason"] == "max_new_tokens")
    assert main(["generate", *common, "--chat", "hello", "--temperature", "1.0", "--seed", "3", "--json"]) == 0
    sampled = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["generate", *common, "--chat", "hello", "--temperature", "1.0", "--seed", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == sampled
    stdin = io.StringIO("hello\n\nhow are you\n/exit\nnever read\n")
    monkeypatch.setattr("sys.stdin", stdin)
    assert main(["chat", *common]) == 0
    assert stdin.read() == "never read\n" and "/exit" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n/exit\n"))
    assert main(["chat", *common, "--json", "--quiet"]) == 0
    printed = capsys.readouterr()
    transcript = json.loads(printed.out.strip().splitlines()[-1])
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant"] and "/exit" not in printed.err
    assert main(["generate", *common, "--prompt", "x", "--top-p", "0"]) == 2
    assert "top_p" in capsys.readouterr().err
