"""Damaged outputs are noticed: `status` shows DAMAGED naming the files, `run` moves the output aside and reruns it
and everything downstream of it, `--check-digests` re-hashes."""

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tootsie.executor import RunReport, Status, experiment_status, load_experiment, run_experiment
from tootsie.executor.aside import move_aside
from tootsie.executor.lease import LEASE_FILE, MUTEX_FILE
from tootsie.executor.manifest import MANIFEST_FILE, build_manifest
from tootsie.executor.plan import NO_MANIFEST
from tootsie.executor.status import STATUS_FILE

from .helpers import executions, write_experiment

Cli = Callable[..., tuple[int, str, str]]

DIAMOND = """
def write_two(config, output_path):
    \"\"\"work(), then a 4096-byte cache file and a 100-byte shard; fails when TOOTSIE_TEST_FAIL names the step.\"\"\"
    work(config, output_path)
    if os.environ.get("TOOTSIE_TEST_FAIL") == config.label:
        raise RuntimeError(f"asked to fail {config.label}")
    os.makedirs(os.path.join(output_path, "cache"), exist_ok=True)
    with open(os.path.join(output_path, "cache", "tokens.npy"), "wb") as handle:
        handle.write(bytes([ord(config.label)]) * 4096)
    with open(os.path.join(output_path, "shard.bin"), "wb") as handle:
        handle.write(b"s" * 100)


a = Step("exp/a", write_two, Cfg(label="a"))
b = Step("exp/b", write_two, Cfg(label="b", inputs=(a.ref("done.txt"),)))
d = Step("exp/d", write_two, Cfg(label="d", inputs=(b.ref("done.txt"),)))
c = Step("exp/c", write_two, Cfg(label="c"))
STEPS = [d, c]
"""
"""exp/a -> exp/b -> exp/d, and exp/c on its own."""

TRUNCATED = "cache/tokens.npy: 10 bytes, recorded 4096"


def run(tmp_path: Path, **kwargs: object) -> RunReport:
    path = tmp_path / "exp.py"
    if not path.exists():
        write_experiment(tmp_path, DIAMOND)
    return run_experiment(load_experiment(path), tmp_path / "out", experiment_path=path, **kwargs)  # type: ignore[arg-type]


def outputs(report: RunReport) -> dict[str, Path]:
    return {step.name: Path(step.output_path) for step in report.steps}


def damage_a(directory: Path) -> None:
    """Truncate a's token cache to 10 bytes and delete its shard."""
    with open(directory / "cache" / "tokens.npy", "r+b") as handle:
        handle.truncate(10)
    (directory / "shard.bin").unlink()


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_status_shows_damaged_naming_the_files_and_the_plan_says_what_a_run_would_do(tmp_path: Path, cli: Cli) -> None:
    first = run(tmp_path)
    paths = outputs(first)
    damage_a(paths["exp/a"])
    args = (str(tmp_path / "exp.py"), "--prefix", str(tmp_path / "out"))

    code, out, _ = cli("status", *args)
    assert code == 1
    row = next(line for line in out.splitlines() if " exp/a " in line)
    assert row.split()[0] == "DAMAGED" and f"damaged: {TRUNCATED}; shard.bin: missing" in row
    assert all(line.split()[0] == "SUCCESS" for line in out.splitlines()[2:] if " exp/a " not in line)
    assert next(line for line in out.splitlines() if " exp/d " in line).endswith(
        "a run reruns it (input remade: exp/b)"
    )

    code, out, _ = cli("status", *args, "--json")
    steps = {step["name"]: step for step in last_json(out)["steps"]}
    assert code == 1 and steps["exp/a"]["status"] == "DAMAGED"
    assert steps["exp/a"]["damage"] == [TRUNCATED, "shard.bin: missing"]
    assert steps["exp/a"]["manifest"] == {"digest": first.steps[0].manifest.digest, "files": 3}
    assert steps["exp/c"]["status"] == "SUCCESS" and "damage" not in steps["exp/c"] and "detail" not in steps["exp/c"]
    assert steps["exp/b"]["detail"] == "a run reruns it (input remade: exp/a)"
    assert len(steps["exp/c"]["manifest"]["digest"]) == 64

    code, out, _ = cli("run", *args, "--dry-run", "--json")
    reasons = {step["name"]: step["reason"] for step in last_json(out)["steps"]}
    assert reasons["exp/a"] == f"run: damaged: {TRUNCATED}; shard.bin: missing"
    assert reasons["exp/b"] == "run after: exp/a (input remade: exp/a)"
    assert reasons["exp/d"] == "run after: exp/b (input remade: exp/b)"
    assert reasons["exp/c"].startswith("skip: SUCCESS at ")
    assert sorted(p.name for p in paths["exp/a"].parent.iterdir()) == sorted(p.name for p in paths.values())


def test_run_moves_the_damaged_output_aside_and_reruns_it_and_downstream_only(tmp_path: Path, cli: Cli) -> None:
    first = run(tmp_path)
    paths = outputs(first)
    damage_a(paths["exp/a"])
    (paths["exp/a"] / "leftover.txt").write_text("not in the manifest")

    code, out, err = cli("run", str(tmp_path / "exp.py"), "--prefix", str(tmp_path / "out"), "--json")
    assert (code, err) == (0, "")
    assert executions(tmp_path) == ["a", "b", "d", "c", "a", "b", "d"]
    assert f"step exp/a: damaged: {TRUNCATED}; shard.bin: missing" in out
    steps = {step["name"]: step for step in last_json(out)["steps"]}
    assert [steps[name]["status"] for name in ("exp/a", "exp/b", "exp/d", "exp/c")] == ["SUCCESS"] * 4
    assert steps["exp/a"]["damage"] == [TRUNCATED, "shard.bin: missing"]
    assert steps["exp/c"]["reason"].startswith("skip: SUCCESS at ") and "moved_to" not in steps["exp/c"]

    aside = Path(steps["exp/a"]["moved_to"])
    assert aside.parent == paths["exp/a"].parent and aside.name.startswith(f"{paths['exp/a'].name}.damaged-")
    assert f"earlier output moved to {aside}" in steps["exp/a"]["detail"]
    assert (aside / "cache" / "tokens.npy").stat().st_size == 10 and (aside / "leftover.txt").exists()
    assert {STATUS_FILE, MANIFEST_FILE, ".executor.log"} <= {p.name for p in aside.iterdir()}
    assert not (aside / LEASE_FILE).exists()
    for name in ("exp/b", "exp/d"):
        stale = Path(steps[name]["moved_to"])
        assert stale.name.startswith(f"{paths[name].name}.stale-") and (stale / "done.txt").exists()
        assert "damage" not in steps[name]

    # Rerun from a clean directory: nothing left over, the same content as the first time.
    rerun = paths["exp/a"]
    assert not (rerun / "leftover.txt").exists() and (rerun / "cache" / "tokens.npy").stat().st_size == 4096
    assert steps["exp/a"]["manifest"]["digest"] == first.steps[0].manifest.digest
    log = (rerun / ".executor.log").read_text()
    assert f"moved its output to {aside}" in log and "shard.bin: missing" in log

    again = run(tmp_path)
    assert again.ok and all(step.reason.startswith("skip") for step in again.steps)
    assert [
        step.status for step in experiment_status(load_experiment(tmp_path / "exp.py"), tmp_path / "out").steps
    ] == [Status.SUCCESS] * 4


def test_check_digests_catches_a_change_of_the_same_size(tmp_path: Path, cli: Cli) -> None:
    paths = outputs(run(tmp_path))
    (paths["exp/c"] / "shard.bin").write_bytes(b"t" * 100)
    args = (str(tmp_path / "exp.py"), "--prefix", str(tmp_path / "out"), "--json")
    code, out, _ = cli("status", *args)
    assert code == 0 and all(step["status"] == "SUCCESS" for step in last_json(out)["steps"])
    code, out, _ = cli("status", *args, "--check-digests")
    steps = {step["name"]: step for step in last_json(out)["steps"]}
    assert code == 1 and steps["exp/c"]["status"] == "DAMAGED"
    [line] = steps["exp/c"]["damage"]
    assert line.startswith("shard.bin: sha256 ") and ", recorded " in line

    assert run(tmp_path).ok and executions(tmp_path) == ["a", "b", "d", "c"]  # a plain run only lists sizes
    assert run(tmp_path, check_digests=True).ok and executions(tmp_path) == ["a", "b", "d", "c", "c"]
    assert (paths["exp/c"] / "shard.bin").read_bytes() == b"s" * 100


def test_a_step_without_a_manifest_is_success_and_says_so(tmp_path: Path, cli: Cli) -> None:
    paths = outputs(run(tmp_path))
    (paths["exp/c"] / MANIFEST_FILE).unlink()
    code, out, _ = cli("status", str(tmp_path / "exp.py"), "--prefix", str(tmp_path / "out"), "--json")
    steps = {step["name"]: step for step in last_json(out)["steps"]}
    assert code == 0 and steps["exp/c"]["status"] == "SUCCESS"
    assert steps["exp/c"]["manifest"] is None and steps["exp/c"]["detail"] == NO_MANIFEST
    assert steps["exp/a"]["manifest"] is not None and "detail" not in steps["exp/a"]


def test_an_unreadable_manifest_is_damage(tmp_path: Path) -> None:
    paths = outputs(run(tmp_path))
    (paths["exp/c"] / MANIFEST_FILE).write_text('{"format": 1}')
    status = {
        step.name: step for step in experiment_status(load_experiment(tmp_path / "exp.py"), tmp_path / "out").steps
    }
    assert status["exp/c"].status is Status.DAMAGED and status["exp/c"].damage == (f"{MANIFEST_FILE}: unreadable",)


def test_when_the_rerun_fails_downstream_is_still_moved_aside_so_it_never_resumes_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = outputs(run(tmp_path))
    damage_a(paths["exp/a"])
    monkeypatch.setenv("TOOTSIE_TEST_FAIL", "a")
    failed = {step.name: step for step in run(tmp_path).steps}
    assert failed["exp/a"].status is Status.FAILED and failed["exp/a"].moved_to is not None
    assert failed["exp/b"].status is failed["exp/d"].status is Status.DEP_FAILED
    assert failed["exp/b"].moved_to is not None and not (paths["exp/b"] / "done.txt").exists()
    assert not (paths["exp/d"] / "done.txt").exists()
    monkeypatch.delenv("TOOTSIE_TEST_FAIL")
    fixed = run(tmp_path)
    assert fixed.ok and executions(tmp_path)[-3:] == ["a", "b", "d"]
    assert all(step.moved_to is None for step in fixed.steps)


def test_move_aside_keeps_the_lease_and_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step = tmp_path / "exp" / "a-0123456789ab"
    assert move_aside(str(step), "damaged") is None  # nothing there
    step.mkdir(parents=True)
    for name in (LEASE_FILE, MUTEX_FILE):
        (step / name).write_text("held")
    assert move_aside(str(step), "damaged") is None  # only the lease
    moved = []
    rename = os.rename
    monkeypatch.setattr(os, "rename", lambda src, dst: (moved.append(Path(src).name), rename(src, dst)))
    for name in ("z.bin", STATUS_FILE, MANIFEST_FILE, ".executor.log", ".executor_info.json"):
        (step / name).write_text(name)
    (step / "sub").mkdir()
    (step / "sub" / "x").write_text("x")
    first = move_aside(str(step), "damaged")
    assert first is not None and moved == [
        "sub",
        "z.bin",
        ".executor_info.json",
        ".executor.log",
        STATUS_FILE,
        MANIFEST_FILE,
    ]
    assert sorted(p.name for p in step.iterdir()) == sorted([LEASE_FILE, MUTEX_FILE])
    (step / "z.bin").write_text("again")
    second = move_aside(str(step), "damaged")
    assert second is not None and second != first and (Path(first) / "z.bin").read_text() == "z.bin"


def test_the_lease_heartbeat_temporary_file_is_never_in_a_manifest(tmp_path: Path) -> None:
    """A heartbeat caught mid-write while the step is hashed would be recorded, then found missing: DAMAGED."""
    directory = tmp_path / "a"
    directory.mkdir()
    (directory / "data.txt").write_text("x")
    (directory / "..executor_lease.json.123.abcdef01.tmp").write_text("{}")
    (directory / ".data.txt.tmp-9").write_text("a step's own temporary file is output")
    assert [entry.path for entry in build_manifest(str(directory)).files] == [".data.txt.tmp-9", "data.txt"]
