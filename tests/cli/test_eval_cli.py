"""`tootsie eval bpb` scores a checkpoint's raw and EMA weights on named caches."""

import json

import pyarrow as pa
import pytest

from tootsie.cli.main import main, parse_args
from tootsie.cli.options import config_from_args
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.eval.checkpoint_eval import CheckpointBPBConfig, SuiteEvalConfig
from tootsie.eval.lm_eval_step import LMEvalConfig
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import TrainConfig
from tootsie.train.schedule import WSDConfig


@pytest.mark.slow
def test_eval_bpb_of_a_trained_checkpoint(tmp_path, capsys) -> None:
    texts = [f"def f{i}(x):\n    return x + {i}\n" * 4 for i in range(80)]
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(80)], "text": texts}), tmp_path / "docs" / "part-00000.parquet"
    )
    train_tokenizer(TokenizerTrainConfig(inputs=(str(tmp_path / "docs"),), vocab_size=300), str(tmp_path / "tok"))
    tokenize_documents(
        TokenizeConfig(
            input=str(tmp_path / "docs"),
            tokenizer=str(tmp_path / "tok"),
            engine=EngineConfig(workers=1, progress=False),
        ),
        str(tmp_path / "cache"),
    )
    model = LlamaConfig(vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1)
    data = MixtureConfig(
        caches={"code": str(tmp_path / "cache")},
        stages=(MixtureStage(0, {"code": 1.0}),),
        seq_len=32,
        batch_schedule=BatchSchedule.constant(4),
    )
    run_training(
        TrainConfig(
            model=model,
            data=data,
            num_steps=6,
            schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=2, total_steps=6),
        ),
        str(tmp_path / "run"),
    )
    args = [
        "eval",
        "bpb",
        "--checkpoint",
        str(tmp_path / "run"),
        "--data",
        f"code={tmp_path / 'cache'}",
        "--tokenizer",
        str(tmp_path / "tok" / "tokenizer.json"),
        "--json",
    ]
    assert main(args) == 0
    raw = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([*args, "--ema"]) == 0
    ema = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert raw["step"] == 6 and raw["weights"] == "model" and ema["weights"] == "ema"
    assert (
        0 < raw["bpb"]["code"] < 10
        and raw["bpb"]["code"] != ema["bpb"]["code"]
        and raw["bpb"]["macro_avg"] == raw["bpb"]["code"]
    )


def test_eval_flags_build_each_verbs_config() -> None:
    args = parse_args(["eval", "bpb", "--checkpoint", "run", "--data", "code=C1", "P/prose", "--tokenizer", "t.json"])
    config = config_from_args(args, CheckpointBPBConfig)
    assert config.domains == {"code": "C1", "prose": "P/prose"}
    assert (config.seq_len, config.max_sequences, config.weights) == (128, None, "model")
    argv = ["eval", "lm-eval", "--checkpoint", "run", "--tokenizer", "t.json", "--tasks", "a,b", "c", "--ema"]
    args = parse_args([*argv, "--include-path", "x", "--include-path", "y", "--batch-size", "2"])
    config = config_from_args(args, LMEvalConfig, tasks=("a", "b", "c"))
    assert (config.include_paths, config.weights, config.batch_size, config.max_length) == (("x", "y"), "ema", 2, 128)
    assert args.tasks == ["a,b", "c"]
    argv = ["eval", "suite", "--checkpoint", "run", "--suite", "core", "--data-dir", "d", "--ema"]
    config = config_from_args(parse_args([*argv, "--prompt-format", "both"]), SuiteEvalConfig)
    assert (config.weights, config.prompt_format, config.limit, config.show_prompts) == ("ema", "both", None, 0)


def test_bad_eval_flags_are_one_line_errors(capsys) -> None:
    argv = ["eval", "bpb", "--checkpoint", "run", "--tokenizer", "t.json", "--data", "a/cache", "b/cache"]
    assert main(argv) == 2
    assert "two caches in data are both named 'cache'" in capsys.readouterr().err
    assert main(["eval", "suite", "--checkpoint", "run", "--suite", "nope", "--data-dir", "d"]) == 2
    assert "unknown suite or benchmarks" in capsys.readouterr().err
