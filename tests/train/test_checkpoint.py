"""Checkpoints: round trips, the commit marker, pruning, asynchronous writes, the old format and its converter.

A checkpoint's state.json gives back its model config, and a damaged or old one fails naming the file.
"""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file

from tootsie.cli.main import main
from tootsie.configfile import to_plain
from tootsie.errors import TootsieError
from tootsie.models.llama import Llama3RopeScaling, LlamaConfig
from tootsie.train.checkpoint import (
    STATE_FILE,
    TENSORS_KEY,
    checkpoint_dir,
    has_tree,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    model_config_of,
    prune_temporary,
    read_checkpoint_state,
    read_tensors,
    remove_uncommitted,
    save_checkpoint,
    start_checkpoint,
    wait_for_checkpoints,
)

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
    assert checkpoint == str(tmp_path / "step-000001")  # locations are plain strings, a Path given or not
    assert STATE_FILE == "state.json" and json.loads(Path(checkpoint, "state.json").read_text())["model"] == to_plain(
        CONFIG
    )


TREES = {
    "model": {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones((), np.int32)},
    "opt_state": ({"mu": np.full(5, 0.25, np.float32)},),
}


def test_a_checkpoint_round_trips_every_tree_and_lists_its_paths_in_the_state_record(tmp_path) -> None:
    checkpoint = save_checkpoint(tmp_path, 5, TREES, {"kind": "permanent"})
    restored, state = load_checkpoint(checkpoint, TREES)
    assert jax.tree.all(jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), b), restored, TREES))
    assert state[TENSORS_KEY] == {"model": ["['b']", "['w']"], "opt_state": ["[0]['mu']"]}
    assert read_tensors(checkpoint, "opt_state") == {"[0]['mu']": pytest.approx(TREES["opt_state"][0]["mu"])}
    assert read_tensors(checkpoint, "ema") is None and has_tree(checkpoint, "model") and not has_tree(checkpoint, "ema")
    with pytest.raises(TootsieError, match=r"missing \[\"\['x'\]\"\]"):
        load_checkpoint(checkpoint, {"model": {**TREES["model"], "x": np.zeros(1, np.float32)}})
    with pytest.raises(TootsieError, match=r"tensor \['w'\] is float32\[3, 4\], the model expects float32\[4, 3\]"):
        load_checkpoint(checkpoint, {"model": {**TREES["model"], "w": np.zeros((4, 3), np.float32)}})


def test_a_step_without_its_state_record_is_never_listed_and_is_removed_at_startup(tmp_path) -> None:
    save_checkpoint(tmp_path, 2, TREES, {"kind": "permanent"})
    save_checkpoint(tmp_path, 4, TREES, {"kind": "permanent"})
    Path(checkpoint_dir(tmp_path, 4), STATE_FILE).unlink()  # the arrays of step 4 are written, its commit is not
    assert [step for step, _ in list_checkpoints(tmp_path)] == [2]
    assert latest_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 2)
    with pytest.raises(TootsieError, match="is not a finished checkpoint"):
        load_checkpoint(checkpoint_dir(tmp_path, 4), TREES)
    assert remove_uncommitted(tmp_path) == [4]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["step-000002"]


def test_pruning_keeps_permanent_checkpoints_and_the_newest_temporary_one(tmp_path) -> None:
    for step, kind in [(1, "temporary"), (2, "permanent"), (3, "temporary"), (4, "temporary")]:
        save_checkpoint(tmp_path, step, TREES, {"kind": kind})
    prune_temporary(tmp_path)
    assert [step for step, _ in list_checkpoints(tmp_path)] == [2, 4]


def test_an_asynchronous_write_commits_after_start_returns_and_the_caller_may_overwrite_its_arrays(tmp_path) -> None:
    arrays = {"model": {"w": jnp.arange(6.0)}}
    pending = start_checkpoint(tmp_path, 3, arrays, {"kind": "permanent"})
    arrays["model"]["w"] = arrays["model"]["w"].at[0].set(99.0)  # the state moves on while the write runs
    wait_for_checkpoints()
    assert pending.wait() == checkpoint_dir(tmp_path, 3) and not pending._thread.is_alive()
    assert read_tensors(pending.path, "model")["['w']"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def _legacy(directory, trees: dict[str, dict[str, np.ndarray]], step: int) -> None:
    directory.mkdir(parents=True)
    for name, tensors in trees.items():
        save_file(tensors, str(directory / f"{name}.safetensors"))
    (directory / STATE_FILE).write_text(json.dumps({"step": step, "kind": "permanent", "model": to_plain(CONFIG)}))


def test_an_old_format_checkpoint_restores_and_converts_through_the_cli(tmp_path, capsys) -> None:
    old = tmp_path / "old" / "checkpoints" / "step-000009"
    flat = {"model": {"['w']": np.arange(4, dtype=np.float32)}, "ema": {"['w']": np.ones(4, np.float32)}}
    _legacy(old, flat, 9)
    template = {"model": {"w": np.zeros(4, np.float32)}}
    assert load_checkpoint(old, {"model": template["model"]})[0]["model"]["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert has_tree(old, "ema") and read_tensors(old, "ema")["['w']"].tolist() == [1.0] * 4
    new = tmp_path / "new" / "checkpoints" / "step-000009"
    assert main(["checkpoint", "convert", str(old), "--out", str(new), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result == {"checkpoint": str(new), "step": 9, "tensors": {"ema": 1, "model": 1}}
    assert not list(new.glob("*.safetensors")) and model_config_of(new) == CONFIG
    assert {name: read_tensors(new, name)["['w']"].tolist() for name in flat} == {
        name: tensors["['w']"].tolist() for name, tensors in flat.items()
    }
    assert main(["checkpoint", "convert", str(new), "--out", str(tmp_path / "again")]) == 2
    assert "is not an old-format checkpoint" in capsys.readouterr().err
