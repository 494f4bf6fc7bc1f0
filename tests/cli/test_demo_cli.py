"""`tootsie demo`: `--experiment FILE` runs that file's steps, and `--tiny` cannot be combined with it."""

import json
from pathlib import Path

import pytest

from tootsie.cli.main import main

EXPERIMENT = """
from dataclasses import dataclass
from pathlib import Path

from tootsie.executor import Step


@dataclass(frozen=True)
class GreetingConfig:
    text: str


def greet(config: GreetingConfig, output_path: str) -> None:
    Path(output_path, "greeting.txt").write_text(config.text)


STEPS = [Step("greeting/hello", greet, GreetingConfig("hello"))]
"""


def test_demo_runs_the_steps_of_an_experiment_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    experiment = tmp_path / "greeting.py"
    experiment.write_text(EXPERIMENT, encoding="utf-8")
    assert main(["demo", "--experiment", str(experiment), "--out", str(tmp_path / "out"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["ok"] and [step["name"] for step in summary["steps"]] == ["greeting/hello"]
    assert summary["bpb"] is None  # the demo's own steps are not in this file
    (written,) = (tmp_path / "out" / "greeting").glob("hello-*/greeting.txt")
    assert written.read_text() == "hello"


def test_tiny_and_experiment_are_exclusive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--tiny", "--experiment", str(tmp_path / "x.py"), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "argument --experiment: not allowed with argument --tiny" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_verify_reruns_the_demo_steps_and_fails_on_a_step_that_is_not_reproducible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = tmp_path / "greeting.py"
    experiment.write_text(EXPERIMENT, encoding="utf-8")
    assert main(["demo", "--experiment", str(experiment), "--out", str(tmp_path / "out"), "--verify", "--json"]) == 0
    verify = json.loads(capsys.readouterr().out.splitlines()[-1])["verify"]
    assert verify["ok"] and [(s["name"], s["identical"]) for s in verify["steps"]] == [("greeting/hello", True)]

    noisy = tmp_path / "noisy.py"
    noisy.write_text(
        EXPERIMENT.replace("config.text)", "config.text + os.urandom(4).hex())", 1).replace(
            "from pathlib import Path", "import os\nfrom pathlib import Path", 1
        ),
        encoding="utf-8",
    )
    assert main(["demo", "--experiment", str(noisy), "--out", str(tmp_path / "noisy"), "--verify"]) == 1
    captured = capsys.readouterr()
    assert "DIFFERS" in captured.out and "greeting.txt" in captured.out
    assert captured.err.splitlines()[-1] == "tootsie: the demo is not reproducible: greeting/hello (greeting.txt)"


def test_verify_needs_a_local_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    experiment = tmp_path / "greeting.py"
    experiment.write_text(EXPERIMENT, encoding="utf-8")
    assert main(["demo", "--experiment", str(experiment), "--out", "memory://bucket/demo", "--verify"]) == 2
    assert "demo verify needs a local prefix" in capsys.readouterr().err


def test_demo_verify_is_a_subcommand_and_flags_before_it_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = tmp_path / "greeting.py"
    experiment.write_text(EXPERIMENT, encoding="utf-8")
    for argv in (
        ["demo", "verify", "--experiment", str(experiment), "--out", str(tmp_path / "a"), "--json"],
        ["demo", "--experiment", str(experiment), "--out", str(tmp_path / "b"), "verify", "--json"],
    ):
        assert main(argv) == 0
        summary = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert summary["prefix"].endswith(argv[argv.index("--out") + 1][-1]) and summary["verify"]["ok"]
    assert main(["demo", "--experiment", str(experiment), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
