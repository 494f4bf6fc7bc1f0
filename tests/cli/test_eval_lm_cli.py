"""`tootsie eval lm-eval` on a trained checkpoint agrees with the in-loop lm-eval metrics logged at that step."""

import json
import sys

import pyarrow as pa
import pytest

from tootsie.cli.main import main
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.eval.lm_eval_step import LM_EVAL_FILE, LMEvalConfig, evaluate_lm_tasks
from tootsie.eval.lm_eval_tasks import LocalTask, write_tasks
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import InLoopEvalConfig, TrainConfig
from tootsie.train.schedule import WSDConfig


def test_missing_lm_eval_is_a_one_line_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    monkeypatch.setitem(sys.modules, "tootsie.eval.lm_eval_adapter", None)
    assert (
        main(["eval", "lm-eval", "--checkpoint", str(tmp_path), "--tokenizer", "t.json", "--tasks", "tootsie_zen"]) == 2
    )
    assert 'pip install "tootsie[lmeval]"' in capsys.readouterr().err


def test_lm_eval_config_is_validated() -> None:
    with pytest.raises(ValueError, match="tasks is empty"):
        LMEvalConfig(checkpoint="c", tokenizer="t", tasks=())
    with pytest.raises(ValueError, match="weights must be one of"):
        LMEvalConfig(checkpoint="c", tokenizer="t", tasks=("tootsie_zen",), weights="best")


@pytest.mark.slow
def test_eval_lm_eval_matches_the_in_loop_metrics(tmp_path, capsys) -> None:
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install 'tootsie[lmeval]')")
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
    tokenizer = str(tmp_path / "tok" / "tokenizer.json")
    tasks = write_tasks(
        [
            LocalTask(
                "adds",
                "generate_until",
                tuple({"context": f"def f{i}(x):\n    return x", "target": f" + {i}"} for i in range(3)),
                target_delimiter="",
                max_gen_toks=4,
            )
        ],
        tmp_path / "tasks",
    )
    evaluation = InLoopEvalConfig(
        heldout={},
        tokenizer=tokenizer,
        every_steps=3,
        lm_eval_tasks=("tootsie_pysyntax", "tootsie_zen", "adds"),
        lm_eval_include_paths=(str(tasks),),
        lm_eval_limit=4,
    )
    config = TrainConfig(
        model=LlamaConfig(
            vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1
        ),
        data=MixtureConfig(
            caches={"code": str(tmp_path / "cache")},
            stages=(MixtureStage(0, {"code": 1.0}),),
            seq_len=32,
            batch_schedule=BatchSchedule.constant(4),
        ),
        num_steps=4,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=2, total_steps=4),
        eval=evaluation,
    )
    run_training(config, str(tmp_path / "run"))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "eval/lm/tootsie_zen/bits_per_byte" in r] == [2, 3]
    final = records[-1]
    assert {
        "eval/lm/tootsie_pysyntax/acc",
        "eval/lm/tootsie_pysyntax/acc_norm",
        "eval/lm/adds/exact_match",
        "eval/lm/tootsie_zen/word_perplexity",
    } <= set(final)

    args = [
        "eval",
        "lm-eval",
        "--checkpoint",
        str(tmp_path / "run"),
        "--tokenizer",
        tokenizer,
        "--tasks",
        "tootsie_pysyntax,tootsie_zen,adds",
        "--include-path",
        str(tasks),
        "--limit",
        "4",
        "--max-length",
        "32",
        "--json",
    ]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["step"] == 4 and result["weights"] == "model" and result["tasks"]["tootsie_zen"]["samples"] == 4
    for task, metrics in result["tasks"].items():
        for name in ("acc", "bits_per_byte", "exact_match"):
            if name in metrics:
                assert metrics[name] == pytest.approx(final[f"eval/lm/{task}/{name}"], rel=1e-6)
    step_config = LMEvalConfig(
        checkpoint=str(tmp_path / "run"), tokenizer=tokenizer, tasks=("tootsie_zen",), limit=4, max_length=32
    )
    evaluate_lm_tasks(step_config, str(tmp_path / "step"))
    written = json.loads((tmp_path / "step" / LM_EVAL_FILE).read_text())
    assert written["tasks"]["tootsie_zen"] == result["tasks"]["tootsie_zen"]
    assert main([*args[:-1], "--ema", "--json"]) == 0
    ema = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (
        ema["weights"] == "ema"
        and ema["tasks"]["tootsie_zen"]["bits_per_byte"] != result["tasks"]["tootsie_zen"]["bits_per_byte"]
    )

    assert main([*args[:6], "--tasks", "no_such_task"]) == 2
    assert "unknown lm-eval tasks ['no_such_task']" in capsys.readouterr().err
