"""A checkpoint's state.json gives back its model config, and a damaged or old one fails naming the file."""

import json

import numpy as np
import pytest

from tootsie.configfile import to_plain
from tootsie.errors import TootsieError
from tootsie.models.llama import Llama3RopeScaling, LlamaConfig
from tootsie.train.checkpoint import STATE_FILE, model_config_of, read_checkpoint_state, save_checkpoint

CONFIG = LlamaConfig(
    vocab_size=96,
    hidden_dim=32,
    intermediate_dim=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    qk_norm=True,
    rope_scaling=Llama3RopeScaling(),
)


def test_model_config_of_returns_the_config_the_trainer_recorded(tmp_path) -> None:
    checkpoint = save_checkpoint(
        tmp_path, 7, {"model": {"w": np.ones(3, np.float32)}}, {"tokens": 448, "model": to_plain(CONFIG)}
    )
    assert model_config_of(checkpoint) == CONFIG
    assert model_config_of(str(checkpoint)) == CONFIG
    assert read_checkpoint_state(checkpoint)["step"] == 7


@pytest.mark.parametrize(
    ("state_text", "match"),
    [
        (None, "not found: .* is not a finished checkpoint"),
        ('{"step": 3', "is not valid JSON"),
        ("[1, 2]", "holds a list, not a JSON object"),
        ('{"step": 3}', "records no model config \\(its 'model' entry is None"),
        ('{"step": 3, "model": "llama"}', "records no model config \\(its 'model' entry is 'llama'"),
        ('{"step": 3, "model": {"hidden_dim": 32, "widht": 9}}', "widht"),
    ],
)
def test_a_missing_or_bad_state_file_is_named_in_the_error(tmp_path, state_text: str | None, match: str) -> None:
    checkpoint = tmp_path / "step-000003"
    checkpoint.mkdir()
    if state_text is not None:
        (checkpoint / STATE_FILE).write_text(state_text, encoding="utf-8")
    with pytest.raises(TootsieError, match=match) as raised:
        model_config_of(checkpoint)
    assert str(checkpoint / STATE_FILE) in str(raised.value)


def test_state_file_name_is_the_on_disk_contract(tmp_path) -> None:
    checkpoint = save_checkpoint(tmp_path, 1, {"model": {"w": np.zeros(2, np.float32)}}, {"model": to_plain(CONFIG)})
    assert STATE_FILE == "state.json" and json.loads((checkpoint / "state.json").read_text())["model"] == to_plain(
        CONFIG
    )
