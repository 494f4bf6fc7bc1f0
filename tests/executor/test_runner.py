"""run_experiment end to end in this process: skipping, failures, force, dry run, metadata, leases."""

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

import tootsie
from tootsie.errors import TootsieError
from tootsie.executor import RunReport, Status, experiment_status, failure_summary, load_experiment, run_experiment
from tootsie.executor.lease import FileLease, LeaseSettings
from tootsie.executor.metadata import git_sha
from tootsie.executor.status import STATUS_FILE, write_status

from .helpers import CHAIN, executions, write_experiment
from .test_lease import write_lease


def run(tmp_path: Path, body: str = CHAIN, **kwargs: object) -> RunReport:
    path = tmp_path / "exp.py"
    if not path.exists():
        write_experiment(tmp_path, body)
    return run_experiment(load_experiment(path), tmp_path / "out", experiment_path=path, **kwargs)  # type: ignore[arg-type]


def by_name(report: RunReport) -> dict[str, object]:
    return {step.name: step for step in report.steps}


def tree(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*")} if root.exists() else {}


def test_runs_inputs_first_then_skips_everything(tmp_path: Path) -> None:
    first = run(tmp_path)
    assert first.ok and [s.status for s in first.steps] == [Status.SUCCESS] * 3
    assert [s.name for s in first.steps] == ["exp/a", "exp/b", "exp/c"]
    assert executions(tmp_path) == ["a", "b", "c"]
    second = run(tmp_path)
    assert second.ok and executions(tmp_path) == ["a", "b", "c"]
    assert all(s.reason.startswith("skip: SUCCESS at ") for s in second.steps)
    assert [s.output_path for s in second.steps] == [s.output_path for s in first.steps]


def test_step_gets_resolved_paths_and_writes_metadata_and_log(tmp_path: Path) -> None:
    body = (
        CHAIN
        + """
import logging
def logs(config, output_path):
    logging.getLogger("user.step").info("hello from %s", config.label)
    with open(os.path.join(output_path, "seen.json"), "w") as handle:
        handle.write(repr(config.inputs))
d = Step("exp/d", logs, Cfg(label="d", inputs=(b.ref("done.txt"), c.ref())), description="reads b and c")
STEPS.append(d)
"""
    )
    report = run(tmp_path, body)
    steps = by_name(report)
    d = steps["exp/d"]
    seen = (Path(d.output_path) / "seen.json").read_text()
    assert seen == repr((f"{steps['exp/b'].output_path}/done.txt", steps["exp/c"].output_path))
    assert "INFO user.step: hello from d" in (Path(d.output_path) / ".executor.log").read_text()
    info = json.loads((Path(d.output_path) / ".executor_info.json").read_text())
    assert info["status"] == "SUCCESS" and info["hash"] == d.hash and info["description"] == "reads b and c"
    assert info["config"]["sleep"] == 0.0 and "sleep" not in info["version"]["config"]
    assert info["version"]["dependencies"] == {
        f"exp/b-{steps['exp/b'].hash}": steps["exp/b"].hash,
        f"exp/c-{steps['exp/c'].hash}": steps["exp/c"].hash,
    }
    assert info["experiment"] == str(tmp_path / "exp.py")
    assert info["tootsie_version"] and info["python"] and info["packages"]["numpy"]
    assert info["seconds"] >= 0 and info["end_time"] >= info["start_time"] and info["pid"] == os.getpid()
    assert info["cpus"] == len(os.sched_getaffinity(0))  # XLA CPU's thread count: it changes training's bits
    record = json.loads(Path(report.record_path).read_text())
    assert Path(report.record_path).parent == tmp_path / "out" / "experiments"
    assert Path(report.record_path).name.startswith("exp-")
    assert [(s["name"], s["status"]) for s in record["steps"]] == [(s.name, "SUCCESS") for s in report.steps]


def test_metadata_records_git_commits_when_available(tmp_path: Path) -> None:
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "experiment"], check=True, timeout=60)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    report = run(tmp_path)
    info = json.loads((Path(report.steps[0].output_path) / ".executor_info.json").read_text())
    assert info["git"]["experiment"] == head
    assert info["git"]["tootsie"] == git_sha(Path(tootsie.__file__).parent)
    assert git_sha(tmp_path / "out" / "experiments") == head  # inside the repo
    assert git_sha(tmp_path / "no-such-dir") is None


def test_failure_marks_dependents_and_keeps_independent_steps(tmp_path: Path) -> None:
    body = """
a = Step("exp/a", work, Cfg(label="a", fail=True))
b = Step("exp/b", work, Cfg(label="b", inputs=(a.ref(),)))
bb = Step("exp/bb", work, Cfg(label="bb", inputs=(b.ref(),)))
c = Step("exp/c", work, Cfg(label="c"))
STEPS = [bb, c]
"""
    report = run(tmp_path, body)
    steps = by_name(report)
    assert not report.ok
    assert {name: s.status for name, s in steps.items()} == {
        "exp/a": Status.FAILED,
        "exp/b": Status.DEP_FAILED,
        "exp/bb": Status.DEP_FAILED,
        "exp/c": Status.SUCCESS,
    }
    assert executions(tmp_path) == ["a", "c"]
    a = steps["exp/a"]
    log = Path(a.log_path).read_text()
    assert "Traceback (most recent call last)" in log and "ValueError: bad a" in log
    assert json.loads((Path(a.output_path) / STATUS_FILE).read_text())["status"] == "FAILED"
    assert json.loads((Path(steps["exp/bb"].output_path) / STATUS_FILE).read_text())["status"] == "DEP_FAILED"
    assert steps["exp/b"].reason == "not run: input failed: exp/a"
    assert (
        failure_summary(report)
        == f"step 'exp/a' failed: ValueError: bad a (log: {a.log_path}); 2 not run because an input failed"
    )
    status = by_name(experiment_status(load_experiment(tmp_path / "exp.py"), tmp_path / "out"))
    assert status["exp/a"].status is Status.FAILED and status["exp/a"].error == "ValueError: bad a"


def test_force_reruns_only_matching_steps(tmp_path: Path) -> None:
    run(tmp_path)
    report = run(tmp_path, force=r"exp/[ab]$")
    assert report.ok and executions(tmp_path) == ["a", "b", "c", "a", "b"]
    assert [s.reason for s in report.steps[:2]] == ["run: forced by --force"] * 2
    with pytest.raises(TootsieError, match=r"--force '\(' is not a valid regular expression"):
        run(tmp_path, force="(")


def test_dry_run_plans_and_writes_nothing(tmp_path: Path) -> None:
    plan = run(tmp_path, dry_run=True)
    assert plan.ok and plan.dry_run and not (tmp_path / "out").exists()
    assert [(s.status, s.reason) for s in plan.steps] == [
        (Status.NOT_STARTED, "run: no output yet"),
        (Status.NOT_STARTED, "run after: exp/a (no output yet)"),
        (Status.NOT_STARTED, "run: no output yet"),
    ]
    run(tmp_path)
    before = tree(tmp_path / "out")
    plan = run(tmp_path, dry_run=True, force="exp/a")
    assert tree(tmp_path / "out") == before and executions(tmp_path) == ["a", "b", "c"]
    assert [s.reason.split(" at ")[0] for s in plan.steps] == [
        "run: forced by --force",
        "skip: SUCCESS",
        "skip: SUCCESS",
    ]


def test_prefix_that_is_a_file_is_an_error_before_running(tmp_path: Path) -> None:
    write_experiment(tmp_path, CHAIN)
    (tmp_path / "out").write_text("in the way")
    with pytest.raises(TootsieError, match=r"prefix '.*out' is a file, not a directory; pass --prefix DIR"):
        run(tmp_path)
    assert executions(tmp_path) == []


def test_read_only_prefix_is_an_error_before_running(tmp_path: Path) -> None:
    """A chmod-555 directory for ordinary users; for root (who ignores modes) a prefix under /proc."""
    write_experiment(tmp_path, CHAIN)
    if os.geteuid() == 0:
        with pytest.raises(TootsieError, match=r"prefix '/proc/tootsie-prefix' is not writable \("):
            run_experiment(load_experiment(tmp_path / "exp.py"), "/proc/tootsie-prefix")
    else:
        (tmp_path / "out").mkdir()
        (tmp_path / "out").chmod(0o555)
        try:
            with pytest.raises(TootsieError, match=r"prefix '.*out' is not writable \(Permission denied\)"):
                run(tmp_path)
        finally:
            (tmp_path / "out").chmod(0o755)
    assert executions(tmp_path) == []


def test_interrupted_run_is_reported_failed_then_rerun(tmp_path: Path) -> None:
    write_experiment(tmp_path, CHAIN)
    steps = load_experiment(tmp_path / "exp.py")
    a_dir = Path(experiment_status(steps, tmp_path / "out").steps[0].output_path)
    a_dir.mkdir(parents=True)
    write_status(a_dir, Status.RUNNING)
    write_lease(a_dir, host="elsewhere", pid=99, heartbeat=time.time() - 30)
    status = experiment_status(steps, tmp_path / "out").steps[0]
    assert status.status is Status.FAILED and status.detail.startswith(
        "interrupted: heartbeat from pid 99 on host elsewhere"
    )
    report = run(tmp_path)
    assert report.ok and report.steps[0].reason.startswith("run: interrupted (heartbeat from pid 99")


def test_fresh_lease_elsewhere_is_reported_running_and_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOTSIE_LEASE_SECONDS", "1")
    write_experiment(tmp_path, CHAIN)
    steps = load_experiment(tmp_path / "exp.py")
    a_dir = Path(experiment_status(steps, tmp_path / "out").steps[0].output_path)
    a_dir.mkdir(parents=True)
    write_status(a_dir, Status.RUNNING)
    write_lease(a_dir, host="elsewhere", pid=99, heartbeat=time.time())
    status = experiment_status(steps, tmp_path / "out").steps[0]
    assert status.status is Status.RUNNING and status.detail is None
    assert run(tmp_path, dry_run=True).steps[0].reason == "wait: running in pid 99 on host elsewhere"
    started = time.monotonic()
    report = run(tmp_path)
    assert time.monotonic() - started >= 0.5  # waited for the heartbeat to go stale (lease 1 s)
    assert report.ok and executions(tmp_path) == ["a", "b", "c"]


def test_waits_for_a_live_local_holder_and_skips_what_it_finished(tmp_path: Path) -> None:
    write_experiment(tmp_path, CHAIN)
    steps = load_experiment(tmp_path / "exp.py")
    a_dir = Path(experiment_status(steps, tmp_path / "out").steps[0].output_path)
    a_dir.mkdir(parents=True)
    holder = FileLease(a_dir, LeaseSettings.from_env())
    assert holder.acquire()
    write_status(a_dir, Status.RUNNING)
    assert experiment_status(steps, tmp_path / "out").steps[0].status is Status.RUNNING

    def finish() -> None:
        time.sleep(0.5)
        (a_dir / "done.txt").write_text("a")
        write_status(a_dir, Status.SUCCESS)
        holder.release()

    other = threading.Thread(target=finish)
    other.start()
    report = run(tmp_path)
    other.join()
    assert report.ok and executions(tmp_path) == ["b", "c"]
    assert report.steps[0].reason.startswith("skip: SUCCESS at ")


def test_lease_is_released_and_host_recorded(tmp_path: Path) -> None:
    report = run(tmp_path)
    for step in report.steps:
        assert not (Path(step.output_path) / ".executor_lease.json").exists()
        assert json.loads((Path(step.output_path) / STATUS_FILE).read_text())["host"] == socket.gethostname()
