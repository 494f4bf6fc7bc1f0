"""A preempted step (errors.Preempted) ends the run: recorded FAILED, its output uploaded, the stop passed on."""

import dataclasses
import uuid
from pathlib import Path

import pytest

from tootsie import storage
from tootsie.errors import Preempted
from tootsie.executor import Step, run_experiment
from tootsie.executor.graph import build_graph


@dataclasses.dataclass(frozen=True)
class Label:
    """A step's only setting."""

    name: str


def preempted_step(config: Label, output_path: str) -> None:
    """Write a log line, then stop as a SIGTERMed training run does."""
    (Path(output_path) / "metrics.jsonl").write_text(f'{{"step": 0, "label": "{config.name}"}}\n')
    raise Preempted(1, f"{output_path}/checkpoints/step-000001")


def later_step(config: Label, output_path: str) -> None:
    """A step that must not run once the run was preempted."""
    (Path(output_path) / "ran.txt").write_text(config.name)


def test_a_preempted_step_on_an_object_store_uploads_its_output_and_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOTSIE_CACHE_DIR", str(tmp_path / "cache"))
    prefix = f"memory://tootsie-{uuid.uuid4().hex[:8]}/runs"
    steps = [Step("exp/train", preempted_step, Label("train")), Step("exp/other", later_step, Label("other"))]
    outputs = {node.step.name: node.output_path for node in build_graph(steps, prefix).nodes}

    with pytest.raises(Preempted, match="stopped after step 1"):
        run_experiment(steps, prefix)
    assert storage.read_bytes(storage.join(outputs["exp/train"], "metrics.jsonl")) == b'{"step": 0, "label": "train"}\n'
    status = storage.read_json(storage.join(outputs["exp/train"], ".executor_status.json"))
    assert status is not None and status["status"] == "FAILED"
    assert storage.read_bytes(storage.join(outputs["exp/other"], "ran.txt")) is None
