"""A resume with a changed hashed field is refused with the diff (or accepted and recorded); a warm start says what
changed in the model and which stability tools it turns off."""

import json
import shutil
from dataclasses import replace

import pytest

from tootsie.cli.main import main
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.config_drift import (
    CHANGES_FILE,
    WARM_START_REPORT_FILE,
    config_diff,
    hashed_view,
)
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.sharding import MeshConfig
from tootsie.train.stability import StabilityConfig

MODEL = LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)


@pytest.fixture
def config(make_cache) -> TrainConfig:
    """A tiny run of 2 steps (its schedule runs to 6, so a resume can extend it)."""
    cache = make_cache("a", [[(3 * i + k) % 37 + 2 for i in range(30)] for k in range(20)], 40)
    data = MixtureConfig(
        caches={"a": cache}, stages=(MixtureStage(0, {"a": 1.0}),), seq_len=16, batch_schedule=BatchSchedule.constant(4)
    )
    return TrainConfig(
        model=MODEL,
        data=data,
        num_steps=2,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=2, total_steps=6),
        ema=None,
        checkpoints=CheckpointConfig(every_steps=100, every_minutes=None),
    )


def test_hashed_view_names_inputs_by_content_and_leaves_out_unhashed_fields(config, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(config.data.caches["a"], moved)
    relocated = replace(config, data=replace(config.data, caches={"a": str(moved)}))
    view = hashed_view(config)
    assert view["data"]["caches"]["a"].startswith("token-cache:")
    assert hashed_view(relocated) == view  # the same cache under another path (an executor mirror) is no change
    assert "mesh" not in view and "every_steps" not in view["checkpoints"]
    run_control = replace(config, mesh=MeshConfig(data=1), checkpoints=CheckpointConfig(every_steps=7))
    assert config_diff(view, hashed_view(run_control)) == []
    extended = replace(config, num_steps=6)
    assert config_diff(view, hashed_view(extended)) == []  # num_steps only says where the run stops


def test_resume_with_changed_max_grad_norm_is_refused_then_accepted_and_recorded(config, tmp_path, capsys):
    out = tmp_path / "run"
    first = tmp_path / "first.yaml"
    first.write_text(dump_config(config), encoding="utf-8")
    assert main(["train", "--config", str(first), "--out", str(out)]) == 0
    checkpoints_before = sorted(p.name for p in (out / "checkpoints").iterdir())
    recorded = (out / "config.json").read_text(encoding="utf-8")

    changed = replace(config, num_steps=4, optimizer=AdamWConfig(max_grad_norm=0.5))
    second = tmp_path / "second.yaml"
    second.write_text(dump_config(changed), encoding="utf-8")
    assert main(["train", "--config", str(second), "--out", str(out)]) != 0
    error = capsys.readouterr().err
    assert "config.optimizer.max_grad_norm: 1.0 -> 0.5" in error
    assert "--allow-config-change" in error
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == checkpoints_before  # nothing trained
    assert (out / "config.json").read_text(encoding="utf-8") == recorded
    assert not (out / CHANGES_FILE).exists()

    assert main(["train", "--config", str(second), "--out", str(out), "--allow-config-change", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["step"] == 4
    [entry] = [json.loads(line) for line in (out / CHANGES_FILE).read_text(encoding="utf-8").splitlines()]
    assert entry["step"] == 2
    assert entry["changes"] == [{"field": "config.optimizer.max_grad_norm", "before": 1.0, "after": 0.5}]
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["optimizer"]["max_grad_norm"] == 0.5


def test_resume_refuses_a_changed_cache(config, make_cache, tmp_path):
    run_training(config, str(tmp_path / "run"))
    other = make_cache("b", [[(5 * i + k) % 37 + 2 for i in range(30)] for k in range(20)], 40)
    swapped = replace(config, num_steps=3, data=replace(config.data, caches={"a": other}))
    with pytest.raises(TootsieError, match=r"config\.data\.caches\.a: \"token-cache:[0-9a-f]+\" -> \"token-cache:"):
        run_training(swapped, str(tmp_path / "run"))


def test_warm_start_reports_model_changes_and_stability_tools_turned_off(config, tmp_path, caplog):
    guarded = replace(config, stability=StabilityConfig(clip_update_window=4, skip_bad_steps=True, skip_window=4))
    run_training(guarded, str(tmp_path / "source"))
    warm = replace(
        config,
        num_steps=4,
        model=replace(MODEL, rope_theta=50_000.0),
        optimizer=AdamWConfig(max_grad_norm=None),
        warm_start=WarmStartConfig(checkpoint=str(tmp_path / "source")),
    )
    run_training(warm, str(tmp_path / "warm"))
    report = json.loads((tmp_path / "warm" / WARM_START_REPORT_FILE).read_text(encoding="utf-8"))
    assert report["model_changes"] == [{"field": "model.rope_theta", "before": MODEL.rope_theta, "after": 50_000.0}]
    assert report["stability_turned_off"] == [
        "gradient clipping (optimizer.max_grad_norm)",
        "update-norm clipping (stability.clip_update_window)",
        "bad-step skipping (stability.skip_bad_steps)",
    ]
    assert "turns off update-norm clipping" in caplog.text
    assert "changes model.rope_theta" in caplog.text
