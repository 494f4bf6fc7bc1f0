"""Training lowers the loss, resumes bit-exactly from checkpoints, and warm-starts across phases."""

import json

import equinox as eqx
import jax
import numpy as np
import pytest

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.loading import init_model
from tootsie.train.optimizer import decay_mask
from tootsie.train.schedule import WSDConfig

MODEL = LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)


@pytest.fixture
def config(make_cache) -> TrainConfig:
    rng = np.random.default_rng(0)
    pattern = [[int(v) for v in (np.arange(30) * 3 + k) % 37 + 2] for k in range(40)]
    noise = [rng.integers(2, 40, size=25).tolist() for _ in range(40)]
    caches = {"pattern": make_cache("p", pattern, 40), "noise": make_cache("n", noise, 40)}
    data = MixtureConfig(
        caches=caches,
        stages=(MixtureStage(0, {"pattern": 0.7, "noise": 0.3}),),
        seq_len=16,
        batch_schedule=BatchSchedule.constant(4),
    )
    return TrainConfig(
        model=MODEL,
        data=data,
        num_steps=8,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=2, decay_steps=4, total_steps=12),
        checkpoints=CheckpointConfig(every_steps=3),
    )


def _losses(directory) -> list[float]:
    return [json.loads(line)["loss"] for line in (directory / "metrics.jsonl").read_text().splitlines()]


def test_resume_reproduces_the_uninterrupted_run_bit_for_bit(config: TrainConfig, tmp_path) -> None:
    run_training(config, str(tmp_path / "straight"))
    short = TrainConfig(**{**config.__dict__, "num_steps": 4})
    run_training(short, str(tmp_path / "resumed"))
    run_training(config, str(tmp_path / "resumed"))
    assert _losses(tmp_path / "straight") == _losses(tmp_path / "resumed")
    a, _ = load_checkpoint(
        latest_checkpoint(tmp_path / "straight" / "checkpoints"),
        {"model": eqx.filter(init_model(config), eqx.is_array)},
    )
    b, _ = load_checkpoint(
        latest_checkpoint(tmp_path / "resumed" / "checkpoints"), {"model": eqx.filter(init_model(config), eqx.is_array)}
    )
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def test_training_lowers_the_loss_and_logs_every_step(config: TrainConfig, tmp_path) -> None:
    longer = TrainConfig(**{**config.__dict__, "num_steps": 12})
    run_training(longer, str(tmp_path / "run"))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(12))
    assert {"loss", "grad_norm", "lr", "tokens", "tokens_per_s", "phase"} <= set(records[0])
    assert np.mean([r["loss"] for r in records[-3:]]) < records[0]["loss"] - 0.2
    assert [r["phase"] for r in records][:3] == ["warmup", "warmup", "stable"] and records[-1]["phase"] == "decay"
    assert [step for step, _ in list_checkpoints(tmp_path / "run" / "checkpoints")][-1] == 12


def test_warm_start_continues_the_step_count(config: TrainConfig, tmp_path) -> None:
    run_training(config, str(tmp_path / "pre"))
    cooldown = TrainConfig(**{**config.__dict__, "num_steps": 12, "warm_start": WarmStartConfig(str(tmp_path / "pre"))})
    run_training(cooldown, str(tmp_path / "cool"))
    steps = [json.loads(line)["step"] for line in (tmp_path / "cool" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(8, 12))


def test_checkpoint_of_another_architecture_is_refused(config: TrainConfig, tmp_path) -> None:
    run_training(config, str(tmp_path / "pre"))
    wider = TrainConfig(
        **{
            **config.__dict__,
            "model": LlamaConfig(**{**MODEL.__dict__, "hidden_dim": 32}),
            "warm_start": WarmStartConfig(str(tmp_path / "pre")),
            "num_steps": 10,
        }
    )
    with pytest.raises(TootsieError, match="shape"):
        run_training(wider, str(tmp_path / "other"))


def test_weight_decay_skips_embeddings_and_norms() -> None:
    mask = decay_mask(eqx.filter(init_model_for_mask(), eqx.is_array))
    assert mask.embed is False and mask.final_norm.weight is False and mask.layers.attn_norm.weight is False
    assert mask.layers.attn.wq is True and mask.lm_head is True


def init_model_for_mask():
    from tootsie.models.llama import LlamaModel

    return LlamaModel(MODEL, key=jax.random.PRNGKey(0))


def test_llama_to_qk_norm_warm_start_continues_and_recovers(config: TrainConfig, tmp_path) -> None:
    """Marin 32B phase 3 at toy scale: QK-norm surgery, a 4-step rewarm, loss finite and back near pre-switch level."""
    from tootsie.train.schedule import RewarmConfig
    from tootsie.train.stability import StabilityConfig

    longer = TrainConfig(
        **{
            **config.__dict__,
            "num_steps": 16,
            "schedule": WSDConfig(peak_lr=1e-2, warmup_steps=2, decay_steps=0, total_steps=40),
        }
    )
    run_training(longer, str(tmp_path / "llama"))
    qk_model = LlamaConfig(**{**MODEL.__dict__, "qk_norm": True})
    rewarm = RewarmConfig(
        cycles=(16, 40), peak_lrs=(1e-2,), warmup_steps=2, rewarmup_steps=4, rewarm_from="zero", decay_steps=0
    )
    switched = TrainConfig(
        **{
            **longer.__dict__,
            "model": qk_model,
            "num_steps": 32,
            "schedule": rewarm,
            "warm_start": WarmStartConfig(str(tmp_path / "llama"), add_qk_norm=True),
            "stability": StabilityConfig(clip_update_window=8, skip_bad_steps=True, skip_window=8),
        }
    )
    run_training(switched, str(tmp_path / "qk"))
    before = [json.loads(line) for line in (tmp_path / "llama" / "metrics.jsonl").read_text().splitlines()]
    after = [json.loads(line) for line in (tmp_path / "qk" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in after] == list(range(16, 32))
    assert all(np.isfinite(r["loss"]) for r in after)
    assert np.mean([r["loss"] for r in after[-4:]]) < np.mean([r["loss"] for r in before[-4:]]) + 0.05
    assert {"clip_update/clipped", "skip/skipped", "adam/mu_norm", "lm_head_norm", "layer_update_norms", "mfu"} <= set(
        after[-1]
    )
