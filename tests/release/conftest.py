"""Tiny tokenizers, checkpoints and a fabricated executor run for the release tests.

`fake_experiment` builds the step graph of a two-phase run with real configs
(normalize → quality/dedup → consolidate → tokenizer → tokenize → pretrain →
cooldown → eval) and writes each step's metadata file and a small stand-in
output (stats, ledgers, checkpoints, metrics) without running the steps: the
release reads only those files, so this tests it on the executor's real record
format in well under a second.
"""

import json
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import pyarrow as pa
import pytest

from tootsie.configfile import to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.consolidate import AttributeFilter, ConsolidateConfig, consolidate
from tootsie.datakit.dedup import DedupConfig, dedup
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.quality import QualityConfig, QualityRules, quality
from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, file_sha256, train_tokenizer
from tootsie.eval.bpb_step import EvalBPBConfig, evaluate_bpb
from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.executor.graph import build_graph
from tootsie.executor.metadata import Environment, write_info
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.release.hf_weights import model_layout
from tootsie.train.checkpoint import save_checkpoint
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.schedule import WSDConfig

TEXTS = [f"def f{i}(x):\n    return x + {i}  # the value {i * i}\n" for i in range(60)] + [
    "hello world, said the small model."
] * 5
LLAMA = LlamaConfig(vocab_size=320, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2)


@pytest.fixture(scope="session")
def tokenizer_file(tmp_path_factory) -> Path:
    """A 300-token byte-level BPE trained by tootsie on a few strings (BOS id 0, EOS id 1)."""
    root = tmp_path_factory.mktemp("tokenizer")
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS}), root / "docs" / "part-00000.parquet"
    )
    train_tokenizer(TokenizerTrainConfig(inputs=(str(root / "docs"),), vocab_size=300), str(root / "tok"))
    return root / "tok" / "tokenizer.json"


def random_params(config: LlamaConfig, seed: int) -> LlamaModel:
    """Random parameters with every norm scale off 1, so a mis-mapped norm changes the logits.

    Drawn with NumPy, no JAX computation: fast.
    """
    names, shapes, treedef = model_layout(config)
    rng = np.random.default_rng(seed)
    leaves = [
        (1.0 if name.endswith("norm.weight") else 0.0) + 0.2 * rng.standard_normal(shape.shape).astype(np.float32)
        for name, shape in zip(names, shapes)
    ]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def make_checkpoint(
    run: Path, config: LlamaConfig, step: int = 10, tokens: int = 1280, seed: int = 0, ema: bool = True
) -> Path:
    """A tootsie checkpoint of random weights in `run/checkpoints`: raw and, unless `ema=False`, different EMA ones."""
    trees = {"model": random_params(config, seed)} | ({"ema": random_params(config, seed + 100)} if ema else {})
    state = {"tokens": tokens, "kind": "permanent", "model": to_plain(config)}
    return Path(save_checkpoint(run / "checkpoints", step, trees, state))  # a str location; the tests join paths


@dataclass(frozen=True)
class FakeRun:
    """Where the fabricated run's steps are."""

    prefix: Path
    paths: dict[str, Path]
    cache_tokens: dict[str, int]


def _write_train_outputs(path: Path, config: TrainConfig, first_step: int) -> None:
    lines = []
    for step in range(first_step, config.num_steps):
        lines.append(
            json.dumps({"step": step, "loss": 5.0 - 0.01 * step, "tokens": config.tokens_before(step + 1), "lr": 1e-3})
        )
        if (step + 1) % config.checkpoints.every_steps == 0 or step + 1 == config.num_steps:
            make_checkpoint(path, config.model, step=step + 1, tokens=config.tokens_before(step + 1), seed=step)
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def build_fake_run(prefix: Path, tokenizer: Path) -> FakeRun:
    """Write the fabricated two-phase run under `prefix` (see the module docstring)."""
    filters, caches = {}, {}
    for source in ("code", "prose"):
        normalized = Step(f"fake/normalized/{source}", normalize, NormalizeConfig(inputs=(f"/data/{source}.jsonl",)))
        scored = Step(
            f"fake/quality/{source}", quality, QualityConfig(input=normalized.ref(), rules=QualityRules.for_code())
        )
        duplicates = Step(f"fake/dedup/{source}", dedup, DedupConfig(input=normalized.ref()))
        rules = (
            AttributeFilter("quality", scored.ref(), "quality_pass", drop_value=False),
            AttributeFilter("fuzzy_duplicate", duplicates.ref(), "fuzzy_duplicate", drop_value=True),
        )
        filters[source] = Step(
            f"fake/clean/{source}", consolidate, ConsolidateConfig(input=normalized.ref(), attributes=rules)
        )
    tok = Step(
        "fake/tokenizer",
        train_tokenizer,
        TokenizerTrainConfig(inputs=tuple(f.ref() for f in filters.values()), vocab_size=300),
    )
    for source in ("code", "prose"):
        caches[source] = Step(
            f"fake/tokenized/{source}",
            tokenize_documents,
            TokenizeConfig(input=filters[source].ref(), tokenizer=tok.ref("tokenizer.json")),
        )

    def train_config(weights: dict[str, float], num_steps: int, warm: WarmStartConfig | None = None) -> TrainConfig:
        data = MixtureConfig(
            caches={s: c.ref() for s, c in caches.items()},
            stages=(MixtureStage(0, weights),),
            seq_len=8,
            batch_schedule=BatchSchedule.constant(4),
        )
        schedule = WSDConfig(peak_lr=1e-3, warmup_steps=2, decay_steps=10, total_steps=30)
        return TrainConfig(
            model=LLAMA,
            data=data,
            num_steps=num_steps,
            schedule=schedule,
            warm_start=warm,
            checkpoints=CheckpointConfig(every_steps=10),
        )

    pretrain = Step("fake/train/pretrain", run_training, train_config({"code": 0.5, "prose": 0.5}, 20))
    cooldown = Step(
        "fake/train/cooldown",
        run_training,
        train_config({"code": 0.3, "prose": 0.7}, 30, WarmStartConfig(pretrain.ref("checkpoints/step-000010"))),
    )
    bpb = Step(
        "fake/eval/bpb",
        evaluate_bpb,
        EvalBPBConfig(
            model=LLAMA,
            checkpoints={"init": None, "final": cooldown.ref()},
            heldout={},
            tokenizer=tok.ref("tokenizer.json"),
        ),
    )
    graph = build_graph([bpb], prefix)
    environment = Environment(
        tootsie_version="0.1.0",
        tootsie_git="abc123",
        experiment=None,
        experiment_git=None,
        packages={},
        python="3.11",
        host="test",
        pid=1,
        cpus=2,
    )
    paths, cache_tokens = {}, {}
    for node in graph.nodes:
        path = Path(node.output_path)
        path.mkdir(parents=True)
        paths[node.step.name] = path
        config = graph.resolved_config(node)
        if isinstance(config, NormalizeConfig):
            (path / "stats.json").write_text(
                json.dumps({"exact_duplicates": 3, "rejected": {"empty": 1}, "input_docs": 40, "output_docs": 36})
            )
        elif isinstance(config, ConsolidateConfig):
            (path / "stats.json").write_text(
                json.dumps(
                    {
                        "removed_by": {"quality": 4, "fuzzy_duplicate": 2},
                        "chars_removed_by": {"quality": 400, "fuzzy_duplicate": 90},
                    }
                )
            )
        elif isinstance(config, TokenizerTrainConfig):
            (path / "tokenizer.json").write_bytes(tokenizer.read_bytes())
        elif isinstance(config, TokenizeConfig):
            writer = TokenCacheWriter(
                path,
                vocab_size=300,
                ledger_extra={"tokenizer_sha256": file_sha256(tokenizer), "bos_id": 0, "eos_id": 1},
            )
            for length in range(5, 5 + (7 if "code" in node.step.name else 11)):
                writer.append(np.arange(length) % 300)
            cache_tokens[node.step.name.rsplit("/", 1)[-1]] = writer.close()["num_tokens"]
        elif isinstance(config, TrainConfig):
            _write_train_outputs(path, config, first_step=10 if config.warm_start else 0)
        elif isinstance(config, EvalBPBConfig):
            (path / "bpb.json").write_text(
                json.dumps(
                    {
                        label: {"code": 2.5, "prose": 3.0, "macro_avg": 2.75, "micro_avg": 2.8}
                        for label in ("init", "final", "final_ema")
                    }
                )
            )
        write_info(node, environment, status="SUCCESS", started=time.time(), ended=time.time())
    return FakeRun(prefix=prefix, paths=paths, cache_tokens=cache_tokens)


@pytest.fixture
def fake_run(tmp_path, tokenizer_file) -> FakeRun:
    """The fabricated two-phase executor run (cooldown warm-started from the pretrain's step-10 checkpoint)."""
    return build_fake_run(tmp_path / "prefix", tokenizer_file)
