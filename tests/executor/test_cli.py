"""`tootsie run` / `tootsie status`: output formats, exit codes, one-line errors."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .helpers import CHAIN, executions, run_cli, write_experiment

Cli = Callable[..., tuple[int, str, str]]


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_json_last_line_has_the_contract_fields(tmp_path: Path, cli: Cli) -> None:
    path = write_experiment(tmp_path, CHAIN)
    code, out, err = cli("run", str(path), "--prefix", str(tmp_path / "out"), "--json")
    assert (code, err) == (0, "")
    payload = last_json(out)
    assert [s["name"] for s in payload["steps"]] == ["exp/a", "exp/b", "exp/c"]
    for step in payload["steps"]:
        assert step["status"] == "SUCCESS" and len(step["hash"]) == 12
        assert step["output_path"] == str(tmp_path / "out" / f"{step['name']}-{step['hash']}")
        assert Path(step["output_path"], "done.txt").exists()
    code, out, _ = cli("status", str(path), "--prefix", str(tmp_path / "out"), "--json")
    assert code == 0 and [s["status"] for s in last_json(out)["steps"]] == ["SUCCESS"] * 3


def test_human_table_lists_status_hash_and_output(tmp_path: Path, cli: Cli) -> None:
    path = write_experiment(tmp_path, CHAIN)
    code, out, _ = cli("run", str(path), "--prefix", str(tmp_path / "out"))
    assert code == 0
    payload = last_json(cli("status", str(path), "--prefix", str(tmp_path / "out"), "--json")[1])
    code, out, _ = cli("status", str(path), "--prefix", str(tmp_path / "out"))
    lines = out.splitlines()
    assert lines[0] == f"prefix: {tmp_path / 'out'}"
    assert lines[1].split() == ["STATUS", "SECONDS", "HASH", "STEP", "OUTPUT", "NOTE"]
    for line, step in zip(lines[2:], payload["steps"], strict=True):
        assert line.split()[0] == "SUCCESS" and step["hash"] in line and step["output_path"] in line


def test_dry_run_writes_nothing_and_reports_not_started(tmp_path: Path, cli: Cli) -> None:
    path = write_experiment(tmp_path, CHAIN)
    code, out, err = cli("run", str(path), "--prefix", str(tmp_path / "out"), "--dry-run", "--json")
    assert (code, err) == (0, "")
    payload = last_json(out)
    assert payload["dry_run"] and [s["status"] for s in payload["steps"]] == ["NOT_STARTED"] * 3
    assert payload["steps"][1]["reason"] == "run after: exp/a (no output yet)"
    assert not (tmp_path / "out").exists() and executions(tmp_path) == []
    code, out, _ = cli("run", str(path), "--prefix", str(tmp_path / "out"), "--dry-run")
    assert code == 0 and "run: no output yet" in out and not (tmp_path / "out").exists()


def test_prefix_defaults_to_env_then_dot_out(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_experiment(tmp_path, CHAIN)
    monkeypatch.setenv("TOOTSIE_PREFIX", str(tmp_path / "from-env"))
    assert last_json(cli("run", str(path), "--dry-run", "--json")[1])["prefix"] == str(tmp_path / "from-env")
    monkeypatch.delenv("TOOTSIE_PREFIX")
    monkeypatch.chdir(tmp_path)
    assert last_json(cli("run", str(path), "--dry-run", "--json")[1])["prefix"] == str(tmp_path / "out")


def test_failed_step_exits_nonzero_with_one_stderr_line(tmp_path: Path, cli: Cli) -> None:
    body = """
a = Step("exp/a", work, Cfg(label="a", fail=True))
b = Step("exp/b", work, Cfg(label="b", inputs=(a.ref(),)))
c = Step("exp/c", work, Cfg(label="c"))
STEPS = [b, c]
"""
    path = write_experiment(tmp_path, body)
    code, out, err = cli("run", str(path), "--prefix", str(tmp_path / "out"), "--json")
    statuses = {s["name"]: s for s in last_json(out)["steps"]}
    assert {name: s["status"] for name, s in statuses.items()} == {
        "exp/a": "FAILED",
        "exp/b": "DEP_FAILED",
        "exp/c": "SUCCESS",
    }
    log = statuses["exp/a"]["log"]
    assert code == 1
    assert err.splitlines() == [
        f"tootsie: step 'exp/a' failed: ValueError: bad a (log: {log}); 1 not run because an input failed"
    ]
    assert "Traceback" in Path(log).read_text()
    assert not Path(statuses["exp/a"]["output_path"], "done.txt").exists()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "experiment file '.*nope.py' not found"),
        ("syntax", r"has a syntax error \(.*exp\.py, line 2\)"),
        ("no_steps", "has no STEPS; define a module-level STEPS"),
        ("prefix_is_file", "prefix '.*blocker' is a file, not a directory"),
    ],
)
def test_bad_input_is_one_line_on_stderr(tmp_path: Path, cli: Cli, setup: str, message: str) -> None:
    path, prefix = tmp_path / "exp.py", tmp_path / "out"
    if setup == "syntax":
        path.write_text("x = 1\ndef broken(:\n")
    elif setup == "no_steps":
        path.write_text("X = 1\n")
    elif setup == "prefix_is_file":
        write_experiment(tmp_path, CHAIN)
        prefix = tmp_path / "blocker"
        prefix.write_text("")
    else:
        path = tmp_path / "nope.py"
    code, out, err = cli("run", str(path), "--prefix", str(prefix))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tootsie: ")
    assert __import__("re").search(message, lines[0]), lines[0]
    assert executions(tmp_path) == []


def test_module_entry_point_runs_in_a_subprocess(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, CHAIN)
    result = run_cli("run", str(path), "--prefix", str(tmp_path / "out"), "--json")
    assert result.returncode == 0, result.stderr
    assert [s["status"] for s in last_json(result.stdout)["steps"]] == ["SUCCESS"] * 3
    missing = run_cli("status", str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "not found" in missing.stderr
