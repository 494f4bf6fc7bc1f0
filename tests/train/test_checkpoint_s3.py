"""Checkpoints in object storage (a local moto S3 server): written, listed, restored and pruned by URL.

A staged executor step whose function declares `checkpoints` a direct output
gets its final URL as `final_output=`, so the trainer writes checkpoints
straight to the store, and staging leaves a local `checkpoints/` out of its upload.
"""

from pathlib import Path

import jax.numpy as jnp
import numpy as np

from tests.executor.test_object_store import bucket, s3_env  # noqa: F401 - fixtures
from tootsie import storage
from tootsie.executor.manifest import EXECUTOR_FILES
from tootsie.executor.staging import StepCall, call_step
from tootsie.train.checkpoint import (
    STATE_FILE,
    checkpoint_dir,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_temporary,
    read_checkpoint_state,
    read_tensors,
    remove_uncommitted,
    save_checkpoint,
)
from tootsie.train.loading import checkpoint_root

TREES = {"model": {"w": jnp.arange(12.0).reshape(3, 4)}, "opt_state": ({"count": jnp.asarray(3, jnp.int32)},)}


def test_checkpoints_round_trip_through_an_s3_url_and_only_committed_ones_count(bucket: str) -> None:  # noqa: F811
    root = f"{bucket}/run/checkpoints"
    for step, kind in [(1, "temporary"), (2, "temporary"), (3, "permanent")]:
        assert save_checkpoint(root, step, TREES, {"kind": kind}) == f"{root}/step-00000{step}"
    restored, state = load_checkpoint(latest_checkpoint(root), TREES)
    assert state["step"] == 3 and np.array_equal(restored["model"]["w"], TREES["model"]["w"])
    assert read_tensors(checkpoint_dir(root, 1), "opt_state") == {"[0]['count']": np.asarray(3, np.int32)}
    storage.remove(f"{root}/step-000003/{STATE_FILE}")  # step 3's arrays stay, its commit marker goes
    assert [step for step, _ in list_checkpoints(root)] == [1, 2]
    assert remove_uncommitted(root) == [3]
    assert not any(name.startswith("step-000003/") for name in storage.list_tree(root))
    prune_temporary(root)
    assert [step for step, _ in list_checkpoints(root)] == [2]
    assert read_checkpoint_state(checkpoint_dir(root, 2))["kind"] == "temporary"


def test_a_staged_step_gets_its_final_url_and_its_local_checkpoints_are_not_uploaded(bucket, tmp_path) -> None:  # noqa: F811
    output = f"{bucket}/runs/train-abc"
    seen = []

    def fn(config: object, workdir: str, final_output: str) -> None:
        seen.append((final_output, str(checkpoint_root(workdir, final_output)), str(checkpoint_root(workdir))))
        (Path(workdir) / "checkpoints").mkdir()
        (Path(workdir) / "checkpoints" / "stray.txt").write_text("local")
        (Path(workdir) / "metrics.jsonl").write_text("{}\n")

    call = StepCall("train", fn, None, output, str(tmp_path / "staging"), direct=("checkpoints",))
    assert call_step(call) is None
    assert seen == [(output, f"{output}/checkpoints", str(tmp_path / "staging" / "checkpoints"))]
    assert [name for name in storage.list_tree(output) if name not in EXECUTOR_FILES] == ["metrics.jsonl"]
