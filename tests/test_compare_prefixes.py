"""scripts/compare_prefixes.py: two prefixes compared step by step through their manifests."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from tootsie.executor import Step, run_experiment
from tootsie.executor.manifest import build_manifest, write_manifest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_prefixes.py"


@dataclasses.dataclass(frozen=True)
class NoteConfig:
    text: str


def write_note(config: NoteConfig, output_path: str) -> None:
    """Write the note."""
    Path(output_path, "note.txt").write_text(config.text)


def _compare(a: Path, b: Path) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(a), str(b), "--json"], capture_output=True, text=True, check=False
    )
    return done.returncode, json.loads(done.stdout)


def test_identical_prefixes_pass_and_a_changed_file_is_named_with_its_producer(tmp_path: Path) -> None:
    step = Step("notes/one", write_note, NoteConfig("hello"))
    first, second = run_experiment([step], tmp_path / "a"), run_experiment([step], tmp_path / "elsewhere" / "b")
    code, report = _compare(tmp_path / "a", tmp_path / "elsewhere" / "b")
    assert (
        code == 0
        and report["identical"]
        and [row["step"] for row in report["steps"]] == [first.steps[0].name + "-" + first.steps[0].hash]
    )

    changed = Path(second.steps[0].output_path)
    (changed / "note.txt").write_text("HELLO")  # same hash, other content: what the manifests must reveal
    write_manifest(str(changed), build_manifest(str(changed)))
    info = json.loads((changed / ".executor_info.json").read_text())
    (changed / ".executor_info.json").write_text(json.dumps(info | {"python": "3.99.0"}))
    code, report = _compare(tmp_path / "a", tmp_path / "elsewhere" / "b")
    [row] = report["steps"]
    assert code == 1 and not row["identical"] and row["differing"] == ["note.txt"]
    assert row["producers"] == {"python": [info["python"], "3.99.0"]}
