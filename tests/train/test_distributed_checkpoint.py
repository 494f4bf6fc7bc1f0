"""Two processes of 4 fake devices each checkpoint one sharded state: each writes only its own shards.

Each process's memory grows by no more than its shards plus a bounded buffer, and together they write the whole state.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.processes import communicate
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.models.llama import LlamaConfig
from tootsie.train.checkpoint import latest_checkpoint, load_checkpoint
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.loading import init_model
from tootsie.train.schedule import WSDConfig
from tootsie.train.sharding import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID, DistributedConfig, MeshConfig
from tootsie.train.state import abstract_state, build_optimizer

HARNESS = Path(__file__).with_name("distributed_checkpoint.py")
PROCESSES = 2
BUFFER_BYTES = 32 * 2**20
"""What a process may hold during a checkpoint beyond its own shards (TensorStore's buffers, metadata)."""
METADATA_BYTES = 64 * 2**10
"""What a process may write beyond its shards' bytes (zarr.json per array, the state record)."""


def _config(cache: str) -> TrainConfig:
    """A 4-layer model of 8.4M parameters: 134 MB of params, Adam moments and EMA, sharded FSDP over 8 devices."""
    return TrainConfig(
        model=LlamaConfig(
            vocab_size=8192, hidden_dim=256, intermediate_dim=1024, num_layers=4, num_heads=4, num_kv_heads=4
        ),
        data=MixtureConfig(
            caches={"a": cache},
            stages=(MixtureStage(0, {"a": 1.0}),),
            seq_len=16,
            batch_schedule=BatchSchedule.constant(8),
        ),
        num_steps=4,
        schedule=WSDConfig(peak_lr=1e-3, warmup_steps=1, decay_steps=1, total_steps=4),
        checkpoints=CheckpointConfig(every_steps=100, every_minutes=None),
        mesh=MeshConfig(data=1, fsdp=8),
        distributed=DistributedConfig(),
    )


def free_port() -> int:
    """A TCP port of 127.0.0.1 free right now (for the jax.distributed coordinator)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_each_process_writes_only_its_shards_and_grows_by_at_most_its_shards_plus_a_buffer(
    tmp_path, make_cache
) -> None:
    config = _config(make_cache("a", [[(5 * i + k) % 8000 + 2 for i in range(40)] for k in range(20)], 8192))
    (tmp_path / "train.yaml").write_text(dump_config(config))
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip(),
        ENV_COORDINATOR: f"127.0.0.1:{free_port()}",
        ENV_NUM_PROCESSES: str(PROCESSES),
    }
    processes = [
        subprocess.Popen(
            [sys.executable, str(HARNESS), str(tmp_path / "train.yaml"), str(tmp_path / "run")],
            env={**env, ENV_PROCESS_ID: str(index)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(PROCESSES)
    ]
    outputs = [communicate(process, timeout=180) for process in processes]
    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr[-3000:]
    figures = [json.loads(stdout.splitlines()[-1]) for stdout, _ in outputs]
    for figure in figures:
        print(json.dumps(figure))

    state_bytes = figures[0]["state_bytes"]
    assert state_bytes > 100 * 10**6  # big enough that the shards, not the buffers, dominate
    assert sum(f["own_shard_bytes"] for f in figures) == state_bytes  # the shards partition the state
    for f in figures:
        assert f["own_shard_bytes"] < 0.51 * state_bytes  # FSDP over both processes: about half each
        assert f["own_shard_bytes"] <= f["written_bytes"] <= f["own_shard_bytes"] + METADATA_BYTES, f
        assert f["rss_growth"] <= f["own_shard_bytes"] + BUFFER_BYTES, f  # a gather to process 0 would need 134 MB

    optimizer = build_optimizer(config)
    params, _, opt_state = abstract_state(config, optimizer)
    templates = {"model": params, "opt_state": opt_state, "ema": params}
    restored, record = load_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints"), templates)
    fresh = eqx.filter(eqx.filter_jit(lambda: init_model(config))(), eqx.is_array)  # jitted, as the trainer does
    expected = jax.tree_util.tree_map(
        lambda leaf: leaf + jnp.ones((), leaf.dtype),
        {"model": fresh, "opt_state": optimizer.init(fresh), "ema": fresh},
    )
    assert record["step"] == 0
    for name in templates:  # the two halves written by two processes make up the whole state, exactly
        for got, want in zip(
            jax.tree_util.tree_leaves(restored[name]), jax.tree_util.tree_leaves(expected[name]), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
