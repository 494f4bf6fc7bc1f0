"""Damage to real outputs, through real steps: a truncated token cache (datakit tokenize) and a deleted checkpoint
shard (a tiny training run) are named by `status`, and `run` remakes both from clean directories."""

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.eval.training import run_training
from tootsie.executor import Status, Step, experiment_status, run_experiment
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig

pytestmark = pytest.mark.slow

INLINE = EngineConfig(workers=1, progress=False)
TEXTS = [f"def f{i}(x):\n    return x + {i}  # the value {i * i}\n" for i in range(60)]


@dataclasses.dataclass(frozen=True)
class DocsConfig:
    count: int = len(TEXTS)


def write_docs(config: DocsConfig, output_path: str) -> None:
    """A document directory of `count` small Python functions."""
    texts = TEXTS[: config.count]
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    write_table_atomic(table, Path(output_path) / "part-00000.parquet")


def steps() -> list[Step]:
    docs = Step("real/docs", write_docs, DocsConfig())
    tokenizer = Step("real/tokenizer", train_tokenizer, TokenizerTrainConfig(inputs=(docs.ref(),), vocab_size=300))
    tokens = Step(
        "real/tokens",
        tokenize_documents,
        TokenizeConfig(input=docs.ref(), tokenizer=tokenizer.ref("tokenizer.json"), engine=INLINE),
    )
    model = LlamaConfig(vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1)
    data = MixtureConfig(
        caches={"code": tokens.ref()},
        stages=(MixtureStage(0, {"code": 1.0}),),
        seq_len=16,
        batch_schedule=BatchSchedule.constant(2),
    )
    train = Step(
        "real/train",
        run_training,
        TrainConfig(
            model=model,
            data=data,
            num_steps=4,
            schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=1, total_steps=4),
            ema=None,
            checkpoints=CheckpointConfig(every_steps=2, every_minutes=None),
        ),
    )
    other = Step("real/other-docs", write_docs, DocsConfig(count=5))
    return [train, other]


def test_truncated_token_cache_and_deleted_checkpoint_shard_are_named_and_remade(tmp_path: Path) -> None:
    first = run_experiment(steps(), tmp_path)
    assert first.ok, [(s.name, s.error) for s in first.steps]
    out = {s.name: Path(s.output_path) for s in first.steps}
    digests = {s.name: s.manifest.digest for s in first.steps if s.manifest is not None}

    cache = max(
        (p for p in out["real/tokens"].rglob("*") if p.is_file() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_size,
    )
    size = cache.stat().st_size
    with open(cache, "r+b") as handle:
        handle.truncate(size // 2)
    shard = next(
        p for p in sorted((out["real/train"] / "checkpoints").rglob("*")) if p.is_file() and "model" in p.parts
    )
    shard.unlink()
    cache_name = cache.relative_to(out["real/tokens"]).as_posix()
    shard_name = shard.relative_to(out["real/train"]).as_posix()

    status = {s.name: s for s in experiment_status(steps(), tmp_path).steps}
    assert status["real/tokens"].status is Status.DAMAGED
    assert status["real/tokens"].damage == (f"{cache_name}: {size // 2} bytes, recorded {size}",)
    assert status["real/train"].status is Status.DAMAGED
    assert status["real/train"].damage == (f"{shard_name}: missing",)
    assert {status[n].status for n in ("real/docs", "real/tokenizer", "real/other-docs")} == {Status.SUCCESS}

    second = run_experiment(steps(), tmp_path)
    assert second.ok, [(s.name, s.error) for s in second.steps]
    reran = {s.name: s for s in second.steps}
    for name in ("real/docs", "real/tokenizer", "real/other-docs"):
        assert reran[name].reason.startswith("skip: SUCCESS"), reran[name]
    for name in ("real/tokens", "real/train"):
        assert reran[name].reason.startswith("run: damaged: ") and ".damaged-" in reran[name].moved_to
    assert (Path(reran["real/tokens"].moved_to) / cache_name).stat().st_size == size // 2
    assert cache.stat().st_size == size and reran["real/tokens"].manifest.digest == digests["real/tokens"]
    assert shard.exists() and not (Path(reran["real/train"].moved_to) / shard_name).exists()
    log = (out["real/train"] / ".executor.log").read_text()
    assert "resum" not in log.lower()  # trained from step 0 in a clean directory, not from the broken checkpoint
    assert all(s.status is Status.SUCCESS for s in experiment_status(steps(), tmp_path).steps)
