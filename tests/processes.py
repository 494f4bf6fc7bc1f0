"""Waiting on child processes in tests: every wait has a limit, and a child past it is killed before the test fails."""

import subprocess

import pytest


def finish(process: subprocess.Popen, timeout: float) -> int:
    """Wait for `process` to exit and return its code; kill it and fail the test if it runs past `timeout` seconds."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        pytest.fail(f"{process.args} still ran after {timeout} s; killed it")


def communicate(process: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """`process.communicate()` with a limit: past `timeout` s, kill the child and fail the test (showing its output)."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate(timeout=30)
        pytest.fail(
            f"{process.args} still ran after {timeout} s; killed it. "
            f"Its output ended:\n{str(out)[-2000:]}\n{str(err)[-2000:]}"
        )
