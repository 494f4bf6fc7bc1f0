"""`tootsie train`, `sft` and `dpo` share one shape: NAME --config F --out D trains, modes are verbs, and the old
mode flags (`--example-config`, `--evaluate`) still parse as those verbs."""

import json
from types import SimpleNamespace

import pytest

from tootsie.cli import dpo_cmd, sft_cmd, train_cmd
from tootsie.cli.main import main, parse_args
from tootsie.configfile import to_plain
from tootsie.monitor.spikes import SpikeConfig

SHAPES = [
    (["train", "--config", "c.yaml", "--out", "run"], train_cmd.train_command),
    (
        ["train", "--config", "c.yaml", "--out", "run", "--tracker", "wandb", "--profile", "2:4"],
        train_cmd.train_command,
    ),
    (["train", "example-config", "--prefix", "p"], train_cmd.print_example_config),
    (["train", "--example-config", "--prefix", "p"], train_cmd.print_example_config),
    (["train", "--example-config", "--moe"], train_cmd.print_example_config),
    (["sft", "--config", "c.yaml", "--out", "run"], train_cmd.train_command),
    (["sft", "example-config", "--tiny"], sft_cmd.print_example_config),
    (["sft", "--example-config", "--prefix", "p"], sft_cmd.print_example_config),
    (["sft", "evaluate", "--config", "c.yaml", "--out", "run", "--json"], sft_cmd.evaluate_command),
    (["sft", "--evaluate", "--config", "c.yaml", "--out", "run", "--json"], sft_cmd.evaluate_command),
    (["dpo", "--config", "c.yaml", "--out", "run"], train_cmd.train_command),
    (["dpo", "--example-config", "--sft", "runs/sft", "--prefix", "p"], dpo_cmd.print_example_config),
    (["dpo", "example-config", "--sft", "runs/sft", "--quiet"], dpo_cmd.print_example_config),
    (["dpo", "--evaluate", "--config", "c.yaml", "--out", "run"], dpo_cmd.evaluate_command),
]


@pytest.mark.parametrize(("argv", "handler"), SHAPES, ids=[" ".join(argv[:2]) for argv, _ in SHAPES])
def test_each_shape_reaches_its_handler(argv: list[str], handler: object) -> None:
    args = parse_args(argv)
    assert args.handler is handler
    assert args.command == argv[0]


def test_old_and_new_shapes_parse_alike() -> None:
    old = parse_args(["sft", "--evaluate", "--config", "c.yaml", "--out", "run", "--json"])
    new = parse_args(["sft", "evaluate", "--config", "c.yaml", "--out", "run", "--json"])
    assert vars(old) == vars(new)
    assert (new.config, new.out, new.json, new.verb) == ("c.yaml", "run", True, "evaluate")


def test_evaluate_needs_config_and_out() -> None:
    with pytest.raises(SystemExit):
        parse_args(["dpo", "evaluate", "--config", "c.yaml"])


def test_training_without_a_config_names_the_verb(capsys) -> None:
    assert main(["train", "--out", "run"]) == 2
    assert "tootsie train needs --config FILE and --out DIR" in capsys.readouterr().err


def test_dpo_example_config_needs_the_sft_run(tmp_path, capsys) -> None:
    assert main(["dpo", "example-config", "--sft", str(tmp_path / "missing")]) == 2
    assert "does not exist: train the SFT run first" in capsys.readouterr().err


def test_an_example_config_prints_as_yaml_or_as_one_json_object(capsys) -> None:
    config = SpikeConfig(window=7)
    assert train_cmd.print_built_config(parse_args(["train", "example-config"]), lambda: config) == 0
    assert "window: 7\n" in capsys.readouterr().out
    assert train_cmd.print_built_config(parse_args(["train", "example-config", "--json"]), lambda: config) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == to_plain(config)


def test_the_moe_example_is_the_dense_one_with_8_experts_of_which_each_token_uses_2(monkeypatch) -> None:
    from tootsie.demos import train_demo
    from tootsie.models.moe import MoeConfig

    def built(steps: list, prefix: str) -> SimpleNamespace:
        return SimpleNamespace(
            ok=True, steps=[SimpleNamespace(name=s.name, output_path=f"{prefix}/{s.name}") for s in steps]
        )

    monkeypatch.setattr(train_demo, "run_experiment", built)
    assert parse_args(["train", "--example-config", "--moe"]).moe
    assert not parse_args(["train", "example-config"]).moe
    dense, moe = train_demo.train_example("p"), train_demo.train_example("p", moe=True)
    assert isinstance(moe.model, MoeConfig) and not isinstance(dense.model, MoeConfig)
    assert (moe.model.num_experts, moe.model.experts_per_token) == (8, 2)
    assert moe.data == dense.data and moe.num_steps == dense.num_steps
    router = moe.model.num_layers * moe.model.hidden_dim * moe.model.num_experts
    assert moe.model.active_parameters() == dense.model.num_parameters() + router  # the dense MLP's width, routed
