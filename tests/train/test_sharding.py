"""Sharded training: mesh sizes, shardings by logical axis, and 8 fake CPU devices matching one device.

The match holds across meshes and resumes.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
from jax.sharding import AbstractMesh, AxisType, PartitionSpec

from tests.processes import communicate
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import is_tensor, latest_checkpoint, load_checkpoint
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.sharding import MESH_AXES, MeshConfig, check_batch_sizes, make_layout, partition_specs
from tootsie.train.stability import StabilityConfig
from tootsie.train.state import abstract_state, build_optimizer

MODEL = LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=2)
RUNS = Path(__file__).with_name("sharded_runs.py")


def _abstract_mesh(data: int, fsdp: int, tensor: int, expert: int = 1) -> AbstractMesh:
    return AbstractMesh((data, expert, fsdp, tensor), MESH_AXES, axis_types=(AxisType.Auto,) * 4)


def test_mesh_sizes_resolve_and_misfits_say_how_to_fix() -> None:
    assert MeshConfig().shape(8) == (8, 1, 1, 1)
    assert MeshConfig(data=2, fsdp=-1).shape(8) == (2, 1, 4, 1)
    assert MeshConfig(data=-1, fsdp=2, tensor=2).shape(8) == (2, 1, 2, 2)
    assert MeshConfig(data=2, expert=-1).shape(8) == (2, 4, 1, 1)
    with pytest.raises(TootsieError, match="set one axis to -1"):
        MeshConfig(data=2, fsdp=2).shape(8)
    with pytest.raises(TootsieError, match="does not fit the 8 devices"):
        MeshConfig(data=-1, fsdp=3).shape(8)
    with pytest.raises(ValueError, match="at most one mesh axis may be -1"):
        MeshConfig(data=-1, fsdp=-1)
    with pytest.raises(ValueError, match="positive or -1"):
        MeshConfig(fsdp=0)


def test_specs_put_hidden_on_fsdp_the_other_matrix_axis_on_tensor_and_replicate_what_does_not_divide() -> None:
    params = eqx.filter(eqx.filter_eval_shape(LlamaModel, MODEL, key=jax.random.PRNGKey(0)), is_tensor)
    axes = params.logical_axes()
    assert axes[".layers.attn.wq"] == ("layers", "hidden", "qdim") and axes[".embed"] == ("vocab", "hidden")
    shapes = {name: leaf.shape for name, leaf in zip(axes, jax.tree_util.tree_leaves(params))}
    specs = partition_specs(axes, shapes, {"data": 1, "fsdp": 4, "tensor": 2})
    assert specs[".layers.attn.wq"] == PartitionSpec(None, "fsdp", "tensor")
    assert specs[".layers.mlp.w_down"] == PartitionSpec(None, "tensor", "fsdp")
    assert specs[".embed"] == PartitionSpec("tensor", "fsdp") and specs[".lm_head"] == PartitionSpec("fsdp", "tensor")
    assert specs[".final_norm.weight"] == PartitionSpec(None) and specs[".layers.attn_norm.weight"] == PartitionSpec(
        None, None
    )
    odd = partition_specs(axes, shapes, {"data": 1, "fsdp": 3, "tensor": 1})  # 16 is not divisible by 3
    assert all(spec == PartitionSpec(*[None] * len(spec)) for spec in odd.values())


def test_optimizer_moments_take_their_parameter_sharding_and_statistics_are_replicated(make_cache) -> None:
    config = _config(make_cache)
    params, _, opt_state = abstract_state(config, build_optimizer(config))
    layout = make_layout(_abstract_mesh(2, 4, 1), params, opt_state)
    named = {
        jax.tree_util.keystr(path): sharding.spec
        for path, sharding in jax.tree_util.tree_flatten_with_path(layout.opt_state)[0]
    }
    assert layout.params.layers.attn.wq.spec == PartitionSpec(None, "fsdp", None)
    moments = {
        name: spec for name, spec in named.items() if name.endswith((".mu.layers.attn.wq", ".nu.layers.attn.wq"))
    }
    assert len(moments) == 2 and set(moments.values()) == {PartitionSpec(None, "fsdp", None)}
    assert named[".inner_state[1].history"] == PartitionSpec() and named[".losses"] == PartitionSpec()
    assert layout.batch.spec == PartitionSpec(("data", "expert", "fsdp"))
    with pytest.raises(TootsieError, match="do not split over data × expert × fsdp = 8"):
        check_batch_sizes(BatchSchedule(((0, 8), (3, 12))), _abstract_mesh(2, 4, 1))


def _config(make_cache) -> TrainConfig:
    caches = {
        "a": make_cache("a", [[(3 * i + k) % 37 + 2 for i in range(30)] for k in range(40)], 40),
        "b": make_cache("b", [[(7 * i + k) % 31 + 3 for i in range(25)] for k in range(40)], 40),
    }
    data = MixtureConfig(
        caches=caches,
        stages=(MixtureStage(0, {"a": 0.7, "b": 0.3}),),
        seq_len=16,
        batch_schedule=BatchSchedule.constant(8),
    )
    return TrainConfig(
        model=MODEL,
        data=data,
        num_steps=5,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=2, decay_steps=2, total_steps=5),
        stability=StabilityConfig(clip_update_window=4, skip_bad_steps=True, skip_window=4),
        checkpoints=CheckpointConfig(every_steps=100, every_minutes=None),
    )


def _losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_eight_fake_devices_match_one_device_across_meshes_and_a_resume_onto_another_mesh(make_cache, tmp_path) -> None:
    config = _config(make_cache)
    (tmp_path / "train.yaml").write_text(dump_config(config))
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8".strip(),
    }
    runs = [
        f"{tmp_path / 'd8'}:8:1:1:5",
        f"{tmp_path / 'd2f4'}:2:4:1:3",
        f"{tmp_path / 'd2f4'}:2:2:2:5",
    ]  # the last resumes step 3 on data × fsdp × tensor = 2 × 2 × 2
    sharded = subprocess.Popen(
        [sys.executable, str(RUNS), str(tmp_path / "train.yaml"), *runs],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    run_training(
        config, str(tmp_path / "one")
    )  # this process has one CPU device; it trains while the 8-device process does
    output, _ = communicate(sharded, timeout=600)
    assert sharded.returncode == 0, output[-3000:]

    one = _losses(tmp_path / "one")
    assert len(one) == 5 and one[-1] < one[0]
    np.testing.assert_allclose(_losses(tmp_path / "d8"), one, rtol=1e-5)
    np.testing.assert_allclose(_losses(tmp_path / "d2f4"), one, rtol=1e-5)
    template = {"model": abstract_state(config, build_optimizer(config))[0]}
    reference = load_checkpoint(latest_checkpoint(tmp_path / "one" / "checkpoints"), template)[0]["model"]
    for out in ("d8", "d2f4"):
        final, state = load_checkpoint(latest_checkpoint(tmp_path / out / "checkpoints"), template)
        assert state["step"] == 5
        # Adam moves an element with a tiny, noisy gradient by up to ±lr per step whatever the gradient's size, so sums
        # reordered across devices can shift such an element by a small fraction of lr = 1e-2 (8e-6 seen): atol 5e-5.
        for a, b in zip(jax.tree_util.tree_leaves(final["model"]), jax.tree_util.tree_leaves(reference), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=5e-5)
