"""`evaluate_sft` and `evaluate_dpo` read the base/reference, held-out caches and beta from the run's config."""

from dataclasses import replace

import pytest

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.eval.dpo_eval import evaluate_dpo
from tootsie.eval.sft_eval import evaluate_sft
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import TrainConfig, WarmStartConfig

CONFIG = TrainConfig(
    model=LlamaConfig(vocab_size=64, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1),
    data=MixtureConfig(
        caches={"chat": "chat-cache"},
        stages=(MixtureStage(0, {"chat": 1.0}),),
        seq_len=32,
        batch_schedule=BatchSchedule.constant(2),
    ),
    num_steps=2,
)


def test_evaluate_sft_needs_a_base_and_heldout_caches() -> None:
    with pytest.raises(TootsieError, match="warm_start .*eval.heldout.*sft example-config"):
        evaluate_sft(CONFIG, "run")


def test_evaluate_dpo_needs_the_dpo_objective() -> None:
    config = replace(CONFIG, warm_start=WarmStartConfig("sft-run"))
    with pytest.raises(TootsieError, match="objective kind dpo.*dpo example-config"):
        evaluate_dpo(config, "run")
