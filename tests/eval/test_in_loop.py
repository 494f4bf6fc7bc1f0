"""In-loop held-out BPB: logged on schedule for raw and EMA weights, read back as the EMA gap."""

import json

import pyarrow as pa

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.spikes import find_spikes
from tootsie.train.config import InLoopEvalConfig, TrainConfig
from tootsie.train.schedule import WSDConfig


def test_bpb_is_logged_every_n_steps_for_raw_and_ema(tmp_path) -> None:
    texts = [f"def f{i}(x):\n    return x * {i}\n" * 5 for i in range(60)]
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(60)], "text": texts}), tmp_path / "docs" / "part-00000.parquet"
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
        num_steps=7,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=2, total_steps=7),
        eval=InLoopEvalConfig(
            heldout={"code": str(tmp_path / "cache")},
            tokenizer=str(tmp_path / "tok" / "tokenizer.json"),
            every_steps=3,
            max_sequences=4,
        ),
    )
    run_training(config, str(tmp_path / "run"))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r["step"] for r in records if "eval/bpb/code" in r]
    assert evaluated == [2, 5, 6]  # after steps 3, 6 and the last (7), logged on the step that produced them
    assert all("eval/bpb/code_ema" in r and "eval/bpb/macro_avg_ema" in r for r in records if "eval/bpb/code" in r)
    gaps = find_spikes(read_metrics(tmp_path / "run" / "metrics.jsonl"))["ema_gap"]
    assert {g["metric"] for g in gaps} == {"eval/bpb/code", "eval/bpb/macro_avg", "eval/bpb/micro_avg"} and len(
        gaps
    ) == 9
