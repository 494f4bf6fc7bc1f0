"""The shard engine retries failures, survives crashed workers, resumes, and enforces its budget."""

import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, merge_counts, shutdown_workers
from tootsie.errors import TootsieError


@dataclass(frozen=True)
class Behaviour:
    """How many times each shard fails before succeeding, and how (raise or kill its process)."""

    failures: dict[str, int]
    mode: str = "raise"


def flaky_shard(task: ShardTask, behaviour: Behaviour) -> dict[str, int]:
    """Count attempts in a file; fail (raise or SIGKILL self) until the configured number is reached."""
    attempts_file = Path(task.output_dir) / f"{task.name}.attempts"
    attempts = int(attempts_file.read_text()) + 1 if attempts_file.exists() else 1
    attempts_file.write_text(str(attempts))
    if attempts <= behaviour.failures.get(task.name, 0):
        if behaviour.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise ValueError(f"bad record in {task.name}")
    return {"docs": int(task.inputs[0]), "rejected": {"empty": 1}}


def _tasks(tmp_path: Path, n: int = 4) -> list[ShardTask]:
    return [ShardTask(name=f"part-{i:05d}", inputs=(str(10 * i),), output_dir=str(tmp_path)) for i in range(n)]


@pytest.mark.parametrize("workers", [1, 2])
def test_failures_are_retried_and_stats_kept_in_task_order(tmp_path, workers: int) -> None:
    result = map_shards(
        flaky_shard,
        Behaviour({"part-00001": 2}),
        _tasks(tmp_path),
        tmp_path / "done",
        EngineConfig(workers=workers, retries=2, progress=False),
    )
    assert list(result.stats) == [f"part-{i:05d}" for i in range(4)] and not result.failed
    assert merge_counts(list(result.stats.values())) == {"docs": 60, "rejected": {"empty": 4}}


def test_a_worker_killed_mid_shard_is_retried(tmp_path) -> None:
    result = map_shards(
        flaky_shard,
        Behaviour({"part-00002": 1}, mode="kill"),
        _tasks(tmp_path),
        tmp_path / "done",
        EngineConfig(workers=2, retries=1, progress=False),
    )
    assert len(result.stats) == 4 and not result.failed


def test_failures_within_budget_are_reported_not_fatal(tmp_path) -> None:
    result = map_shards(
        flaky_shard,
        Behaviour({"part-00003": 9}),
        _tasks(tmp_path),
        tmp_path / "done",
        EngineConfig(workers=1, retries=1, max_failed_shards=1, progress=False),
    )
    assert list(result.failed) == ["part-00003"] and "bad record in part-00003" in result.failed["part-00003"]
    assert len(result.stats) == 3


def test_failures_over_budget_fail_after_the_rest_finished(tmp_path) -> None:
    with pytest.raises(TootsieError, match="1 of 4 shards failed .*part-00000.*rerun"):
        map_shards(
            flaky_shard,
            Behaviour({"part-00000": 9}),
            _tasks(tmp_path),
            tmp_path / "done",
            EngineConfig(workers=1, retries=0, progress=False),
        )
    assert sorted(p.name for p in (tmp_path / "done").glob("*.json")) == [
        "part-00001.json",
        "part-00002.json",
        "part-00003.json",
    ]


def test_rerun_skips_finished_shards(tmp_path) -> None:
    engine = EngineConfig(workers=1, progress=False)
    map_shards(flaky_shard, Behaviour({}), _tasks(tmp_path), tmp_path / "done", engine)
    again = map_shards(flaky_shard, Behaviour({}), _tasks(tmp_path), tmp_path / "done", engine)
    assert again.skipped == 4
    assert all((tmp_path / f"part-{i:05d}.attempts").read_text() == "1" for i in range(4))


def _worker_pid(task: ShardTask, config: None) -> dict[str, int]:
    return {"pid": os.getpid()}


def test_maps_share_their_worker_processes_and_a_broken_pool_is_replaced(tmp_path, monkeypatch) -> None:
    engine = EngineConfig(workers=2, retries=1, progress=False)

    def pids(name: str) -> set[int]:
        result = map_shards(_worker_pid, None, _tasks(tmp_path, 4), tmp_path / name, engine)
        return {stats["pid"] for stats in result.stats.values()}

    first = pids("first")
    assert first and pids("second") <= first and os.getpid() not in first
    map_shards(flaky_shard, Behaviour({"part-00001": 1}, mode="kill"), _tasks(tmp_path), tmp_path / "kill", engine)
    assert not pids("after") & first  # the pool a killed worker broke was replaced by a fresh one

    after = pids("again")
    monkeypatch.setenv("TOOTSIE_ENGINE_TEST", "1")
    assert not pids("new-env") & after  # workers that started under another environment are not reused
    last = pids("last")
    shutdown_workers()
    assert not pids("after-shutdown") & last
    shutdown_workers()
