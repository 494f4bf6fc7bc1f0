"""Guards of the suite itself: under CI=true a skip fails the run, locally it stays a skip; every test has a time limit.

The skip guard lives in tests/conftest.py.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

MISSING_EXTRA = """
import pytest

def test_needs_an_extra():
    pytest.importorskip("tootsie_no_such_extra", reason="tootsie_no_such_extra is not installed")
"""

MISSING_AT_COLLECTION = """
import pytest

pytest.importorskip("tootsie_no_such_extra_either")

def test_never_collected():
    assert True
"""


def _run_pytest(tmp_path: Path, body: str, ci: str | None, workers: int = 0) -> subprocess.CompletedProcess[str]:
    """pytest over a generated test file and a plain one, this suite's conftest loaded as a plugin, CI set as given.

    `workers` > 0 runs it as `make test` does, in pytest-xdist worker processes (`-n`).
    """
    (tmp_path / "test_generated.py").write_text(body)
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    env = {key: value for key, value in os.environ.items() if key != "CI"} | {"PYTHONPATH": str(REPO)}
    if ci is not None:
        env["CI"] = ci
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.conftest",
        "-q",
        "-ra",
        "--rootdir",
        str(tmp_path),
        "-c",
        os.devnull,
        "-p",
        "no:cacheprovider",
        *(["-n", str(workers)] if workers else []),
        str(tmp_path),
    ]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)


@pytest.mark.parametrize("workers", [0, 2], ids=["one-process", "xdist"])
@pytest.mark.parametrize("body", [MISSING_EXTRA, MISSING_AT_COLLECTION], ids=["in-test", "at-collection"])
def test_a_skip_fails_the_run_under_ci(tmp_path: Path, body: str, workers: int) -> None:
    result = _run_pytest(tmp_path, body, ci="true", workers=workers)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    assert "skips are failures under CI=true" in result.stdout
    assert "tootsie_no_such_extra" in result.stdout  # the reason names what is missing


@pytest.mark.parametrize("body", [MISSING_EXTRA, MISSING_AT_COLLECTION], ids=["in-test", "at-collection"])
def test_a_skip_is_only_reported_locally(tmp_path: Path, body: str) -> None:
    result = _run_pytest(tmp_path, body, ci=None)
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert "SKIPPED" in result.stdout and "tootsie_no_such_extra" in result.stdout
    assert "skips are failures" not in result.stdout


def test_every_test_runs_under_a_time_limit(pytestconfig: pytest.Config) -> None:
    """A hung test fails after pyproject's `timeout` (pytest-timeout) rather than running until CI's own limit."""
    assert pytestconfig.pluginmanager.hasplugin("timeout"), "pytest-timeout is not loaded: install the dev extra"
    assert 0 < float(pytestconfig.getini("timeout")) <= 600
