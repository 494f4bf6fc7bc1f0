"""`tootsie verify`: finished steps rerun into scratch, manifests compared, the prefix never written."""

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tootsie.executor import load_experiment
from tootsie.executor.manifest import MANIFEST_FILE
from tootsie.executor.verify import SCRATCH_PREFIX, verify_experiment

from .helpers import executions, write_experiment

Cli = Callable[..., tuple[int, str, str]]

BODY = """
from tootsie.executor.portable import portable
from tootsie.executor.step import volatile_outputs


@dataclasses.dataclass(frozen=True)
class Extra:
    label: str
    source: object = None


def noisy(config, output_path):
    with open(os.path.join(output_path, "same.txt"), "w") as handle:
        handle.write(config.label)
    with open(os.path.join(output_path, "noise.bin"), "wb") as handle:
        handle.write(os.urandom(16))


@volatile_outputs("timing.json")
def timed(config, output_path):
    with open(config.source) as source, open(os.path.join(output_path, "copy.txt"), "w") as handle:
        handle.write(source.read())
    with open(os.path.join(output_path, "timing.json"), "w") as handle:
        handle.write(str(time.time()))
    with open(os.path.join(output_path, "source.txt"), "w") as handle:
        handle.write(portable(config.source))


def absolute(config, output_path):
    with open(os.path.join(output_path, "source.txt"), "w") as handle:
        handle.write(config.source)


def resumable(config, output_path):
    if os.environ.get("TOOTSIE_TEST_FLAKY"):
        raise RuntimeError("flaky")
    path = os.path.join(output_path, "count.txt")
    count = int(open(path).read()) if os.path.exists(path) else 0
    with open(path, "w") as handle:
        handle.write(str(count + 1))


a = Step("exp/a", work, Cfg(label="a"))
b = Step("exp/b", timed, Extra("b", a.ref("done.txt")))
count = Step("exp/count", resumable, Extra("count"))
noise = Step("exp/noise", noisy, Extra("noise"))
where = Step("exp/where", absolute, Extra("where", a.ref("done.txt")))
STEPS = [b, count, noise, where]
"""


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    """Relative path -> (sha256, mtime in ns) of every file under `directory`."""
    found = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(directory))] = (
                hashlib.sha256(path.read_bytes()).hexdigest(),
                path.stat().st_mtime_ns,
            )
    return found


@pytest.fixture
def finished(tmp_path: Path, cli: Cli) -> tuple[Path, Path]:
    """The experiment of BODY, run to SUCCESS under tmp_path/out: (experiment file, prefix)."""
    path = write_experiment(tmp_path, BODY)
    prefix = tmp_path / "out"
    code, _, err = cli("run", str(path), "--prefix", str(prefix), "--quiet")
    assert code == 0, err
    return path, prefix


def by_name(payload: dict) -> dict[str, dict]:
    return {step["name"]: step for step in payload["steps"]}


def test_identical_steps_pass_and_random_content_is_named(
    finished: tuple[Path, Path], cli: Cli, tmp_path: Path
) -> None:
    path, prefix = finished
    before = snapshot(prefix)
    code, out, _ = cli("verify", str(path), "--prefix", str(prefix), "--json", "--scratch", str(tmp_path / "s"))
    payload = last_json(out)
    steps = by_name(payload)
    assert code == 1 and not payload["ok"]
    assert list(steps) == ["exp/a", "exp/b", "exp/count", "exp/noise", "exp/where"]
    for name in ("exp/a", "exp/b", "exp/count"):
        assert steps[name]["identical"] and steps[name]["differing"] == [], steps[name]
    assert steps["exp/b"]["volatile"] == ["timing.json"]
    assert steps["exp/noise"]["identical"] is False and steps["exp/noise"]["differing"] == ["noise.bin"]
    assert steps["exp/noise"]["changes"][0].startswith("noise.bin: recorded 16 bytes sha256 ")
    assert all(len(step["hash"]) == 12 and step["seconds"] >= 0 for step in steps.values())
    assert (payload["verified"], payload["differing"], payload["skipped"]) == (5, 2, 0)
    # The rerun saw its input under another prefix: an absolute path recorded instead of a portable one differs.
    assert steps["exp/where"]["differing"] == ["source.txt"]
    # The prefix is untouched: same files, same bytes, same mtimes; the scratch directory is gone.
    assert snapshot(prefix) == before
    assert list((tmp_path / "s").iterdir()) == []
    # Each step really ran again: work() logged a second run of exp/a.
    assert executions(tmp_path) == ["a", "a"]


def test_steps_glob_selects_by_name_and_a_glob_matching_nothing_fails(finished: tuple[Path, Path], cli: Cli) -> None:
    path, prefix = finished
    code, out, _ = cli("verify", str(path), "--prefix", str(prefix), "--steps", "exp/[ab]", "--json")
    payload = last_json(out)
    assert code == 0 and payload["ok"] and list(by_name(payload)) == ["exp/a", "exp/b"]
    code, out, err = cli("verify", str(path), "--prefix", str(prefix), "--steps", "demo/*")
    assert code == 2 and out == ""
    assert (
        err.strip()
        == "tootsie: --steps 'demo/*' matches no step; the steps are: exp/a, exp/b, exp/count, exp/noise, exp/where"
    )


def test_unfinished_and_unrecorded_steps_are_skipped_with_a_reason(finished: tuple[Path, Path], tmp_path: Path) -> None:
    path, prefix = finished
    steps = load_experiment(path)
    a_output = prefix / "exp" / next(p.name for p in (prefix / "exp").iterdir() if p.name.startswith("a-"))
    (a_output / MANIFEST_FILE).unlink()
    noise = next(p for p in (prefix / "exp").iterdir() if p.name.startswith("noise-"))
    (noise / ".executor_status.json").unlink()
    report = verify_experiment(steps, prefix, steps_glob="exp/[abn]*")
    verdicts = {step.name: step for step in report.steps}
    assert verdicts["exp/a"].skipped is not None and verdicts["exp/a"].skipped.startswith("no recorded manifest")
    assert verdicts["exp/b"].skipped is None and verdicts["exp/b"].identical
    assert verdicts["exp/noise"].skipped == "not finished (NOT_STARTED); run the experiment first"
    assert not verdicts["exp/noise"].differs and report.ok
    payload = report.to_json()
    assert payload["steps"][0] == {
        "name": "exp/a",
        "hash": verdicts["exp/a"].hash,
        "identical": False,
        "differing": [],
        "changes": [],
        "volatile": [],
        "recorded_seconds": verdicts["exp/a"].recorded_seconds,
        "skipped": verdicts["exp/a"].skipped,
    }
    only_skipped = verify_experiment(steps, prefix, steps_glob="exp/noise")
    assert not only_skipped.ok and only_skipped.to_json()["verified"] == 0


def test_a_failing_rerun_is_reported_and_fails_the_command(
    finished: tuple[Path, Path], cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, prefix = finished
    monkeypatch.setenv("TOOTSIE_TEST_FLAKY", "1")
    code, out, _ = cli("verify", str(path), "--prefix", str(prefix), "--steps", "exp/count")
    assert code == 1
    row = out.splitlines()[2].split()
    assert row[0] == "FAILED" and row[3] == "exp/count" and "RuntimeError: flaky" in out
    assert out.splitlines()[-1] == "NOT ok: 1 rerun, 1 differing, 0 skipped"


def test_table_names_differing_files_and_keep_leaves_the_rerun(
    finished: tuple[Path, Path], cli: Cli, tmp_path: Path
) -> None:
    path, prefix = finished
    code, out, _ = cli("verify", str(path), "--prefix", str(prefix), "--keep", "--scratch", str(tmp_path / "s"))
    assert code == 1
    lines = out.splitlines()
    assert lines[1].split() == ["VERDICT", "SECONDS", "HASH", "STEP", "NOTE"]
    rows = {line.split()[3]: line.split() for line in lines[2:7]}
    assert (
        rows["exp/a"][0] == "IDENTICAL" and rows["exp/noise"][0] == "DIFFERS" and rows["exp/noise"][-1] == "noise.bin"
    )
    assert any(line.startswith("  exp/noise: noise.bin: recorded 16 bytes") for line in lines)
    (scratch,) = (tmp_path / "s").iterdir()
    assert scratch.name.startswith(SCRATCH_PREFIX) and f"scratch kept: {scratch}" in lines
    (rerun,) = [path for path in scratch.glob("*/exp/noise-*") if not path.is_symlink()]
    assert (rerun / "noise.bin").stat().st_size == 16 and (rerun / MANIFEST_FILE).exists()
    # Beside it, every other step's output is a symlink into the prefix.
    assert sorted(link.name.split("-")[0] for link in rerun.parent.iterdir() if link.is_symlink()) == [
        "a",
        "b",
        "count",
        "where",
    ]
    assert all(link.resolve().parent == prefix / "exp" for link in rerun.parent.iterdir() if link.is_symlink())


def test_scratch_inside_a_step_output_and_remote_prefixes_are_refused(finished: tuple[Path, Path], cli: Cli) -> None:
    path, prefix = finished
    inside = next((prefix / "exp").iterdir()) / "scratch"
    code, out, err = cli("verify", str(path), "--prefix", str(prefix), "--scratch", str(inside))
    assert code == 2 and "is inside the output of step" in err and not inside.exists()
    code, _, err = cli("verify", str(path), "--prefix", "memory://bucket/runs")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "verify needs a local prefix" in err


def test_progress_says_which_step_is_verified(
    finished: tuple[Path, Path], cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, prefix = finished
    monkeypatch.setenv("TOOTSIE_PROGRESS", "plain")
    _, _, err = cli("verify", str(path), "--prefix", str(prefix), "--steps", "exp/[ab]")
    lines = [line.split(" ", 1)[1] for line in err.splitlines()]
    assert lines == ["verify: step 1/2 (50%) exp/a", "verify: step 2/2 (100%) exp/b"]
    assert os.environ["TOOTSIE_PROGRESS"] == "plain"


def test_a_step_recorded_on_another_cpu_count_gets_a_note(finished: tuple[Path, Path], cli: Cli) -> None:
    path, prefix = finished
    (noise,) = (prefix / "exp").glob("noise-*")
    info = json.loads((noise / ".executor_info.json").read_text())
    assert info["cpus"] == len(os.sched_getaffinity(0))
    (noise / ".executor_info.json").write_text(json.dumps({**info, "cpus": 999}))
    code, out, _ = cli("verify", str(path), "--prefix", str(prefix), "--steps", "exp/[an]*")
    steps = by_name(last_json(cli("verify", str(path), "--prefix", str(prefix), "--steps", "exp/[an]*", "--json")[1]))
    assert "note" not in steps["exp/a"]
    assert steps["exp/noise"]["note"].startswith(f"recorded on 999 CPUs, rerun on {len(os.sched_getaffinity(0))}:")
    assert code == 1 and "noise.bin (recorded on 999 CPUs" in out
