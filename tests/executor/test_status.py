"""Status files and the reported status (which also looks at the lease)."""

import json
import os
import socket
import time
from pathlib import Path

import pytest

from tootsie.errors import TootsieError
from tootsie.executor import Status
from tootsie.executor.lease import LeaseSettings
from tootsie.executor.status import STATUS_FILE, observe, read_status, write_status

from .test_lease import dead_pid, write_lease

SETTINGS = LeaseSettings(lease_seconds=2.0, heartbeat_seconds=0.1)


def test_write_then_read_leaves_only_the_status_file(tmp_path: Path) -> None:
    record = write_status(tmp_path, Status.SUCCESS)
    assert read_status(tmp_path) == record
    assert record.pid == os.getpid() and record.host == socket.gethostname()
    assert json.loads((tmp_path / STATUS_FILE).read_text())["status"] == "SUCCESS"
    assert os.listdir(tmp_path) == [STATUS_FILE]
    assert abs(record.timestamp - time.time()) < 5


def test_reported_status_of_each_situation(tmp_path: Path) -> None:
    assert observe(tmp_path, SETTINGS).status is Status.NOT_STARTED
    for written in (Status.SUCCESS, Status.FAILED, Status.DEP_FAILED):
        write_status(tmp_path, written)
        assert observe(tmp_path, SETTINGS).status is written
    write_status(tmp_path, Status.RUNNING)
    observed = observe(tmp_path, SETTINGS)
    assert (observed.status, observed.detail) == (Status.FAILED, "interrupted: no lease is held")
    write_lease(tmp_path, host=socket.gethostname(), pid=os.getpid(), heartbeat=time.time())
    assert (observe(tmp_path, SETTINGS).status, observe(tmp_path, SETTINGS).detail) == (Status.RUNNING, None)
    pid = dead_pid()
    write_lease(tmp_path, host=socket.gethostname(), pid=pid, heartbeat=time.time())
    observed = observe(tmp_path, SETTINGS)
    assert observed.status is Status.FAILED
    assert observed.detail == f"interrupted: owner pid {pid} on host {socket.gethostname()} is gone"
    write_lease(tmp_path, host="elsewhere", pid=1, heartbeat=time.time() - 60)
    assert (
        observe(tmp_path, SETTINGS).detail
        == "interrupted: heartbeat from pid 1 on host elsewhere is 60 s old, lease 2 s"
    )


def test_live_lease_without_a_running_status_is_running(tmp_path: Path) -> None:
    write_status(tmp_path, Status.FAILED)
    write_lease(tmp_path, host="elsewhere", pid=1, heartbeat=time.time())
    assert observe(tmp_path, SETTINGS).status is Status.RUNNING


def test_malformed_status_file_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / STATUS_FILE).write_text('{"status": "DONE", "time": "x", "host": "h", "pid": 1}')
    with pytest.raises(TootsieError, match=f"status file {tmp_path / STATUS_FILE} is malformed"):
        read_status(tmp_path)
    (tmp_path / STATUS_FILE).write_text("{not json")
    with pytest.raises(TootsieError, match="is not valid JSON"):
        read_status(tmp_path)
