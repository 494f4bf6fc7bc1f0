"""The dashboard's metrics index, run discovery and JSON API, and that it serves nothing outside its roots."""

import fnmatch
import http.client
import json
import os
import time
import tomllib
from pathlib import Path

import pytest

from tootsie.cli.main import main
from tootsie.executor.status import Status, write_status
from tootsie.report.dashboard.metrics_index import MetricsIndex
from tootsie.report.dashboard.registry import RunRegistry
from tootsie.report.dashboard.runs import find_runs, root_labels, run_status
from tootsie.report.dashboard.server import Dashboard, start_in_thread

SECRET = "NEVER-SERVED-7f3a"
"""Content of the files outside the root; no response may contain it."""


def _record(step: int, loss: float = 3.0) -> dict[str, object]:
    return {"step": step, "loss": loss - 0.01 * step, "tokens": 64 * (step + 1), "lr": 1e-3, "phase": "stable"}


def _write(path: Path, steps: range, mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode, encoding="utf-8") as handle:
        handle.writelines(json.dumps(_record(s)) + "\n" for s in steps)


def _get(dashboard: Dashboard, path: str, host: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    """A raw GET (the path sent as is, no client-side normalization)."""
    address, port = dashboard.server.server_address[:2]
    connection = http.client.HTTPConnection(address, port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host or f"127.0.0.1:{port}")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def test_index_reads_new_complete_lines_once_and_serves_records_after_a_step(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _write(path, range(3))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("not json\n" + json.dumps(_record(3))[:10])  # a damaged line, then step 3 half written
    index = MetricsIndex(path)
    index.refresh()
    assert (index.records, index.skipped_lines, index.latest.step) == (3, 1, 2)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(_record(3))[10:] + "\n")
    revision, body = index.records_since(1)
    assert revision == 0 and [r["step"] for r in json.loads(body)] == [2, 3]
    assert index.latest.tokens == 256 and index.latest.loss == pytest.approx(2.97)
    assert index.records_since(3) == (0, b"[]")


def test_index_starts_over_when_the_trainer_rewrites_the_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _write(path, range(10))
    index = MetricsIndex(path)
    index.refresh()
    _write(tmp_path / "tmp.jsonl", range(4))  # a resume or rewind: temp file, then rename over the log
    (tmp_path / "tmp.jsonl").replace(path)
    revision, body = index.records_since(-1)
    assert revision == 1 and [r["step"] for r in json.loads(body)] == [0, 1, 2, 3]
    assert index.latest.step == 3


def test_runs_are_found_under_an_executor_prefix_and_a_plain_run_with_their_status(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    done, failed = prefix / "train" / "pretrain-ab12", prefix / "train" / "cooldown-cd34"
    _write(done / "metrics.jsonl", range(5))
    write_status(done, Status.SUCCESS)
    _write(failed / "metrics.jsonl", range(2))
    write_status(failed, Status.RUNNING)  # no live lease: the process is gone
    _write(prefix / "summary-ef56" / "metrics.jsonl", range(5))
    (prefix / "summary-ef56" / "summary.json").write_text("{}")
    _write(done / "checkpoints" / "step-4" / "metrics.jsonl", range(1))  # inside a run: never a run of its own
    _write(prefix / "train" / "pretrain-ab12.damaged-20261127T182005Z" / "metrics.jsonl", range(5))  # moved aside
    _write(prefix / "train" / "cooldown-cd34.stale-20261127T182005Z-2" / "metrics.jsonl", range(5))
    pending = prefix / "train" / "sft-0a1b"
    pending.mkdir(parents=True)
    (pending / "config.json").write_text(json.dumps({"num_steps": 10, "model": {}}))
    plain = tmp_path / "run"
    _write(plain / "metrics.jsonl", range(3))
    (plain / "config.json").write_text(json.dumps({"num_steps": 100, "model": {}}))
    runs = find_runs(root_labels([prefix, plain]))
    assert [run.id for run in runs] == [
        "prefix/train/cooldown-cd34",
        "prefix/train/pretrain-ab12",
        "prefix/train/sft-0a1b",
        "run",
    ]
    rows = {row["id"]: row for row in RunRegistry(root_labels([prefix, plain])).rows()}
    assert {k: v["status"] for k, v in rows.items()} == {
        "prefix/train/cooldown-cd34": "failed",
        "prefix/train/pretrain-ab12": "done",
        "prefix/train/sft-0a1b": "pending",
        "run": "running",
    }
    assert rows["run"] | {"path": None} == {
        "id": "run",
        "path": None,
        "status": "running",
        "step": 2,
        "tokens": 192,
        "loss": pytest.approx(2.98),
        "num_steps": 100,
        "revision": 0,
        "records": 3,
        "rewinds": [],
    }
    old = time.time() - 3600
    os.utime(plain / "metrics.jsonl", (old, old))
    assert run_status(runs[-1], 2, 100) == "stopped" and run_status(runs[-1], 99, 100) == "done"


def test_api_lists_runs_and_two_polls_while_a_run_writes_show_a_higher_step(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a"
    _write(run / "metrics.jsonl", range(5))
    (run / "rewinds.json").write_text(
        json.dumps({"rewinds": [{"spike_step": 2, "detected_at": 4, "to_step": 1, "skipped_data_steps": [1, 5]}]})
    )
    dashboard = start_in_thread(RunRegistry(root_labels([tmp_path / "runs"])))
    try:
        status, body, _ = _get(dashboard, "/api/runs")
        (first,) = json.loads(body)
        assert status == 200 and (first["id"], first["step"]) == ("runs/a", 4)
        assert first["rewinds"] == [{"spike_step": 2, "from_step": 4, "to_step": 1, "skipped_data_steps": [1, 5]}]
        _write(run / "metrics.jsonl", range(5, 9), mode="a")
        (second,) = json.loads(_get(dashboard, "/api/runs")[1])
        assert second["step"] == 8 > first["step"]
        status, body, headers = _get(dashboard, "/api/runs/runs%2Fa/metrics?since=6")
        assert status == 200 and [r["step"] for r in json.loads(body)] == [7, 8]
        assert headers["X-Tootsie-Revision"] == "0"
        status, body, _ = _get(dashboard, "/")
        assert status == 200 and b"/static/vendor/uPlot.iife.min.js" in body
        assert _get(dashboard, "/static/vendor/uPlot.iife.min.js")[0] == 200
        assert _get(dashboard, "/api/runs/runs%2Fa/metrics?since=x")[0] == 400
        assert _get(dashboard, "/api/runs", host="attacker.example:80")[0] == 403
    finally:
        dashboard.close()


def test_nothing_outside_the_roots_is_served_traversal_or_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside / "metrics.jsonl", range(3))
    (outside / "secret.txt").write_text(SECRET)
    with open(outside / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": 3, "note": SECRET}) + "\n")
    root = tmp_path / "root"
    _write(root / "good" / "metrics.jsonl", range(2))
    (root / "linked-dir").symlink_to(outside, target_is_directory=True)
    (root / "linked-file").mkdir()
    (root / "linked-file" / "metrics.jsonl").symlink_to(outside / "metrics.jsonl")
    dashboard = start_in_thread(RunRegistry(root_labels([root])))
    try:
        runs = json.loads(_get(dashboard, "/api/runs")[1])
        assert [run["id"] for run in runs] == ["root/good"]
        attempts = [
            "/api/runs/../../etc/passwd",
            "/api/runs/../../etc/passwd/metrics",
            "/api/runs/%2e%2e%2f%2e%2e%2fetc%2fpasswd/metrics",
            "/api/runs/%2E%2E/%2E%2E/outside/metrics?since=-1",
            "/api/runs/root%2Flinked-dir/metrics?since=-1",
            "/api/runs/root/linked-file/metrics?since=-1",
            f"/api/runs/{outside}/metrics?since=-1",
            "/static/../server.py",
            "/static/%2e%2e/server.py",
            "/static/vendor/%2e%2e/%2e%2e/server.py",
            "/../../etc/passwd",
            "/..%2f..%2fetc%2fpasswd",
            f"/{outside}/secret.txt",
            "/static//etc/passwd",
        ]
        for path in attempts:
            status, body, _ = _get(dashboard, path)
            assert status == 404, (path, status)
            assert SECRET.encode() not in body and b"root:" not in body, path
    finally:
        dashboard.close()


def test_cli_refuses_a_missing_root_and_a_busy_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", str(tmp_path / "missing")]) == 2
    assert "dashboard root not found" in capsys.readouterr().err
    busy = start_in_thread(RunRegistry(root_labels([tmp_path])))
    try:
        port = busy.server.server_address[1]
        assert main(["dashboard", str(tmp_path), "--port", str(port)]) == 2
        assert f"cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err
    finally:
        busy.close()


def test_every_static_file_is_package_data_and_uplot_ships_with_its_license() -> None:
    """The wheel carries what the page loads: pyproject's package-data globs cover every file under static/."""
    package = Path(__file__).resolve().parents[2] / "src" / "tootsie" / "report" / "dashboard"
    pyproject = tomllib.loads((package.parents[3] / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["tootsie.report.dashboard"]
    files = [p.relative_to(package).as_posix() for p in (package / "static").rglob("*") if p.is_file()]
    assert {"static/vendor/uPlot.iife.min.js", "static/vendor/LICENSE", "static/dashboard.js"} <= set(files)
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)] == []
    assert "MIT License" in (package / "static" / "vendor" / "LICENSE").read_text(encoding="utf-8")
