"""Configs round-trip through YAML, and bad files name the field that is wrong."""

import pytest

from tootsie.configfile import dump_config, load_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import TrainConfig

CONFIG = TrainConfig(
    model=LlamaConfig(vocab_size=512, hidden_dim=64, num_heads=4, num_kv_heads=2),
    data=MixtureConfig(caches={"a": "/x", "b": "/y"}, stages=(MixtureStage(0, {"a": 1.0}), MixtureStage(10, {"b": 1.0}, 5)), batch_schedule=BatchSchedule(((0, 8), (20, 16)))),
    num_steps=30,
)


def test_round_trip(tmp_path) -> None:
    (tmp_path / "c.yaml").write_text(dump_config(CONFIG))
    assert load_config(tmp_path / "c.yaml", TrainConfig) == CONFIG


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("num_steps: 30", "num_steps: 30\nnum_stepz: 3"), "unknown field 'num_stepz'"),
        (lambda t: t.replace("num_kv_heads: 2", "num_kv_heads: 3"), r"config.model: num_heads=4 must be a multiple of num_kv_heads=3"),
        (lambda t: t.replace("hidden_dim: 64", "hidden_dim: wide"), r"config.model.hidden_dim: expected int"),
        (lambda t: t.replace("num_steps: 30\n", ""), "missing required field 'num_steps'"),
    ],
)
def test_bad_fields_are_named(tmp_path, edit, message: str) -> None:
    (tmp_path / "c.yaml").write_text(edit(dump_config(CONFIG)))
    with pytest.raises(TootsieError, match=message):
        load_config(tmp_path / "c.yaml", TrainConfig)


def test_registered_unions_are_tagged_by_kind(tmp_path) -> None:
    from dataclasses import dataclass

    from tootsie.configfile import from_plain, to_plain
    from tootsie.train.schedule import CosineConfig, WSDConfig, WSDSConfig

    @dataclass(frozen=True)
    class Holder:
        schedule: WSDConfig | WSDSConfig | CosineConfig

    holder = Holder(WSDSConfig(peak_lr=1e-3, warmup_steps=10, cycles=(100, 200)))
    plain = to_plain(holder)
    assert plain["schedule"]["kind"] == "wsd_s"
    assert from_plain(Holder, plain, "config") == holder
    with pytest.raises(TootsieError, match="unknown kind 'wsdx'"):
        from_plain(Holder, {"schedule": {"kind": "wsdx"}}, "config")
