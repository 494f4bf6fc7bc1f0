"""decide(): the action and reason for each situation on disk."""

import dataclasses
import time

import pytest

from tootsie.executor import Status
from tootsie.executor.lease import LeaseRecord
from tootsie.executor.plan import decide
from tootsie.executor.status import Observed, StatusRecord

NOW = time.time()
LEASE = LeaseRecord("o", "hostA", 12, NOW, NOW)


def record(status: Status, age: float = 100.0) -> StatusRecord:
    when = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(NOW - age))
    return StatusRecord(status, when, "hostA", 12)


@pytest.mark.parametrize(
    ("observed", "forced", "action", "reason"),
    [
        (Observed(None, None, False, None), False, "run", "run: no output yet"),
        (Observed(record(Status.SUCCESS), None, False, None), False, "skip", "skip: SUCCESS at "),
        (Observed(record(Status.SUCCESS), None, False, None), True, "run", "run: forced by --force"),
        (Observed(record(Status.SUCCESS, age=-5), None, False, None), True, "skip", "skip: SUCCESS at "),
        (Observed(record(Status.RUNNING), LEASE, True, None), False, "wait", "wait: running in pid 12 on host hostA"),
        (Observed(record(Status.SUCCESS), LEASE, True, None), True, "wait", "wait: running in pid 12 on host hostA"),
        (
            Observed(record(Status.RUNNING), LEASE, False, "owner pid 12 on host hostA is gone"),
            False,
            "run",
            "run: interrupted (owner pid 12 on host hostA is gone)",
        ),
        (Observed(record(Status.FAILED), None, False, None), False, "run", "run: previous attempt FAILED"),
        (Observed(record(Status.DEP_FAILED), None, False, None), False, "run", "run: previous attempt DEP_FAILED"),
    ],
)
def test_decide(observed: Observed, forced: bool, action: str, reason: str) -> None:
    decision = decide(observed, forced=forced, since=NOW)
    assert decision.action == action
    assert decision.reason.startswith(reason)


def test_skip_reason_shows_the_time_to_the_second() -> None:
    observed = Observed(
        dataclasses.replace(record(Status.SUCCESS), time="2025-01-02T03:04:05.678+00:00"), None, False, None
    )
    assert decide(observed, forced=False, since=NOW).reason == "skip: SUCCESS at 2025-01-02 03:04:05 UTC"
