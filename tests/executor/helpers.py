"""Shared helpers for executor tests: experiment files written into tmp dirs, and the CLI in a subprocess."""

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.processes import finish

HEADER = '''
import dataclasses
import os
import time

from tootsie.configfile import unhashed

from tootsie.executor import Step, StepRef, output_of

EXECUTIONS = {executions!r}


@dataclasses.dataclass(frozen=True)
class Cfg:
    label: str
    inputs: tuple = ()
    fail: bool = False
    block: bool = False
    sleep: float = unhashed(default=0.0)
    hold: bool = unhashed(default=False)


def work(config, output_path):
    """Append "label pid" to EXECUTIONS, check inputs exist, then fail, block, hold at a barrier, or write done.txt."""
    with open(EXECUTIONS, "a") as handle:
        handle.write(f"{{config.label}} {{os.getpid()}}\\n")
    for path in config.inputs:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
    if config.fail:
        raise ValueError(f"bad {{config.label}}")
    if config.block and os.environ.get("TOOTSIE_TEST_BLOCK"):
        open(os.path.join(output_path, "started"), "w").close()
        time.sleep(600)
    if config.hold and os.environ.get("TOOTSIE_TEST_BARRIER"):  # hold inside the step until the test releases it
        open(os.path.join(output_path, "started"), "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(os.environ["TOOTSIE_TEST_BARRIER"]) and time.monotonic() < deadline:
            time.sleep(0.02)
    time.sleep(config.sleep)
    with open(os.path.join(output_path, "done.txt"), "w") as handle:
        handle.write(config.label)
'''

CHAIN = """
a = Step("exp/a", work, Cfg(label="a"))
b = Step("exp/b", work, Cfg(label="b", inputs=(a.ref() / "done.txt",)))
c = Step("exp/c", work, Cfg(label="c"))
STEPS = [b, c]
"""


def write_experiment(directory: Path, body: str, name: str = "exp.py") -> Path:
    """Write an experiment file = HEADER (work(), Cfg) + `body` into `directory`; return its path."""
    path = directory / name
    header = HEADER.format(executions=str(directory / "executions.log"))
    path.write_text(header + textwrap.dedent(body))
    return path


def executions(directory: Path) -> list[str]:
    """Labels of the step runs recorded by work(), in order."""
    log = directory / "executions.log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def cli_command(*args: str) -> list[str]:
    """argv for `python -m tootsie.cli.main ARGS`."""
    return [sys.executable, "-m", "tootsie.cli.main", *args]


def cli_env(**extra: str) -> dict[str, str]:
    """The current environment plus `extra`."""
    env = dict(os.environ)
    env.update(extra)
    return env


def run_cli(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a subprocess and wait for it."""
    return subprocess.run(
        cli_command(*args), capture_output=True, text=True, timeout=timeout, env=cli_env(**env), check=False
    )


HELD = """
a = Step("exp/a", work, Cfg(label="a", hold=True))
b = Step("exp/b", work, Cfg(label="b", inputs=(a.ref("done.txt"),)))
c = Step("exp/c", work, Cfg(label="c"))
STEPS = [b, c]
"""
"""Step a holds at the test's barrier file, so a second run started meanwhile must find it taken."""


def _wait_until(condition: object, what: str, procs: list[subprocess.Popen], timeout: float = 60) -> None:
    """Poll `condition()` until true; fail (killing `procs`) if a process exits or `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline or any(proc.poll() is not None for proc in procs):
            for proc in procs:
                proc.kill()
            raise AssertionError(f"{what} did not happen (exit codes {[proc.poll() for proc in procs]})")
        time.sleep(0.05)


def run_overlapping(argv: list[str], tmp_path: Path) -> tuple[list[dict], list[dict], int]:
    """Two `argv` runs (with `--json`) of an experiment of HELD: the second starts while the first holds step a.

    The barrier is released only once the second run logs that it waits on the first, so the two overlap for
    certain. Returns both runs' step reports and the first run's pid.
    """
    barrier = tmp_path / "release-barrier"
    env = cli_env(TOOTSIE_TEST_BARRIER=str(barrier))
    logs = [tmp_path / "first.err", tmp_path / "second.err"]
    outs = [tmp_path / "first.out", tmp_path / "second.out"]
    procs: list[subprocess.Popen] = []
    with contextlib.ExitStack() as files:
        streams = [
            (files.enter_context(out.open("w")), files.enter_context(log.open("w")))
            for out, log in zip(outs, logs, strict=True)
        ]
        procs.append(subprocess.Popen(argv, stdout=streams[0][0], stderr=streams[0][1], text=True, env=env))
        _wait_until(lambda: "step exp/a: run:" in outs[0].read_text(), "the first run starting step a", procs)
        procs.append(subprocess.Popen(argv, stdout=streams[1][0], stderr=streams[1][1], text=True, env=env))
        _wait_until(
            lambda: "step exp/a: waiting while" in outs[1].read_text(), "the second run waiting on step a", procs
        )
        barrier.touch()
        for proc, log in zip(procs, logs, strict=True):
            assert finish(proc, timeout=120) == 0, log.read_text()[-3000:]
    first, second = (json.loads(out.read_text().splitlines()[-1])["steps"] for out in outs)
    return first, second, procs[0].pid
