"""Several `tootsie run` processes on one prefix, and a run killed with SIGKILL."""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.processes import finish

from .helpers import HELD, cli_command, cli_env, executions, run_cli, run_overlapping, write_experiment


def test_two_overlapping_runs_on_one_prefix_run_each_step_once(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, HELD)
    argv = cli_command("run", str(path), "--prefix", str(tmp_path / "out"), "--json")
    first, second, first_pid = run_overlapping(argv, tmp_path)
    assert [s["status"] for s in first] == [s["status"] for s in second] == ["SUCCESS"] * 3
    held = {s["name"]: s for s in second}["exp/a"]
    assert (
        held["reason"].startswith("skip: SUCCESS at")
        and f"(waited while pid {first_pid} on host {socket.gethostname()} ran it)" in held["reason"]
    )
    assert sorted(executions(tmp_path)) == ["a", "b", "c"]
    assert {line.split()[0]: int(line.split()[1]) for line in (tmp_path / "executions.log").read_text().splitlines()}[
        "a"
    ] == first_pid


def test_sigkilled_run_is_reported_interrupted_and_resumed(tmp_path: Path) -> None:
    body = """
a = Step("exp/a", work, Cfg(label="a"))
b = Step("exp/b", work, Cfg(label="b", inputs=(a.ref(),), block=True))
STEPS = [b]
"""
    path = write_experiment(tmp_path, body)
    prefix = str(tmp_path / "out")
    proc = subprocess.Popen(
        cli_command("run", str(path), "--prefix", prefix),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=cli_env(TOOTSIE_TEST_BLOCK="1", TOOTSIE_LEASE_SECONDS="60", TOOTSIE_HEARTBEAT_SECONDS="5"),
    )
    deadline = time.monotonic() + 30
    while not list((tmp_path / "out").glob("exp/b-*/started")):
        assert proc.poll() is None and time.monotonic() < deadline, "step b never started"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    finish(proc, timeout=60)

    # 60 s lease: only the dead local pid makes it stale
    status = run_cli(
        "status", str(path), "--prefix", prefix, "--json", TOOTSIE_LEASE_SECONDS="60", TOOTSIE_HEARTBEAT_SECONDS="5"
    )
    steps = {s["name"]: s for s in json.loads(status.stdout.splitlines()[-1])["steps"]}
    assert steps["exp/a"]["status"] == "SUCCESS"
    assert steps["exp/b"]["status"] == "FAILED"
    assert steps["exp/b"]["detail"] == f"interrupted: owner pid {proc.pid} on host {socket.gethostname()} is gone"

    rerun = run_cli(
        "run", str(path), "--prefix", prefix, "--json", TOOTSIE_LEASE_SECONDS="60", TOOTSIE_HEARTBEAT_SECONDS="5"
    )
    assert rerun.returncode == 0, rerun.stderr
    steps = {s["name"]: s for s in json.loads(rerun.stdout.splitlines()[-1])["steps"]}
    assert steps["exp/b"]["status"] == "SUCCESS"
    assert steps["exp/b"]["reason"] == f"run: interrupted (owner pid {proc.pid} on host {socket.gethostname()} is gone)"
    assert executions(tmp_path) == ["a", "b", "b"]
