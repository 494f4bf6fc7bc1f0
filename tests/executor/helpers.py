"""Shared helpers for executor tests: experiment files written into tmp dirs, and the CLI in a subprocess."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

HEADER = '''
import dataclasses
import os
import time

from tootsie.executor import Step, StepRef, output_of, unhashed

EXECUTIONS = {executions!r}


@dataclasses.dataclass(frozen=True)
class Cfg:
    label: str
    inputs: tuple = ()
    fail: bool = False
    block: bool = False
    sleep: float = unhashed(default=0.0)


def work(config, output_path):
    """Append "label pid" to EXECUTIONS, check inputs exist, then fail, block, or write done.txt."""
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
