"""A phenomenon for the CLI tests: one step that writes a results.json from its config, at either scale."""

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from tootsie.executor import Step
from tootsie.recipes.phenomena.registry import results_step_name
from tootsie.recipes.phenomena.results import over_seeds, write_phenomenon

NAME = "qk-norm-spikes"
"""The registered phenomenon this fixture stands in for (its quote and claim fill the results)."""


@dataclass(frozen=True)
class FixtureConfig:
    """The values the step reports, and the verdict they earn."""

    values: tuple[float, ...]
    verdict: str


def write_fixture_results(config: FixtureConfig, output_path: str) -> dict[str, object]:
    """results.json and figure.png with the configured numbers; counts its runs in `runs.txt`."""
    runs = Path(output_path) / "runs.txt"
    Path(output_path).mkdir(parents=True, exist_ok=True)
    runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
    figure = Figure()
    figure.add_subplot().plot(config.values)
    return write_phenomenon(output_path, NAME, config.verdict, {"final_loss": over_seeds(config.values)}, figure)


def build_steps(scale: str) -> list[Step]:
    """One step; the smoke scale reports one seed, the tiny scale three."""
    values = (2.0,) if scale == "smoke" else (2.0, 2.5, 3.0)
    return [Step(results_step_name(NAME), write_fixture_results, FixtureConfig(values, "partial"))]
