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


def test_damage_and_remade_inputs_rerun_clean() -> None:
    damaged = Observed(
        record(Status.SUCCESS), None, False, None, damage=("a.bin: missing", "b.bin: 1 bytes, recorded 2")
    )
    assert damaged.status is Status.DAMAGED and damaged.detail == "damaged: a.bin: missing; b.bin: 1 bytes, recorded 2"
    decision = decide(damaged, forced=False, since=NOW)
    assert (decision.action, decision.fresh, decision.damage) == ("run", True, damaged.damage)
    assert decision.reason == "run: damaged: a.bin: missing; b.bin: 1 bytes, recorded 2"
    waiting = decide(dataclasses.replace(damaged, lease=LEASE, lease_live=True), forced=False, since=NOW)
    assert (waiting.action, waiting.remakes, waiting.fresh) == ("wait", True, False)  # its readers rerun, it waits

    old = Observed(record(Status.SUCCESS), None, False, None)
    remade = decide(old, forced=False, since=NOW, remade=["exp/a"])
    assert (remade.action, remade.fresh, remade.reason) == ("run", True, "run: input remade: exp/a")
    newer = Observed(record(Status.SUCCESS, age=-5), None, False, None)  # a concurrent run remade it already
    assert decide(newer, forced=False, since=NOW, remade=["exp/a"]).action == "skip"
    failed = decide(Observed(record(Status.FAILED), None, False, None), forced=False, since=NOW, remade=["exp/a"])
    assert failed.fresh  # a partial output made from the old input is moved aside too
    nothing = decide(Observed(None, None, False, None), forced=False, since=NOW, remade=["exp/a"])
    assert (nothing.reason, nothing.fresh) == ("run: no output yet", False)


def test_a_long_damage_list_is_summarized() -> None:
    lines = tuple(f"checkpoints/step-5/model/{i}: missing" for i in range(10))
    observed = Observed(record(Status.SUCCESS), None, False, None, damage=lines)
    assert decide(observed, forced=False, since=NOW).reason.endswith("model/2: missing (and 7 more)")
