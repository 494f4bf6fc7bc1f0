"""Experiments on an object-store prefix (s3:// on a local moto server; memory:// for the unguarded fallback).

Traffic goes only to the moto server this module starts on 127.0.0.1.
"""

import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")

import fsspec  # noqa: E402 - after the skips: s3fs and moto are optional

from tests.processes import finish  # noqa: E402
from tootsie import storage
from tootsie.configfile import unhashed
from tootsie.errors import TootsieError  # noqa: E402
from tootsie.executor import Status, Step, build_graph, load_experiment, remote_lease, run_experiment  # noqa: E402  # noqa: E402
from tootsie.executor.lease import LeaseRecord, LeaseSettings  # noqa: E402
from tootsie.executor.remote_lease import ObjectLease  # noqa: E402
from tootsie.executor.staging import materialize  # noqa: E402

from .helpers import CHAIN, HELD, cli_command, cli_env, executions, run_cli, run_overlapping, write_experiment  # noqa: E402
from .s3_server import moto_s3  # noqa: E402

DEMO_FILE = Path(__file__).resolve().parents[2] / "experiments" / "demo.py"
SETTINGS = LeaseSettings(lease_seconds=2.0, heartbeat_seconds=0.2)


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    """A moto S3 server for this module, with this process's environment and fsspec config pointing at it."""
    import s3fs

    with moto_s3() as env, pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        patch.setitem(fsspec.config.conf, "s3", {"endpoint_url": env["AWS_ENDPOINT_URL"]})
        s3fs.S3FileSystem.clear_instance_cache()
        yield env
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def bucket(s3_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket, as "s3://<name>"; the local cache goes to tmp_path/cache."""
    monkeypatch.setenv("TOOTSIE_CACHE_DIR", str(tmp_path / "cache"))
    name = f"tootsie-{uuid.uuid4().hex[:12]}"
    fsspec.filesystem("s3").mkdir(name)
    return f"s3://{name}"


def _cat(url: str) -> bytes:
    return storage.read_bytes(url) or b""


def _status(directory: str) -> str | None:
    payload = storage.read_json(storage.join(directory, ".executor_status.json"))
    return None if payload is None else payload["status"]


def test_hashes_and_paths_do_not_depend_on_the_prefix_scheme(tmp_path: Path) -> None:
    steps = load_experiment(write_experiment(tmp_path, CHAIN))
    local = build_graph(steps, tmp_path / "out")
    remote = build_graph(steps, "s3://bucket/runs/")
    assert [n.id for n in remote.nodes] == [n.id for n in local.nodes]
    assert remote.prefix == "s3://bucket/runs"
    assert [n.output_path for n in remote.nodes] == [f"s3://bucket/runs/{n.id}" for n in local.nodes]


@pytest.mark.parametrize("scheme", ["s3", "memory"])
def test_a_chain_runs_in_object_storage_and_a_rerun_skips_it(
    scheme: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if scheme == "s3":
        prefix = f"{request.getfixturevalue('bucket')}/runs"
    else:
        monkeypatch.setenv("TOOTSIE_CACHE_DIR", str(tmp_path / "cache"))
        prefix = f"memory://tootsie-{uuid.uuid4().hex[:8]}/runs"
    steps = load_experiment(write_experiment(tmp_path, CHAIN))

    first = run_experiment(steps, prefix)
    assert first.ok and [s.reason for s in first.steps] == ["run: no output yet"] * 3
    outputs = {s.name: s.output_path for s in first.steps}
    assert all(path.startswith(f"{prefix}/exp/") for path in outputs.values())
    for name, label in (("exp/a", b"a"), ("exp/b", b"b"), ("exp/c", b"c")):
        assert _cat(storage.join(outputs[name], "done.txt")) == label
        assert _status(outputs[name]) == "SUCCESS"
        info = storage.read_json(storage.join(outputs[name], ".executor_info.json"))
        assert info is not None and info["status"] == "SUCCESS" and info["output_path"] == outputs[name]
        assert b"SUCCESS in" in _cat(storage.join(outputs[name], ".executor.log"))
        assert storage.read_bytes(storage.join(outputs[name], ".executor_lease.json")) is None  # released
    assert first.record_path is not None and storage.read_json(first.record_path)["steps"][1]["status"] == "SUCCESS"
    # b read a's output from a local copy; nothing is left in staging
    cache = tmp_path / "cache"
    assert (cache / "inputs" / scheme).is_dir() and list((cache / "inputs").rglob("done.txt"))
    assert not [p for p in (cache / "staging").rglob("*") if p.is_file()]

    second = run_experiment(load_experiment(write_experiment(tmp_path, CHAIN)), prefix)
    assert second.ok and all(s.reason.startswith("skip: SUCCESS") for s in second.steps)
    assert sorted(executions(tmp_path)) == ["a", "b", "c"]


@dataclasses.dataclass(frozen=True)
class FlakyConfig:
    """A step that keeps `part.txt` between attempts and fails while `fail_flag` exists."""

    fail_flag: str = unhashed(default="")


def flaky(config: FlakyConfig, output_path: str) -> None:
    """First attempt: write part.txt, then fail while the flag exists; a later one records what it resumed from."""
    part = Path(output_path) / "part.txt"
    if part.exists():
        (Path(output_path) / "resumed.txt").write_text(part.read_text())
        part.unlink()
    else:
        part.write_text("attempt 1")
    if os.path.exists(config.fail_flag):
        raise RuntimeError("flaky failure")
    (Path(output_path) / "done.txt").write_text("done")


@dataclasses.dataclass(frozen=True)
class ReaderConfig:
    """Reads the flaky step's done.txt."""

    source: object


def reader(config: ReaderConfig, output_path: str) -> None:
    """Copy the input file."""
    (Path(output_path) / "copy.txt").write_text(Path(str(config.source)).read_text())


def test_a_failed_step_has_no_success_keeps_its_partial_output_and_resumes_from_it(bucket: str, tmp_path: Path) -> None:
    flag = tmp_path / "fail"
    flag.touch()
    first_step = Step("exp/flaky", flaky, FlakyConfig(fail_flag=str(flag)))
    reading = Step("exp/reader", reader, ReaderConfig(source=first_step.ref("done.txt")))

    failed = run_experiment([reading], f"{bucket}/runs")
    statuses = {s.name: s for s in failed.steps}
    assert (
        statuses["exp/flaky"].status is Status.FAILED and statuses["exp/flaky"].error == "RuntimeError: flaky failure"
    )
    assert statuses["exp/reader"].status is Status.DEP_FAILED
    out = statuses["exp/flaky"].output_path
    assert _status(out) == "FAILED"  # never SUCCESS
    assert _cat(storage.join(out, "part.txt")) == b"attempt 1"  # saved so a retry resumes
    assert b"RuntimeError: flaky failure" in _cat(storage.join(out, ".executor.log"))

    flag.unlink()
    retried = run_experiment([reading], f"{bucket}/runs")
    assert retried.ok
    assert _cat(storage.join(out, "resumed.txt")) == b"attempt 1"  # staged from the store, not from local leftovers
    assert storage.read_bytes(storage.join(out, "part.txt")) is None  # deleted by the step, so deleted in the store
    reader_out = {s.name: s.output_path for s in retried.steps}["exp/reader"]
    assert _cat(storage.join(reader_out, "copy.txt")) == b"done"


def test_a_datakit_step_reads_its_documents_from_an_s3_url_and_writes_to_s3(bucket: str) -> None:
    from tootsie.datakit.engine import EngineConfig
    from tootsie.datakit.normalize import NormalizeConfig, normalize

    records = [{"id": str(i), "text": f"document number {i} about object storage"} for i in range(3)]
    storage.write_bytes(f"{bucket}/raw/docs.jsonl", "".join(json.dumps(r) + "\n" for r in records).encode())
    step = Step(
        "data/normalized",
        normalize,
        NormalizeConfig(inputs=(f"{bucket}/raw/docs.jsonl",), engine=EngineConfig(workers=1, progress=False)),
    )
    report = run_experiment([step], f"{bucket}/runs")
    assert report.ok, report.steps[0].error
    names = storage.list_tree(report.steps[0].output_path)
    assert any(name.endswith(".parquet") for name in names) and ".executor_status.json" in names


def test_a_local_copy_is_reused_until_the_input_is_rerun(bucket: str, tmp_path: Path) -> None:
    source = f"{bucket}/runs/exp/a-123"
    storage.write_bytes(f"{source}/data.txt", b"v1")
    storage.write_json(f"{source}/.executor_status.json", {"status": "SUCCESS", "time": "1"})
    storage.write_json(f"{source}/.executor_lease.json", {"owner": "x"})
    copy = tmp_path / "copy"
    materialize(source, str(copy))
    assert (copy / "data.txt").read_bytes() == b"v1" and not (copy / ".executor_lease.json").exists()

    (copy / "data.txt").write_bytes(b"local edit")  # stands in for "no download happened"
    materialize(source, str(copy))
    assert (copy / "data.txt").read_bytes() == b"local edit"

    storage.write_bytes(f"{source}/data.txt", b"v2")  # a forced rerun: new output, new status record
    storage.write_json(f"{source}/.executor_status.json", {"status": "SUCCESS", "time": "2"})
    materialize(source, str(copy))
    assert (copy / "data.txt").read_bytes() == b"v2"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("copy.tmp") or p.name.startswith("copy.old")]

    storage.write_json(f"{source}/.executor_status.json", {"status": "RUNNING", "time": "3"})
    with pytest.raises(TootsieError, match="is not finished"):
        materialize(source, str(copy))


def _contend(leases: list[ObjectLease]) -> list[bool]:
    """Call acquire() on every lease at once, from one thread each."""
    barrier = threading.Barrier(len(leases))
    results: list[bool] = [False] * len(leases)

    def run(index: int) -> None:
        barrier.wait()
        results[index] = leases[index].acquire()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(leases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_s3_lease_creation_and_takeover_each_have_exactly_one_winner(bucket: str) -> None:
    directory = f"{bucket}/runs/exp/a-123"
    assert sum(_contend([ObjectLease(directory, SETTINGS) for _ in range(8)])) == 1

    dead = LeaseRecord(owner="gone", host="elsewhere", pid=1, acquired=0.0, heartbeat=time.time() - 60)
    storage.write_json(f"{directory}/.executor_lease.json", dataclasses.asdict(dead))
    contenders = [ObjectLease(directory, SETTINGS) for _ in range(8)]
    assert sum(_contend(contenders)) == 1
    winner = next(lease for lease in contenders if lease.read().owner == lease.owner)
    assert winner.refresh()


def test_s3_lease_heartbeat_stops_after_a_takeover_and_release_spares_the_new_owner(bucket: str) -> None:
    directory = f"{bucket}/runs/exp/a-123"
    holder = ObjectLease(directory, SETTINGS)
    assert holder.acquire() and holder.refresh()
    impatient = ObjectLease(directory, LeaseSettings(lease_seconds=0.2, heartbeat_seconds=0.1))
    assert not ObjectLease(directory, SETTINGS).acquire()  # live: not taken
    time.sleep(0.3)
    assert impatient.acquire()  # stale for its settings: taken over by a conditional overwrite
    assert not holder.refresh()
    holder.release()
    assert holder.read().owner == impatient.owner
    impatient.release()
    assert impatient.read() is None


def test_a_store_without_conditional_writes_warns_and_still_excludes_sequential_runs(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_lease, "_warned", set())
    directory = f"memory://tootsie-{uuid.uuid4().hex[:8]}/exp/a-123"
    with caplog.at_level(logging.WARNING, logger="tootsie.executor.remote_lease"):
        first, second = ObjectLease(directory, SETTINGS), ObjectLease(directory, SETTINGS)
    assert "memory:// has no conditional writes" in caplog.text
    assert first.acquire() and not second.acquire()
    first.release()
    assert second.acquire() and second.refresh() and not first.refresh()


def test_an_unwritable_bucket_is_a_one_line_error(s3_env: dict[str, str], tmp_path: Path) -> None:
    steps = load_experiment(write_experiment(tmp_path, CHAIN))
    with pytest.raises(TootsieError, match="is not writable.*bucket exists"):
        run_experiment(steps, "s3://no-such-bucket-for-tootsie/runs")


def test_two_overlapping_cli_runs_on_one_s3_prefix_run_each_step_once(bucket: str, tmp_path: Path) -> None:
    path = write_experiment(tmp_path, HELD)
    argv = cli_command("run", str(path), "--prefix", f"{bucket}/runs", "--json")
    first, second, first_pid = run_overlapping(argv, tmp_path)
    assert [s["status"] for s in first] == [s["status"] for s in second] == ["SUCCESS"] * 3
    held = {s["name"]: s for s in second}["exp/a"]
    assert (
        held["reason"].startswith("skip: SUCCESS at")
        and f"(waited while pid {first_pid} on host {socket.gethostname()} ran it)" in held["reason"]
    )
    assert sorted(executions(tmp_path)) == ["a", "b", "c"]


def test_a_sigkilled_step_on_s3_has_no_success_is_reported_interrupted_and_resumes(bucket: str, tmp_path: Path) -> None:
    body = """
a = Step("exp/a", work, Cfg(label="a"))
b = Step("exp/b", work, Cfg(label="b", inputs=(a.ref(),), block=True))
STEPS = [b]
"""
    path = write_experiment(tmp_path, body)
    prefix = f"{bucket}/runs"
    slow_lease = {"TOOTSIE_LEASE_SECONDS": "60", "TOOTSIE_HEARTBEAT_SECONDS": "5"}
    proc = subprocess.Popen(
        cli_command("run", str(path), "--prefix", prefix),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=cli_env(TOOTSIE_TEST_BLOCK="1", **slow_lease),
    )
    deadline = time.monotonic() + 60
    while not list((tmp_path / "cache" / "staging").rglob("exp/b-*/started")):
        assert proc.poll() is None and time.monotonic() < deadline, "step b never started"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    finish(proc, timeout=60)

    status = run_cli("status", str(path), "--prefix", prefix, "--json", **slow_lease)
    steps = {s["name"]: s for s in json.loads(status.stdout.splitlines()[-1])["steps"]}
    assert steps["exp/a"]["status"] == "SUCCESS"
    assert steps["exp/b"]["status"] == "FAILED"
    assert steps["exp/b"]["detail"] == f"interrupted: owner pid {proc.pid} on host {socket.gethostname()} is gone"
    assert _status(steps["exp/b"]["output_path"]) == "RUNNING"

    rerun = run_cli("run", str(path), "--prefix", prefix, "--json", **slow_lease)
    assert rerun.returncode == 0, rerun.stderr
    steps = {s["name"]: s for s in json.loads(rerun.stdout.splitlines()[-1])["steps"]}
    assert steps["exp/b"]["status"] == "SUCCESS"
    assert executions(tmp_path) == ["a", "b", "b"]


@pytest.mark.slow
def test_ray_workers_copy_inputs_and_upload_outputs_without_a_shared_filesystem(bucket: str, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="the Ray backend is an extra: pip install 'tootsie[ray]'")
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False
    )  # workers inherit the moto endpoint from os.environ
    try:
        report = run_experiment(load_experiment(write_experiment(tmp_path, CHAIN)), f"{bucket}/runs", backend="ray")
    finally:
        ray.shutdown()
    assert report.ok, [(s.name, s.error) for s in report.steps]
    outputs = {s.name: s.output_path for s in report.steps}
    assert _cat(storage.join(outputs["exp/b"], "done.txt")) == b"b"
    assert b"in Ray worker pid" in _cat(storage.join(outputs["exp/b"], ".executor.log"))
    pids = {line.split()[1] for line in (tmp_path / "executions.log").read_text().splitlines()}
    assert str(os.getpid()) not in pids


TINY_DEMO = f"""
import importlib.util

spec = importlib.util.spec_from_file_location("demo_for_s3_test", {str(DEMO_FILE)!r})
demo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo)
STEPS = demo.build_steps(demo.TINY)
"""


@pytest.mark.slow
def test_the_tiny_demo_runs_end_to_end_with_an_s3_prefix(bucket: str, tmp_path: Path) -> None:
    experiment = tmp_path / "tiny_demo.py"
    experiment.write_text(TINY_DEMO)
    prefix = f"{bucket}/demo"

    first = run_cli("demo", "--experiment", str(experiment), "--prefix", prefix, "--json", timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = json.loads(first.stdout.splitlines()[-1])
    assert summary["ok"] and summary["prefix"] == prefix
    assert all(step["status"] == "SUCCESS" and step["ran"] for step in summary["steps"])
    assert summary["bpb"]["final"]["macro_avg"] < summary["bpb"]["init"]["macro_avg"]
    assert summary["artifacts"]["summary"].startswith(f"{prefix}/demo/summary-")
    assert storage.read_json(summary["artifacts"]["summary"]) is not None
    assert (storage.read_bytes(summary["artifacts"]["loss_plot"]) or b"")[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<html" in (storage.read_bytes(summary["artifacts"]["report"]) or b"")

    second = run_cli("demo", "--experiment", str(experiment), "--prefix", prefix, "--json", timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert not any(step["ran"] for step in json.loads(second.stdout.splitlines()[-1])["steps"])
