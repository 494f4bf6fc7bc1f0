"""Configs round-trip through YAML, and bad files name the field that is wrong."""

import json
from dataclasses import replace

import pytest

from tootsie.configfile import dump_config, load_config, read_yaml, to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.data.source import SuppliedRows, default_source
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import TrainConfig

CONFIG = TrainConfig(
    model=LlamaConfig(vocab_size=512, hidden_dim=64, num_heads=4, num_kv_heads=2),
    data=MixtureConfig(
        caches={"a": "/x", "b": "/y"},
        stages=(MixtureStage(0, {"a": 1.0}), MixtureStage(10, {"b": 1.0}, 5)),
        batch_schedule=BatchSchedule(((0, 8), (20, 16))),
    ),
    num_steps=30,
)


def test_round_trip(tmp_path) -> None:
    (tmp_path / "c.yaml").write_text(dump_config(CONFIG))
    assert load_config(tmp_path / "c.yaml", TrainConfig) == CONFIG


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("num_steps: 30", "num_steps: 30\nnum_stepz: 3"), "unknown field 'num_stepz'"),
        (
            lambda t: t.replace("num_kv_heads: 2", "num_kv_heads: 3"),
            r"config.model: num_heads=4 must be a multiple of num_kv_heads=3",
        ),
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


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace("remat: full", "remat: ful"),
            r"config.model.remat: unknown name 'ful'; choose one of \['dots', 'full', 'none'\]",
        ),
        (
            lambda t: t.replace("decay_shape: linear", "decay_shape: exp"),
            r"config.schedule.decay_shape: unknown name 'exp'; "
            r"choose one of \['cosine', 'inv_sqrt', 'linear', 'sqrt'\]",
        ),
        (
            lambda t: t.replace("kind: wsd\n", "kind: wsdx\n"),
            r"config.schedule.kind: unknown kind 'wsdx'; "
            r"choose one of \['cosine', 'inverse_sqrt', 'linear', 'rewarm', 'wsd', 'wsd_s'\]",
        ),
        (
            lambda t: t.replace("kind: feistel\n", "kind: fiestel\n"),
            r"config.data.permutation.kind: unknown kind 'fiestel'; "
            r"choose one of \['block', 'era', 'feistel', 'linear'\]",
        ),
        (
            lambda t: t.replace("  kind: adamw\n", "  kind: adamx\n"),
            r"config.optimizer.kind: unknown kind 'adamx'; choose one of \['adamc', 'adamw', 'muon', 'nadamw'\]",
        ),
    ],
)
def test_every_choice_is_checked_at_load_with_the_valid_names(tmp_path, edit, message: str) -> None:
    text = dump_config(CONFIG)
    (tmp_path / "c.yaml").write_text(edit(text))
    assert edit(text) != text
    with pytest.raises(TootsieError, match=message):
        load_config(tmp_path / "c.yaml", TrainConfig)


def _plain() -> dict:
    from tootsie.configfile import to_plain

    return to_plain(CONFIG)


def test_a_bare_name_where_a_kind_belongs_says_what_to_write() -> None:
    from tootsie.configfile import from_plain

    with pytest.raises(
        TootsieError, match=r"config.schedule: a bare name 'cosine' is not accepted here; write \{kind: cosine\}"
    ):
        from_plain(TrainConfig, {**_plain(), "schedule": "cosine"}, "config")
    with pytest.raises(
        TootsieError,
        match=(
            r"config.data.permutation: unknown kind 'random'; "
            r"choose one of \['block', 'era', 'feistel', 'linear'\], written as \{kind: NAME\}"
        ),
    ):
        from_plain(TrainConfig, {**_plain(), "data": {**_plain()["data"], "permutation": "random"}}, "config")


@pytest.mark.parametrize("registry_name", ["optimizer", "schedule", "permutation"])
def test_the_choice_unions_are_the_registries(registry_name: str) -> None:
    """Each field's union holds exactly its registry's classes, and every member loads from its bare `kind:` tag."""
    import typing

    from tootsie.configfile import from_plain
    from tootsie.data.permutation import PERMUTATIONS, PermutationChoice
    from tootsie.train.config import OptimizerChoice, ScheduleChoice
    from tootsie.train.optimizer import OPTIMIZERS
    from tootsie.train.schedule import SCHEDULES

    registry, union = {
        "optimizer": (OPTIMIZERS, OptimizerChoice),
        "schedule": (SCHEDULES, ScheduleChoice),
        "permutation": (PERMUTATIONS, PermutationChoice),
    }[registry_name]
    assert typing.get_args(union) == tuple(registry.values())
    for kind, cls in registry.items():
        assert type(from_plain(union, {"kind": kind}, "config")) is cls


def test_a_user_file_that_is_missing_or_unparseable_says_which_and_how_to_fix_it(tmp_path) -> None:
    path = tmp_path / "components.yaml"
    with pytest.raises(TootsieError, match=r"components file not found: .*components.yaml; write a mapping"):
        read_yaml(path, "components file", "write a mapping")
    path.write_text("a: [1, 2\n")
    with pytest.raises(TootsieError, match=r"components file .*components.yaml is not valid YAML/JSON"):
        read_yaml(path, "components file")
    path.write_text('{"a": "/data/a"}')
    assert read_yaml(path) == {"a": "/data/a"}


def test_data_is_a_mixture_without_kind_or_supplied_rows_with_it(tmp_path) -> None:
    assert "kind" not in to_plain(CONFIG)["data"]  # existing configs (and their hashes) are unchanged
    supplied = replace(CONFIG, data=SuppliedRows(seq_len=64, batch_size=8))
    assert to_plain(supplied)["data"] == {"kind": "supplied", "seq_len": 64, "batch_size": 8}
    (tmp_path / "s.yaml").write_text(dump_config(supplied))
    assert load_config(tmp_path / "s.yaml", TrainConfig) == supplied
    (tmp_path / "bad.yaml").write_text(dump_config(supplied).replace("kind: supplied", "kind: rollouts"))
    with pytest.raises(TootsieError, match="rollouts"):
        load_config(tmp_path / "bad.yaml", TrainConfig)


def test_a_supplied_data_config_without_its_source_is_refused(tmp_path) -> None:
    with pytest.raises(TootsieError, match="kind: supplied"):
        default_source(replace(CONFIG, data=SuppliedRows(seq_len=64, batch_size=8)).data)


def test_a_json_config_reads_exponents_as_numbers(tmp_path) -> None:
    config = replace(CONFIG, model=replace(CONFIG.model, norm_eps=1e-05))
    (tmp_path / "c.json").write_text(json.dumps(to_plain(config)))  # json writes 1e-05, which YAML 1.1 reads as text
    assert load_config(tmp_path / "c.json", TrainConfig) == config
