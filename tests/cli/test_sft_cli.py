"""`tootsie sft`: a new user's example config trains with `tootsie train` and beats the base on held-out replies."""

import json
from dataclasses import replace

import pytest

from tootsie.cli.main import main
from tootsie.configfile import dump_config, load_config
from tootsie.data.sequences import WholeDocumentsConfig
from tootsie.train.config import TrainConfig


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_example_config_trains_and_lowers_heldout_assistant_loss(tmp_path, capsys) -> None:
    assert main(["sft", "--example-config", "--tiny", "--prefix", str(tmp_path / "demo")]) == 0
    config = load_config_text(capsys.readouterr().out, tmp_path)
    assert isinstance(config.data.packing, WholeDocumentsConfig)
    assert config.warm_start is not None and "train/cooldown-" in config.warm_start.checkpoint
    assert set(config.data.stages[0].weights) == {"builtins", "modules"}
    short = replace(config, num_steps=20, schedule=replace(config.schedule, decay_steps=6, total_steps=20))
    (tmp_path / "sft.yaml").write_text(dump_config(short), encoding="utf-8")
    assert main(["train", "--config", str(tmp_path / "sft.yaml"), "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    args = ["sft", "--evaluate", "--config", str(tmp_path / "sft.yaml"), "--out", str(tmp_path / "run"), "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["assistant_tokens"] > 0 and result["sft"] < result["base"]


def load_config_text(text: str, tmp_path) -> TrainConfig:
    """The printed YAML, loaded as `tootsie train` loads it."""
    (tmp_path / "printed.yaml").write_text(text, encoding="utf-8")
    return load_config(tmp_path / "printed.yaml", TrainConfig, root="train")


def test_sft_without_a_mode_says_what_it_needs(capsys) -> None:
    assert main(["sft"]) == 2
    assert "sft example-config" in capsys.readouterr().err
