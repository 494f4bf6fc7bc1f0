"""Damage on an s3:// prefix (a local moto server): listed through the store, moved aside object by object."""

from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")

from tootsie import storage
from tootsie.executor import Status, experiment_status, load_experiment, run_experiment  # noqa: E402

from .helpers import executions, write_experiment  # noqa: E402
from .test_damage import DIAMOND, TRUNCATED  # noqa: E402
from .test_object_store import bucket, s3_env  # noqa: E402, F401 - fixtures

pytestmark = pytest.mark.slow


def test_damage_in_object_storage_is_reported_moved_aside_and_rerun(tmp_path: Path, bucket: str) -> None:  # noqa: F811
    path = write_experiment(tmp_path, DIAMOND)
    prefix = f"{bucket}/runs"
    first = run_experiment(load_experiment(path), prefix)
    assert first.ok
    a = first.steps[0].output_path
    storage.write_bytes(storage.join(a, "cache", "tokens.npy"), b"x" * 10)
    storage.remove(storage.join(a, "shard.bin"))

    status = {s.name: s for s in experiment_status(load_experiment(path), prefix).steps}
    assert status["exp/a"].status is Status.DAMAGED
    assert status["exp/a"].damage == (TRUNCATED, "shard.bin: missing")
    assert status["exp/c"].status is Status.SUCCESS

    second = {s.name: s for s in run_experiment(load_experiment(path), prefix).steps}
    assert executions(tmp_path) == ["a", "b", "d", "c", "a", "b", "d"]
    aside = second["exp/a"].moved_to
    assert aside is not None and aside.startswith(f"{a}.damaged-")
    assert storage.read_bytes(storage.join(aside, "cache", "tokens.npy")) == b"x" * 10
    assert storage.read_json(storage.join(aside, ".executor_status.json"))["status"] == "SUCCESS"
    assert len(storage.read_bytes(storage.join(a, "cache", "tokens.npy")) or b"") == 4096
    assert second["exp/a"].manifest == first.steps[0].manifest
    assert ".stale-" in (second["exp/b"].moved_to or "") and second["exp/c"].reason.startswith("skip")
    assert all(s.status is Status.SUCCESS for s in experiment_status(load_experiment(path), prefix).steps)
