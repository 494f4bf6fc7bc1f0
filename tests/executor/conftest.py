"""Fixtures for executor tests: short leases and an in-process CLI."""

from collections.abc import Callable

import pytest


@pytest.fixture(autouse=True)
def short_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leases of 2 s with 0.2 s heartbeats, so takeover tests wait fractions of a second; no TOOTSIE_PREFIX leak."""
    monkeypatch.setenv("TOOTSIE_LEASE_SECONDS", "2")
    monkeypatch.setenv("TOOTSIE_HEARTBEAT_SECONDS", "0.2")
    monkeypatch.delenv("TOOTSIE_PREFIX", raising=False)
    monkeypatch.delenv("TOOTSIE_TEST_BLOCK", raising=False)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `tootsie ARGS` in this process; returns (exit code, stdout, stderr)."""
    from tootsie.cli.main import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run
