"""Output manifests: written before SUCCESS, volatile files listed but not compared, damage named by file."""

import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tootsie.executor import Step, run_experiment
from tootsie.executor.manifest import (
    MANIFEST_FILE,
    FileEntry,
    Manifest,
    build_manifest,
    damage,
    differing,
    digest_damage,
    is_volatile,
    read_manifest,
)
from tootsie.executor.portable import portable
from tootsie.executor.step import volatile_outputs


@dataclasses.dataclass(frozen=True)
class WriteCfg:
    text: str
    upstream: object = None


@volatile_outputs("timings.json")
def write_files(config: WriteCfg, output_path: str) -> None:
    """Write a fixed file, a nested one, a volatile one, and where the input came from (made portable)."""
    Path(output_path, "data.txt").write_text(config.text)
    Path(output_path, "sub").mkdir(exist_ok=True)
    Path(output_path, "sub", "more.bin").write_bytes(b"\x00" * 3000)
    Path(output_path, "timings.json").write_text(json.dumps({"pid": os.getpid()}))
    if config.upstream is not None:
        Path(output_path, "source.txt").write_text(portable(str(config.upstream)))


def _chain(text: str = "hello") -> tuple[Step[WriteCfg], Step[WriteCfg]]:
    first = Step("m/first", write_files, WriteCfg(text))
    second = Step("m/second", write_files, WriteCfg("x", upstream=first.ref("data.txt")))
    return first, second


def test_run_records_a_manifest_before_success(tmp_path: Path) -> None:
    first, second = _chain()
    report = run_experiment([second], tmp_path)
    assert report.ok
    out = report.steps[0].output_path
    manifest = read_manifest(out)
    assert manifest is not None
    assert [e.path for e in manifest.files] == ["data.txt", "sub/more.bin", "timings.json"]
    assert manifest.files[0] == FileEntry("data.txt", 5, manifest.files[0].sha256, False)
    assert manifest.files[2].volatile and manifest.volatile_patterns == ("timings.json",)
    assert MANIFEST_FILE not in {e.path for e in manifest.files}
    # The reader records its input relative to the prefix, as "<name>-<hash>/<file>".
    source = Path(report.steps[1].output_path, "source.txt").read_text()
    assert source == f"m/first-{report.steps[0].hash}/data.txt"


def test_same_step_under_two_prefixes_has_one_digest(tmp_path: Path) -> None:
    one = run_experiment([_chain()[1]], tmp_path / "a")
    two = run_experiment([_chain()[1]], tmp_path / "b")
    for left, right in zip(one.steps, two.steps, strict=True):
        a, b = read_manifest(left.output_path), read_manifest(right.output_path)
        assert a is not None and b is not None
        assert a.digest == b.digest and differing(a, b) == []


def test_volatile_files_are_left_out_of_the_digest(tmp_path: Path) -> None:
    manifest = build_manifest(str(_populate(tmp_path / "a")), ("timings.json",))
    Path(tmp_path / "a" / "timings.json").write_text("other")
    again = build_manifest(str(tmp_path / "a"), ("timings.json",))
    assert manifest.digest == again.digest and differing(manifest, again) == []
    Path(tmp_path / "a" / "data.txt").write_text("changed")
    assert differing(manifest, build_manifest(str(tmp_path / "a"), ("timings.json",))) == ["data.txt"]


def test_damage_names_missing_and_truncated_files(tmp_path: Path) -> None:
    directory = _populate(tmp_path / "a")
    manifest = build_manifest(str(directory))
    assert damage(str(directory), manifest) == []
    with open(directory / "sub" / "more.bin", "r+b") as handle:
        handle.truncate(10)
    (directory / "data.txt").unlink()
    assert damage(str(directory), manifest) == ["data.txt: missing", "sub/more.bin: 10 bytes, recorded 3000"]


def test_digest_damage_finds_same_size_changes(tmp_path: Path) -> None:
    directory = _populate(tmp_path / "a")
    manifest = build_manifest(str(directory))
    (directory / "data.txt").write_text("HELLO")
    assert damage(str(directory), manifest) == []
    [problem] = digest_damage(str(directory), manifest)
    assert problem.startswith("data.txt: sha256 ")


def test_manifest_round_trips_through_json(tmp_path: Path) -> None:
    manifest = build_manifest(str(_populate(tmp_path / "a")), ("*.json",))
    assert Manifest.from_json(json.loads(json.dumps(manifest.to_json())), "m") == manifest


@given(st.lists(st.sampled_from(["a.txt", "logs/x.log", "metrics.jsonl", "ck/step-1/m.npy"]), unique=True))
def test_volatile_matches_whole_paths_or_file_names(paths: list[str]) -> None:
    for path in paths:
        assert is_volatile(path, ("*.log", "metrics.jsonl")) == (path.endswith(".log") or path == "metrics.jsonl")


def test_malformed_manifest_names_the_file(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_FILE).write_text('{"format": 1}')
    with pytest.raises(Exception, match=MANIFEST_FILE):
        read_manifest(str(tmp_path))


def _populate(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "data.txt").write_text("hello")
    (directory / "sub").mkdir()
    (directory / "sub" / "more.bin").write_bytes(b"\x01" * 3000)
    (directory / "timings.json").write_text("{}")
    return directory
