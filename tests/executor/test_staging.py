"""Direct outputs: a step function declared with `direct_outputs` is handed its final output directory."""

import dataclasses
from pathlib import Path

from tootsie.executor import Step, run_experiment
from tootsie.executor.step import direct_outputs


@dataclasses.dataclass(frozen=True)
class Config:
    """A config with nothing in it."""

    value: int = 1
    """Unused."""


SEEN: list[tuple[str, str]] = []


@direct_outputs("checkpoints")
def _writes_checkpoints(config: Config, output_path: str, final_output: str) -> None:
    SEEN.append((output_path, final_output))
    (Path(final_output) / "checkpoints").mkdir(parents=True)
    (Path(final_output) / "checkpoints" / "step-1").write_text("1")


def _plain(config: Config, output_path: str) -> None:
    (Path(output_path) / "out.txt").write_text("plain")


def test_a_local_step_with_direct_outputs_gets_its_own_directory_as_final_output(tmp_path: Path) -> None:
    direct, plain = Step("t/direct", _writes_checkpoints, Config()), Step("t/plain", _plain, Config())
    assert direct.direct_names == ("checkpoints",) and plain.direct_names == ()
    report = run_experiment([direct, plain], tmp_path)
    assert report.ok
    ((output, final),) = SEEN
    assert output == final and (Path(output) / "checkpoints" / "step-1").read_text() == "1"
    assert [path.read_text() for path in tmp_path.rglob("out.txt")] == ["plain"]  # called without final_output
