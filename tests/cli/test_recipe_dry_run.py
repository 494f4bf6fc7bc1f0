"""`run --dry-run --json` and `status --json` print an experiment's PLAN: the 32B recipe's phases and totals."""

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tootsie.cli.main import main

REPO = Path(__file__).resolve().parents[2]
MARIN_32B = REPO / "experiments" / "marin_32b.py"


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def last_json(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    prefix = tmp_path_factory.mktemp("recipe") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TOOTSIE_COMPONENTS", raising=False)
        code, out, err = run_cli("run", str(MARIN_32B), "--dry-run", "--json", "--prefix", str(prefix))
    assert (code, err) == (0, "")
    return prefix, last_json(out)


def test_dry_run_json_carries_the_32b_plan(dry_run: tuple[Path, dict[str, Any]]) -> None:
    prefix, payload = dry_run
    assert not prefix.exists()
    assert payload["dry_run"] and [s["status"] for s in payload["steps"]] == ["NOT_STARTED"] * 7
    phases = {phase["name"]: phase for phase in payload["phases"]}
    assert [(name, p["start_step"], p["end_step"], p["tokens"]) for name, p in phases.items()] == [
        ("phase1", 0, 80_000, 2_679_090_708_480),
        ("phase3", 80_000, 160_000, 2_684_354_560_000),
        ("bison", 160_000, 192_000, 1_073_741_824_000),
        ("mantis", 160_000, 192_000, 1_073_741_824_000),
    ]
    assert payload["total_tokens"] == 6_437_187_092_480
    for phase in phases.values():
        assert sum(phase["mixture"].values()) == pytest.approx(1.0)
    assert phases["phase1"]["mixture"]["nemotron_cc/medium"] == pytest.approx(0.3069)
    assert phases["mantis"]["mixture"]["megamath/web"] == pytest.approx(5.57 / 100.04)
    step_names = [s["name"] for s in payload["steps"]]
    assert [step["step"] for phase in payload["phases"] for step in phase["steps"]] == step_names
    assert payload["missing_components"] and all(path is None for path in payload["components"].values())


def test_status_json_carries_the_plan_too(
    dry_run: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix, planned = dry_run
    monkeypatch.delenv("TOOTSIE_COMPONENTS", raising=False)
    code, out, _ = run_cli("status", str(MARIN_32B), "--prefix", str(prefix), "--json")
    payload = last_json(out)
    assert code == 0 and payload["phases"] == planned["phases"] and payload["total_tokens"] == planned["total_tokens"]
    assert [s["hash"] for s in payload["steps"]] == [s["hash"] for s in planned["steps"]]


def _experiment(tmp_path: Path, plan: str) -> Path:
    path = tmp_path / "exp.py"
    path.write_text(
        "from dataclasses import dataclass\nfrom tootsie.executor import Step\n\n"
        "@dataclass(frozen=True)\nclass Cfg:\n    x: int = 1\n\n"
        "def work(config, output_path):\n    pass\n\n"
        f"STEPS = [Step('exp/a', work, Cfg())]\n{plan}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    "plan", ["PLAN = {'phases': [1], 'total_tokens': 5}", "def PLAN():\n    return {'phases': [1], 'total_tokens': 5}"]
)
def test_a_plan_dict_or_function_is_merged(tmp_path: Path, plan: str) -> None:
    path = _experiment(tmp_path, plan)
    code, out, _ = run_cli("run", str(path), "--dry-run", "--json", "--prefix", str(tmp_path / "out"))
    payload = last_json(out)
    assert (
        code == 0
        and (payload["phases"], payload["total_tokens"]) == ([1], 5)
        and payload["steps"][0]["name"] == "exp/a"
    )
    code, out, _ = run_cli("run", str(path), "--dry-run", "--prefix", str(tmp_path / "out"))
    assert code == 0 and out.splitlines()[-1] == "total_tokens: 5"


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ("PLAN = {'steps': 1}", r"uses keys \['steps'\] that the run report already has"),
        ("PLAN = [1]", "PLAN in .* is a list"),
        ("PLAN = {'x': object()}", "is not JSON-able"),
        ("def PLAN():\n    raise RuntimeError('boom')", r"PLAN\(\) in .* raised RuntimeError: boom"),
    ],
)
def test_a_bad_plan_is_a_one_line_error(tmp_path: Path, plan: str, message: str) -> None:
    code, out, err = run_cli(
        "run", str(_experiment(tmp_path, plan)), "--dry-run", "--json", "--prefix", str(tmp_path / "out")
    )
    assert code == 2 and err.startswith("tootsie: ") and len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
