"""Lease locks: mutual exclusion, staleness (old heartbeat, dead local pid), heartbeat, settings."""

import dataclasses
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.processes import finish
from tootsie.errors import TootsieError
from tootsie.executor.lease import LEASE_FILE, FileLease, Heartbeat, LeaseRecord, LeaseSettings, stale_reason

SETTINGS = LeaseSettings(lease_seconds=2.0, heartbeat_seconds=0.1)


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    finish(child, timeout=60)
    return child.pid


def write_lease(directory: Path, *, host: str, pid: int, heartbeat: float) -> None:
    record = LeaseRecord(owner="someone-else", host=host, pid=pid, acquired=heartbeat, heartbeat=heartbeat)
    (directory / LEASE_FILE).write_text(json.dumps(dataclasses.asdict(record)))


def test_acquire_refresh_release(tmp_path: Path) -> None:
    mine, theirs = FileLease(tmp_path, SETTINGS), FileLease(tmp_path, SETTINGS)
    assert mine.read() is None
    assert mine.acquire()
    first = mine.read()
    assert first is not None and first.pid == os.getpid() and first.host == socket.gethostname()
    assert not theirs.acquire()
    time.sleep(0.01)
    assert mine.refresh()
    refreshed = mine.read()
    assert refreshed is not None and refreshed.heartbeat > first.heartbeat and refreshed.owner == first.owner
    assert not theirs.refresh()
    theirs.release()  # not theirs to release: nothing happens
    assert mine.read() is not None
    mine.release()
    assert mine.read() is None and not (tmp_path / LEASE_FILE).exists()
    assert theirs.acquire()


def test_only_one_of_many_concurrent_acquirers_wins(tmp_path: Path) -> None:
    leases = [FileLease(tmp_path, SETTINGS) for _ in range(16)]
    results: list[bool] = []
    barrier = threading.Barrier(len(leases))

    def contend(lease: FileLease) -> None:
        barrier.wait()
        results.append(lease.acquire())

    threads = [threading.Thread(target=contend, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 15 + [True]


def test_lease_with_old_heartbeat_from_another_host_is_taken_over(tmp_path: Path) -> None:
    write_lease(tmp_path, host="elsewhere", pid=1, heartbeat=time.time() - 10)
    assert FileLease(tmp_path, SETTINGS).acquire()


def test_fresh_lease_from_another_host_is_respected(tmp_path: Path) -> None:
    write_lease(tmp_path, host="elsewhere", pid=dead_pid(), heartbeat=time.time())
    assert not FileLease(tmp_path, SETTINGS).acquire()


def test_fresh_lease_of_a_dead_local_pid_is_taken_over_at_once(tmp_path: Path) -> None:
    pid = dead_pid()
    write_lease(tmp_path, host=socket.gethostname(), pid=pid, heartbeat=time.time())
    lease = FileLease(tmp_path, SETTINGS)
    assert lease.acquire()
    held = lease.read()
    assert held is not None and held.pid == os.getpid()


def test_stale_reason_explains() -> None:
    now = time.time()
    old = LeaseRecord("o", "elsewhere", 7, now - 100, now - 100)
    assert stale_reason(old, SETTINGS, now=now) == "heartbeat from pid 7 on host elsewhere is 100 s old, lease 2 s"
    gone = LeaseRecord("o", socket.gethostname(), dead_pid(), now, now)
    assert stale_reason(gone, SETTINGS, now=now) == f"owner pid {gone.pid} on host {gone.host} is gone"
    assert stale_reason(LeaseRecord("o", socket.gethostname(), os.getpid(), now, now), SETTINGS, now=now) is None


def test_heartbeat_keeps_a_lease_fresh_and_reports_losing_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lease = FileLease(tmp_path, SETTINGS)
    assert lease.acquire()
    start = lease.read()
    assert start is not None
    with Heartbeat(lease, SETTINGS.heartbeat_seconds, "exp/a"):
        time.sleep(0.35)
        beat = lease.read()
        assert beat is not None and beat.heartbeat > start.heartbeat
        write_lease(tmp_path, host="thief", pid=42, heartbeat=time.time())
        with caplog.at_level(logging.ERROR, logger="tootsie.executor"):
            time.sleep(0.35)
    assert "step exp/a: lost its lease to another process (now held by pid 42 on host thief)" in caplog.text
    stolen = lease.read()
    assert stolen is not None and stolen.host == "thief"


def test_settings_from_env() -> None:
    assert LeaseSettings.from_env({}) == LeaseSettings(60.0, 5.0)
    assert LeaseSettings.from_env({"TOOTSIE_LEASE_SECONDS": "3", "TOOTSIE_HEARTBEAT_SECONDS": "0.5"}) == LeaseSettings(
        3.0, 0.5
    )
    with pytest.raises(TootsieError, match="TOOTSIE_LEASE_SECONDS='soon' is not a number"):
        LeaseSettings.from_env({"TOOTSIE_LEASE_SECONDS": "soon"})
    with pytest.raises(TootsieError, match="heartbeat_seconds < lease_seconds"):
        LeaseSettings.from_env({"TOOTSIE_LEASE_SECONDS": "1", "TOOTSIE_HEARTBEAT_SECONDS": "5"})


def test_malformed_lease_file_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / LEASE_FILE).write_text('{"owner": "x"}')
    with pytest.raises(TootsieError, match=f"lease file {tmp_path / LEASE_FILE} is malformed"):
        FileLease(tmp_path, SETTINGS).read()
