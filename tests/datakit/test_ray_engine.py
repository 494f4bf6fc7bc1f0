"""Shards as Ray tasks: the local failure budget, a killed worker retried, and the demo's data byte for byte."""

import gzip
import importlib.util
import json
import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tootsie.datakit.engine import EngineConfig, ShardTask, map_shards, shard_backend
from tootsie.datakit.normalize import NormalizeConfig, normalize_file
from tootsie.errors import TootsieError
from tootsie.executor import build_graph, run_experiment

DEMO_FILE = Path(__file__).resolve().parents[2] / "experiments" / "demo.py"
LOCAL = EngineConfig(workers=1, progress=False, backend="local")
ON_RAY = EngineConfig(progress=False, backend="ray")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """One small local Ray for the module (startup takes seconds)."""
    ray = pytest.importorskip("ray", reason="the Ray backend is an extra: pip install 'tootsie[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@dataclass(frozen=True)
class Behaviour:
    """Failed attempts before each shard succeeds; shards that raise TootsieError (bad input) instead."""

    failures: dict[str, int]
    fatal: tuple[str, ...] = ()


def flaky_shard(task: ShardTask, behaviour: Behaviour) -> dict[str, int]:
    """Count attempts in a file; raise TootsieError, or ValueError until the configured failures are used up."""
    attempts_file = Path(task.output_dir) / f"{task.name}.attempts"
    attempts = int(attempts_file.read_text()) + 1 if attempts_file.exists() else 1
    attempts_file.write_text(str(attempts))
    if task.name in behaviour.fatal:
        raise TootsieError(f"bad input in {task.name}")
    if attempts <= behaviour.failures.get(task.name, 0):
        raise ValueError(f"bad record in {task.name}")
    return {"docs": int(task.inputs[0])}


@dataclass(frozen=True)
class KillOnce:
    """Normalize, but SIGKILL the worker after shard `shard` wrote its output, the first time only (`marker`)."""

    config: NormalizeConfig
    shard: str
    marker: str


def normalize_then_die_once(task: ShardTask, plan: KillOnce) -> dict[str, object]:
    """The real normalize map; the chosen shard's first attempt dies before returning its stats."""
    stats = normalize_file(task, plan.config)
    if task.name == plan.shard and not os.path.exists(plan.marker):
        Path(plan.marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return stats


def default_backend() -> str:
    """The shard backend an EngineConfig left at its default resolves to in the calling process."""
    return shard_backend(EngineConfig(progress=False))


def _tasks(root: Path, n: int = 4) -> list[ShardTask]:
    root.mkdir(parents=True, exist_ok=True)
    return [ShardTask(name=f"part-{i:05d}", inputs=(str(10 * i),), output_dir=str(root)) for i in range(n)]


def _files(root: Path) -> dict[str, bytes]:
    """Every output file under `root` (gzip decompressed: its header stamps a time), with `root` itself masked.

    Executor files (status, lease, metadata, log: times, hosts, pids) and the run
    records under `experiments/` are left out.
    """
    files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_dir() or path.name.startswith(".executor") or relative.parts[0] == "experiments":
            continue
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        files[relative.as_posix()] = data.replace(str(root).encode(), b"<prefix>")
    return files


def test_default_backend_follows_the_process(ray_cluster: Any) -> None:
    assert default_backend() == "local"  # the driver, though connected to Ray
    assert ray_cluster.get(ray_cluster.remote(default_backend).remote()) == "ray"
    with pytest.raises(ValueError, match="backend must be one of"):
        EngineConfig(backend="spark")


def test_ray_keeps_the_local_retries_and_failure_budget(tmp_path: Path, ray_cluster: Any) -> None:
    behaviour = Behaviour({"part-00001": 2, "part-00003": 9}, fatal=("part-00002",))
    results, attempts = {}, {}
    for name, engine in (("local", LOCAL), ("ray", ON_RAY)):
        tasks = _tasks(tmp_path / name)
        budget = EngineConfig(
            workers=engine.workers, progress=False, backend=engine.backend, retries=2, max_failed_shards=2
        )
        results[name] = map_shards(flaky_shard, behaviour, tasks, tmp_path / name / "done", budget)
        attempts[name] = {t.name: (tmp_path / name / f"{t.name}.attempts").read_text() for t in tasks}
    assert (
        attempts["ray"]
        == attempts["local"]
        == {"part-00000": "1", "part-00001": "3", "part-00002": "1", "part-00003": "3"}
    )
    assert results["ray"].stats == results["local"].stats == {"part-00000": {"docs": 0}, "part-00001": {"docs": 10}}
    assert results["ray"].failed == results["local"].failed
    assert results["ray"].failed["part-00002"] == "tootsie.errors.TootsieError: bad input in part-00002"

    over = EngineConfig(progress=False, backend="ray", retries=0, max_failed_shards=1)
    with pytest.raises(TootsieError, match="3 of 4 shards failed \\(budget 1\\)"):
        map_shards(flaky_shard, behaviour, _tasks(tmp_path / "over"), tmp_path / "over" / "done", over)
    assert [p.name for p in (tmp_path / "over" / "done").glob("*.json")] == ["part-00000.json"]


def test_a_ray_worker_killed_mid_shard_is_retried_and_the_output_is_identical(tmp_path: Path, ray_cluster: Any) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for i in range(4):
        lines = [json.dumps({"id": f"{i}-{j}", "text": f"document {j} of file {i} " * (j + 1)}) for j in range(20)]
        (inputs / f"docs-{i}.jsonl").write_text("\n".join(lines) + "\n")
    config = NormalizeConfig(inputs=(str(inputs),), engine=LOCAL)
    plan = KillOnce(config, shard="part-00002", marker=str(tmp_path / "killed"))
    outputs = {}
    for name, engine, fn, argument in (
        ("local", LOCAL, normalize_file, config),
        ("ray", ON_RAY, normalize_then_die_once, plan),
    ):
        root = tmp_path / name
        tasks = [
            ShardTask(f"part-{i:05d}", (str(inputs / f"docs-{i}.jsonl"),), str(root / f"part-{i:05d}"))
            for i in range(4)
        ]
        results = map_shards(
            fn, argument, tasks, root / "done", EngineConfig(progress=False, backend=engine.backend, retries=1)
        )
        assert not results.failed and len(results.stats) == 4
        outputs[name] = _files(root)
    assert (tmp_path / "killed").exists()  # the worker really died once
    assert "part-00002/chunk-00000.parquet" in outputs["ray"] and "done/part-00002.json" in outputs["ray"]
    assert outputs["ray"] == outputs["local"]


@pytest.mark.slow
def test_demo_data_steps_on_ray_match_the_local_backend(tmp_path: Path, ray_cluster: Any) -> None:
    spec = importlib.util.spec_from_file_location("demo_experiment_for_ray_tests", DEMO_FILE)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    _, caches = demo.build_data_steps(demo.TINY)
    steps = list(caches.values())
    local = run_experiment(steps, tmp_path / "local")
    assert local.ok, [(s.name, s.error) for s in local.steps]
    # The raw corpus is read from this interpreter's stdlib (not a sharded stage, and the slowest step): shared.
    raw = next(node for node in build_graph(steps, tmp_path / "local").nodes if node.step.name == "demo/raw/stdlib")
    shutil.copytree(raw.output_path, Path(raw.output_path.replace(str(tmp_path / "local"), str(tmp_path / "ray"))))
    on_ray = run_experiment(steps, tmp_path / "ray", backend="ray")
    assert on_ray.ok, [(s.name, s.error) for s in on_ray.steps]
    assert [s.name for s in on_ray.steps if not s.reason.startswith("run")] == ["demo/raw/stdlib"]  # the rest ran
    assert len(on_ray.steps) > 20  # every datakit stage of both sources, the web source, tokenizer and caches
    local_files, ray_files = _files(tmp_path / "local"), _files(tmp_path / "ray")
    assert any(name.endswith("tokens.bin") for name in ray_files) and any(
        name.endswith(".parquet") for name in ray_files
    )
    assert ray_files.keys() == local_files.keys()
    assert [name for name in ray_files if ray_files[name] != local_files[name]] == []
