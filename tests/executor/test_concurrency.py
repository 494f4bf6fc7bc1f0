"""Several `tootsie run` processes on one prefix, and a run killed with SIGKILL."""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from .helpers import cli_command, cli_env, executions, run_cli, write_experiment

SLOW = """
a = Step("exp/a", work, Cfg(label="a", sleep=0.5))
b = Step("exp/b", work, Cfg(label="b", inputs=(a.ref("done.txt"),), sleep=0.5))
c = Step("exp/c", work, Cfg(label="c", sleep=0.5))
STEPS = [b, c]
"""


def test_two_runs_on_one_prefix_run_each_step_once(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, SLOW)
    argv = cli_command("run", str(path), "--prefix", str(tmp_path / "out"), "--json")
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert [s["status"] for s in json.loads(out.splitlines()[-1])["steps"]] == ["SUCCESS"] * 3
    assert sorted(executions(tmp_path)) == ["a", "b", "c"]
    pids = {line.split()[1] for line in (tmp_path / "executions.log").read_text().splitlines()}
    assert pids <= {str(proc.pid) for proc in procs}


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
    proc.wait()

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
