"""`eval.checkpoint_eval`'s configs: the flags of `tootsie eval bpb` and `eval suite`, checked before any model
loads."""

import pytest

from tootsie.errors import TootsieError
from tootsie.eval.checkpoint_eval import CheckpointBPBConfig, SuiteEvalConfig


def test_checkpoint_bpb_config_names_domains_and_refuses_clashes() -> None:
    config = CheckpointBPBConfig(checkpoint="run", data=("code=a/c1", "b/prose"), tokenizer="t.json", ema=True)
    assert config.domains == {"code": "a/c1", "prose": "b/prose"} and config.weights == "ema"
    with pytest.raises(ValueError, match="both named 'c'"):
        CheckpointBPBConfig(checkpoint="run", data=("a/c", "b/c"), tokenizer="t.json")
    with pytest.raises(ValueError, match="data is empty"):
        CheckpointBPBConfig(checkpoint="run", data=(), tokenizer="t.json")


def test_suite_eval_config_checks_the_suite_name() -> None:
    assert SuiteEvalConfig(checkpoint="run", suite="core", data_dir="d").weights == "model"
    with pytest.raises(TootsieError, match="unknown suite or benchmarks"):
        SuiteEvalConfig(checkpoint="run", suite="core,nope", data_dir="d")
