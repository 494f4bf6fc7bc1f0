"""`profile_steps`: a JAX profiler trace of steps [a, b) under `<out>/profile/`, stopped even when training fails."""

import gzip
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.state import TrainState


def tiny_config(make_cache) -> TrainConfig:
    """A 3-step run of a one-layer model on one small cache, profiling steps [1, 3) (test_callbacks.py reuses it)."""
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
        profile_steps=(1, 3),
    )


@pytest.fixture
def config(make_cache) -> TrainConfig:
    return tiny_config(make_cache)


def _traced_steps(out: Path) -> tuple[list[Path], set[int]]:
    """The trace files jax wrote, and the step numbers of the `train` step annotations in the Perfetto trace."""
    files = sorted((out / "profile" / "plugins" / "profile").glob("*/*"))
    (perfetto,) = [f for f in files if f.name == "perfetto_trace.json.gz"]
    events = json.loads(gzip.decompress(perfetto.read_bytes()))["traceEvents"]
    return files, {
        int(e["args"]["step_num"]) for e in events if e.get("name") == "train" and "step_num" in e.get("args", {})
    }


def test_the_window_is_traced_for_perfetto(config: TrainConfig, tmp_path: Path) -> None:
    run_training(config, str(tmp_path / "run"))
    files, steps = _traced_steps(tmp_path / "run")
    assert {f.suffix for f in files} >= {".gz", ".pb"}  # perfetto_trace.json.gz, <host>.trace.json.gz, <host>.xplane.pb
    assert steps == {1, 2}  # step 0 (and its compilation) is outside the window


def test_the_trace_stops_when_training_fails_inside_the_window(config: TrainConfig, tmp_path: Path) -> None:
    def failing(state: TrainState) -> dict[str, float]:
        if state.step == 2:
            raise RuntimeError("boom inside the profiled window")
        return {}

    with pytest.raises(RuntimeError, match="boom"):
        run_training(config, str(tmp_path / "run"), hooks=[failing])
    _, steps = _traced_steps(tmp_path / "run")
    assert steps == {1}
    jax.profiler.start_trace(str(tmp_path / "again"))  # raises if the failed run had left its trace running
    jax.profiler.stop_trace()


def test_profile_steps_must_be_an_ordered_window(config: TrainConfig) -> None:
    with pytest.raises(ValueError, match="profile_steps"):
        TrainConfig(**{**config.__dict__, "profile_steps": (3, 3)})
