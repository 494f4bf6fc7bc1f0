"""HumanEval's programs run in an interpreter that sees only the standard library, with a fixed environment.

So whether a program passes depends on the interpreter alone, which the step
that scores code hashes (microanneal's `BranchTasksConfig.python`).
"""

import dataclasses
import subprocess
import sys

import pytest

from tootsie.corpora.stdlib_source import python_identity
from tootsie.eval.code_sandbox import run_program, sandbox_unavailable
from tootsie.executor import Step, step_hash
from tootsie.recipes.microanneal.tasks import BranchTasksConfig, branch_tasks


def test_programs_see_the_stdlib_only_and_a_fixed_environment(monkeypatch) -> None:
    if sandbox_unavailable():
        pytest.skip(f"the HumanEval sandbox is unavailable here: {sandbox_unavailable()}")
    import numpy  # noqa: F401 - installed in the environment tootsie runs in

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    assert run_program("import json, fractions\nassert json.loads('[1]') == [1]")
    assert not run_program("import numpy")
    assert not run_program("import tootsie")
    seeded = subprocess.run(
        [sys.executable, "-S", "-c", "print(hash('humaneval'))"],
        env={"PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert run_program(f"assert hash('humaneval') == {seeded}")  # hash seed 0, not the caller's
    assert run_program("import os, time\nassert time.tzname[0] == 'UTC' and 'PYTHONHASHSEED' in os.environ")


def test_the_step_that_runs_the_sandbox_hashes_the_interpreter() -> None:
    config = BranchTasksConfig(checkpoint="run", tokenizer="tokenizer.json", suite="humaneval", data_dir="data")
    assert config.python == python_identity()
    other = dataclasses.replace(config, python=dataclasses.replace(config.python, version="3.12.0 (main)"))
    assert step_hash(Step("tasks", branch_tasks, config)) != step_hash(Step("tasks", branch_tasks, other))
