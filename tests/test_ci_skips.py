"""Guards of the suite itself: under CI=true a skip or a non-strict xfail fails the run, locally it stays reported;
`.ci/run` sets CI=true itself; every test has a time limit.

The skip and xfail guard lives in tests/conftest.py.
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

LOOSE_XFAILS = """
import pytest

@pytest.mark.xfail(reason="tootsie_known_bug_a")
def test_fails_as_expected():
    assert False

@pytest.mark.xfail(reason="tootsie_known_bug_b")
def test_passes_anyway():
    assert True

def test_xfails_imperatively():
    pytest.xfail("tootsie_known_bug_c")
"""

STRICT_XFAIL = """
import pytest

@pytest.mark.xfail(strict=True, reason="tootsie_known_bug_d")
def test_fails_strictly_as_expected():
    assert False
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


@pytest.mark.parametrize("workers", [0, 2], ids=["one-process", "xdist"])
def test_a_non_strict_xfail_fails_the_run_under_ci(tmp_path: Path, workers: int) -> None:
    """Each kind of non-strict xfail is listed; the strict one beside them is not (its strictness survives the
    trip from an xdist worker to the controller)."""
    result = _run_pytest(tmp_path, LOOSE_XFAILS + STRICT_XFAIL, ci="true", workers=workers)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    listed = result.stdout.partition("non-strict xfails are failures under CI=true")[2].partition("\n===")[0]
    for name, reason in [
        ("test_fails_as_expected", "XFAIL (not strict) tootsie_known_bug_a"),
        ("test_passes_anyway", "XPASS (not strict) tootsie_known_bug_b"),
        ("test_xfails_imperatively", "XFAIL (not strict) tootsie_known_bug_c"),
    ]:
        assert f"test_generated.py::{name}: {reason}" in listed, result.stdout
    assert "tootsie_known_bug_d" not in listed and "skips are failures" not in result.stdout


def test_a_strict_xfail_that_fails_passes_under_ci(tmp_path: Path) -> None:
    result = _run_pytest(tmp_path, STRICT_XFAIL, ci="true")
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert "1 xfailed" in result.stdout and "are failures" not in result.stdout


def test_a_non_strict_xfail_is_only_reported_locally(tmp_path: Path) -> None:
    result = _run_pytest(tmp_path, LOOSE_XFAILS, ci=None)
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert "XFAIL" in result.stdout and "XPASS" in result.stdout and "tootsie_known_bug_c" in result.stdout
    assert "are failures" not in result.stdout


def test_ci_entry_point_sets_ci_itself(tmp_path: Path) -> None:
    """`.ci/run` exports CI=true, so the policy above holds whatever runner starts it (a stub `make` reports it)."""
    (tmp_path / "make").write_text('#!/bin/sh\necho "make $* with CI=${CI:-unset}"\n')
    (tmp_path / "make").chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env["PATH"] = f"{tmp_path}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        [str(REPO / ".ci" / "run")], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "make test with CI=true"


def test_every_test_runs_under_a_time_limit(pytestconfig: pytest.Config) -> None:
    """A hung test fails after pyproject's `timeout` (pytest-timeout) rather than running until CI's own limit."""
    assert pytestconfig.pluginmanager.hasplugin("timeout"), "pytest-timeout is not loaded: install the dev extra"
    assert 0 < float(pytestconfig.getini("timeout")) <= 600
