"""Expert parallelism on 8 fake CPU devices: an MoE's loss and gradients match one device's, and its state resumes.

One subprocess (`moe_parallel_runs.py`) does every check; this test reads its results.json.
"""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.processes import communicate
from tests.train.test_sharding import _config as sharding_config
from tootsie.configfile import dump_config
from tootsie.models.moe import MoeConfig
from tootsie.train.config import TrainConfig

RUNS = Path(__file__).with_name("moe_parallel_runs.py")
MODEL = MoeConfig(
    vocab_size=40,
    hidden_dim=16,
    intermediate_dim=16,
    num_layers=2,
    num_heads=2,
    num_kv_heads=2,
    num_experts=8,
    experts_per_token=2,
    capacity_factor=None,
)
"""8 experts, k = 2, dropless: no drop can differ between one device and an expert group."""


def _config(make_cache) -> TrainConfig:
    """test_sharding's tiny run (5 steps, batch 8 × 16 tokens) with the MoE model."""
    return replace(sharding_config(make_cache), model=MODEL)


@pytest.mark.slow
@pytest.mark.timeout(960)
def test_expert_parallel_matches_one_device_and_a_preempted_run_resumes_on_another_mesh(make_cache, tmp_path) -> None:
    (tmp_path / "train.yaml").write_text(dump_config(_config(make_cache)))
    # XLA:CPU ends the process when a collective waits 40 s for a device's thread, which a loaded machine can
    # exceed (seen once at load 12 on 2 cores): allow 10 minutes.
    flags = "--xla_force_host_platform_device_count=8 --xla_cpu_collective_call_terminate_timeout_seconds=600"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}
    process = subprocess.Popen(
        [sys.executable, str(RUNS), str(tmp_path / "train.yaml"), str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = communicate(process, timeout=900)
    assert process.returncode == 0, output[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["devices"] == 8

    # Loss and gradients on expert=8, data=2 × expert=4 and data=8 (each device routing its own rows), dropless,
    # equal one device's within test_sharding's
    # tolerance: they differ only in the order of float sums. So do they with drops (cf 1.0) and the ragged
    # backend on expert=8, where the one expert group holds the whole batch in order.
    assert set(results["gradients"]) == {
        "e8/padded/dropless",
        "d2e4/padded/dropless",
        "d8/padded/dropless",
        "e8/ragged/cf1.0",
    }
    assert results["gradients"]["e8/ragged/cf1.0"]["dropped_fraction"] > 0
    for name, check in results["gradients"].items():
        assert check["shard_map"], f"{name} did not take the expert-parallel path"
        assert check["loss"] <= 1e-5 * check["loss_value"], (name, check)
        assert check["gradients"] <= 1e-4 * check["gradient_scale"] + 1e-7, (name, check)
        assert max(check["metrics"].values()) <= 1e-5, (name, check)

    # A run preempted after step 2 on expert=8: its checkpoint restores bit for bit onto data=2 × expert=4,
    # experts split 4 ways; resumed on the same mesh it is the uninterrupted run to the bit, on the other within
    # the sharding tolerance.
    run = results["training"]
    assert run["restored_step"] == 2 and run["restored_leaves"] > 0 and run["restored_bitwise"]
    assert run["restored_gate_shards"] == 4 and "expert" in run["restored_gate_spec"]
    assert len(run["straight"]) == 5 and run["straight"][-1] < run["straight"][0]
    assert run["same"] == run["straight"] and run["same_state_bitwise"]
    np.testing.assert_allclose(run["other"], run["straight"], rtol=1e-5)
