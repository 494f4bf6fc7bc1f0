"""Trackers and profiling in `TrainConfig`: unhashed, written in config files by kind, and fed by the training loop."""

import dataclasses
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from tootsie.configfile import dump_config, load_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.executor import Step, step_hash
from tootsie.models.llama import LlamaConfig
from tootsie.monitor.spikes import SpikeConfig
from tootsie.monitor.trackers import TensorBoardConfig, WandbConfig
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.rewind import RewindConfig
from tootsie.train.schedule import WSDConfig


@pytest.fixture
def config(make_cache) -> TrainConfig:
    documents = [[int(v) for v in (np.arange(30) * 3 + k) % 37 + 2] for k in range(20)]
    data = MixtureConfig(
        caches={"p": make_cache("p", documents, 40)},
        stages=(MixtureStage(0, {"p": 1.0}),),
        seq_len=16,
        batch_schedule=BatchSchedule.constant(2),
    )
    return TrainConfig(
        model=LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1),
        data=data,
        num_steps=3,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=1, total_steps=3),
        checkpoints=CheckpointConfig(every_steps=10, every_minutes=None),
    )


def _noop(config: TrainConfig, output_path: str) -> None:
    """A step function (only hashed here)."""


def test_trackers_and_profiling_leave_the_hash_alone_and_rewind_changes_it(config: TrainConfig) -> None:
    logged = dataclasses.replace(config, trackers=(WandbConfig(project="x"), TensorBoardConfig()), profile_steps=(1, 2))
    rewinding = dataclasses.replace(config, rewind=RewindConfig())
    hashes = [step_hash(Step("train", _noop, c)) for c in (config, logged, rewinding)]
    assert hashes[0] == hashes[1] != hashes[2]


def test_trackers_profile_and_rewind_round_trip_through_a_config_file(config: TrainConfig, tmp_path: Path) -> None:
    full = dataclasses.replace(
        config,
        trackers=(WandbConfig(project="p", name="n", tags=("a",), mode="offline"), TensorBoardConfig(logdir="tb")),
        profile_steps=(1, 2),
        rewind=RewindConfig(spikes=SpikeConfig(window=20, horizon=10), max_rewinds=1),
    )
    text = dump_config(full)
    assert "kind: wandb" in text and "kind: tensorboard" in text
    (tmp_path / "train.yaml").write_text(text)
    assert load_config(tmp_path / "train.yaml", TrainConfig, root="train") == full
    (tmp_path / "bad.yaml").write_text(text.replace("kind: tensorboard", "kind: neptune"))
    with pytest.raises(TootsieError, match="unknown kind 'neptune'"):
        load_config(tmp_path / "bad.yaml", TrainConfig, root="train")


def test_a_tracker_kind_may_appear_once(config: TrainConfig) -> None:
    with pytest.raises(ValueError, match="twice"):
        dataclasses.replace(config, trackers=(TensorBoardConfig(), TensorBoardConfig(logdir="other")))


def test_training_feeds_tensorboard_the_same_losses_as_the_jsonl_log(config: TrainConfig, tmp_path: Path) -> None:
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
    run_training(dataclasses.replace(config, trackers=(TensorBoardConfig(),)), str(tmp_path / "run"))
    jsonl = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    (events_file,) = (tmp_path / "run" / "tensorboard").iterdir()
    data, position, losses, phases = events_file.read_bytes(), 0, {}, []
    while position < len(data):
        (length,) = struct.unpack("<Q", data[position : position + 8])
        event = event_pb2.Event()
        event.ParseFromString(data[position + 12 : position + 12 + length])
        position += 16 + length
        for value in event.summary.value:
            if value.tag == "loss":
                losses[event.step] = value.simple_value
            if value.tag == "phase/text_summary":
                phases.append((event.step, value.tensor.string_val[0].decode()))
    assert losses == {r["step"]: pytest.approx(r["loss"], rel=1e-6) for r in jsonl}
    assert phases == [(0, "warmup"), (1, "stable"), (2, "decay")]
