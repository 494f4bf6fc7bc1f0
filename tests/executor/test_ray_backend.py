"""The Ray backend: the local runner's semantics, independent steps at once, declared resources, crashed workers."""

import dataclasses
import json
import math
import os
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tootsie.errors import TootsieError
from tootsie.executor import Resources, RunReport, Status, Step, build_graph, load_experiment, run_experiment, step_hash
from tootsie.executor.lease import FileLease, Heartbeat, LeaseSettings
from tootsie.executor.status import write_status

EXPERIMENT = '''
import dataclasses
import json
import os
import signal
import time

import ray

from tootsie.configfile import unhashed

from tootsie.executor import Resources, Step

LOG = {log!r}


@dataclasses.dataclass(frozen=True)
class Cfg:
    label: str
    inputs: tuple = ()
    action: str = "ok"
    sleep: float = unhashed(default=0.0)


def work(config, output_path):
    """Log the label; fail, crash the worker, or sleep and write span.json (pid, times, Ray resources)."""
    start = time.time()
    with open(LOG, "a") as handle:
        handle.write(config.label + "\\n")
    if config.action == "fail":
        raise ValueError(f"bad {{config.label}}")
    if config.action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    for path in config.inputs:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
    time.sleep(config.sleep)
    span = {{
        "pid": os.getpid(),
        "start": start,
        "end": time.time(),
        "resources": ray.get_runtime_context().get_assigned_resources(),
    }}
    with open(os.path.join(output_path, "span.json"), "w") as handle:
        json.dump(span, handle)
'''

GRAPH = """
a = Step("exp/a", work, Cfg("a", sleep=1.5))
b = Step("exp/b", work, Cfg("b", inputs=(a.ref("span.json"),)))
c = Step("exp/c", work, Cfg("c", sleep=1.5))
d = Step("exp/d", work, Cfg("d", action="fail"))
e = Step("exp/e", work, Cfg("e", inputs=(d.ref(),)))
f = Step("exp/f", work, Cfg("f", action="crash"))
g = Step("exp/g", work, Cfg("g"), resources=Resources(cpus=2, memory_gb=0.25))
STEPS = [b, c, e, f, g]
"""

PAIR = """
x = Step("exp/x", work, Cfg("x"))
y = Step("exp/y", work, Cfg("y"))
STEPS = [x, y]
"""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """One small local Ray for the module (startup takes seconds)."""
    ray = pytest.importorskip("ray", reason="the Ray backend is an extra: pip install 'tootsie[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.py"
    path.write_text(EXPERIMENT.format(log=str(tmp_path / "runs.log")) + textwrap.dedent(body))
    return path


def runs(tmp_path: Path) -> list[str]:
    log = tmp_path / "runs.log"
    return log.read_text().split() if log.exists() else []


def by_name(report: RunReport) -> dict[str, Any]:
    return {step.name: step for step in report.steps}


def span(step: Any) -> dict[str, Any]:
    return json.loads((Path(step.output_path) / "span.json").read_text())


@dataclasses.dataclass(frozen=True)
class Plain:
    n: int = 1


def noop(config: Plain, output_path: str) -> None:
    """A step function that writes nothing."""


def test_resources_are_validated_and_never_change_the_hash() -> None:
    plain = Step("exp/s", noop, Plain())
    big = Step("exp/s", noop, Plain(), resources=Resources(cpus=8, gpus=1, memory_gb=64))
    assert step_hash(plain) == step_hash(big) != step_hash(Step("exp/s", noop, Plain(n=2)))
    for bad in ({"cpus": -1}, {"gpus": math.nan}, {"memory_gb": 0}, {"cpus": "2"}):
        with pytest.raises(ValueError, match="Resources"):
            Resources(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="resources must be"):
        Step("exp/s", noop, Plain(), resources={"cpus": 2})  # type: ignore[arg-type]


def test_unknown_backend_or_address_without_ray_is_an_error(tmp_path: Path) -> None:
    steps = load_experiment(write(tmp_path, PAIR))
    with pytest.raises(TootsieError, match="backend 'spark' is not one of local, ray"):
        run_experiment(steps, tmp_path / "out", backend="spark")
    with pytest.raises(TootsieError, match="needs backend 'ray'"):
        run_experiment(steps, tmp_path / "out", ray_address="auto")
    assert runs(tmp_path) == []


def test_ray_runs_independent_steps_at_once_with_the_local_semantics(tmp_path: Path, ray_cluster: Any) -> None:
    path = write(tmp_path, GRAPH)
    first = run_experiment(load_experiment(path), tmp_path / "out", experiment_path=path, backend="ray")
    steps = by_name(first)
    assert [s.name for s in first.steps] == [f"exp/{label}" for label in "abcdefg"]
    assert {name: str(s.status) for name, s in steps.items()} == {
        "exp/a": "SUCCESS", "exp/b": "SUCCESS", "exp/c": "SUCCESS", "exp/d": "FAILED",
        "exp/e": "DEP_FAILED", "exp/f": "FAILED", "exp/g": "SUCCESS",
    }  # fmt: skip
    assert sorted(runs(tmp_path)) == ["a", "b", "c", "d", "f", "g"]
    a, c, g = span(steps["exp/a"]), span(steps["exp/c"]), span(steps["exp/g"])
    assert a["start"] < c["end"] and c["start"] < a["end"], (a, c)  # a and c ran at the same time
    assert os.getpid() not in {a["pid"], c["pid"], g["pid"]}
    assert f"in Ray worker pid {a['pid']}" in (Path(steps["exp/a"].output_path) / ".executor.log").read_text()
    assert g["resources"] == {"CPU": 2.0, "memory": 0.25 * 2**30}
    assert span(steps["exp/b"])["start"] >= a["end"]

    assert steps["exp/d"].error == "ValueError: bad d"
    assert "Traceback" in (Path(steps["exp/d"].output_path) / ".executor.log").read_text()
    assert steps["exp/e"].reason == "not run: input failed: exp/d"
    assert steps["exp/f"].error.startswith("Ray task failed: WorkerCrashedError")
    assert "WorkerCrashedError" in (Path(steps["exp/f"].output_path) / ".executor.log").read_text()
    for step in first.steps:
        directory = Path(step.output_path)
        assert not (directory / ".executor_lease.json").exists()
        if step.status is not Status.DEP_FAILED:
            info = json.loads((directory / ".executor_info.json").read_text())
            assert info["status"] == str(step.status) and info["pid"] == os.getpid()

    second = run_experiment(load_experiment(path), tmp_path / "out", experiment_path=path, backend="ray")
    assert [str(s.status) for s in second.steps] == [str(s.status) for s in first.steps]
    assert all(by_name(second)[f"exp/{label}"].reason.startswith("skip: SUCCESS") for label in "abcg")
    assert sorted(runs(tmp_path)) == ["a", "b", "c", "d", "d", "f", "f", "g"]  # only the failed steps ran again


def test_a_step_another_process_runs_is_polled_while_the_rest_go_on(tmp_path: Path, ray_cluster: Any) -> None:
    steps = load_experiment(write(tmp_path, PAIR))
    x_dir = Path(build_graph(steps, tmp_path / "out").node(steps[0]).output_path)
    x_dir.mkdir(parents=True)
    settings = LeaseSettings.from_env()
    holder = FileLease(x_dir, settings)
    assert holder.acquire()

    def finish_x_once_y_is_done() -> None:
        with Heartbeat(holder, settings.heartbeat_seconds, "holder"):
            deadline = time.monotonic() + 60
            while not runs(tmp_path) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            write_status(x_dir, Status.SUCCESS)
        holder.release()

    thread = threading.Thread(target=finish_x_once_y_is_done)
    thread.start()
    try:
        report = run_experiment(steps, tmp_path / "out", backend="ray")
    finally:
        thread.join()
    assert report.ok and runs(tmp_path) == ["y"]
    assert by_name(report)["exp/x"].reason.startswith("skip: SUCCESS")


def test_cli_run_with_backend_ray(tmp_path: Path, ray_cluster: Any, cli: Callable[..., tuple[int, str, str]]) -> None:
    path = write(tmp_path, PAIR)
    code, out, err = cli("run", str(path), "--prefix", str(tmp_path / "out"), "--backend", "ray", "--json")
    assert (code, err) == (0, "")
    assert [s["status"] for s in json.loads(out.splitlines()[-1])["steps"]] == ["SUCCESS", "SUCCESS"]
    code, _, err = cli("run", str(path), "--prefix", str(tmp_path / "out"), "--ray-address", "auto")
    assert code == 2 and "--backend ray" in err


def test_ray_moves_a_damaged_output_aside_and_reruns_it_and_its_readers(tmp_path: Path, ray_cluster: Any) -> None:
    path = write(tmp_path, 'a = Step("exp/a", work, Cfg("a"))\nb = Step("exp/b", work, Cfg("b", inputs=(a.ref(),)))\n'
                 'c = Step("exp/c", work, Cfg("c"))\nSTEPS = [b, c]\n')  # fmt: skip
    first = by_name(run_experiment(load_experiment(path), tmp_path / "out", backend="ray"))
    (Path(first["exp/a"].output_path) / "span.json").unlink()
    second = run_experiment(load_experiment(path), tmp_path / "out", backend="ray")
    steps = by_name(second)
    assert second.ok and sorted(runs(tmp_path)) == ["a", "a", "b", "b", "c"]
    assert steps["exp/a"].damage == ("span.json: missing",) and ".damaged-" in steps["exp/a"].moved_to
    assert ".stale-" in steps["exp/b"].moved_to and steps["exp/c"].reason.startswith("skip: SUCCESS")
    assert (Path(steps["exp/a"].output_path) / "span.json").exists()
