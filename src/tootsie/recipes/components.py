"""Mixture components → token caches: the paths the user supplies, and the check before a real run.

A recipe names its datasets (`nemotron_cc/medium`, `dolmino/flan`, ...); it
cannot know where their token caches are. The user writes a JSON or YAML file
mapping component name → token cache directory (relative paths are relative to
that file; fsspec URLs pass through) and points `TOOTSIE_COMPONENTS` at it.
Without one, every component's path is the marker `UNSET`: the plan still
builds, hashes and dry-runs, and `train_phase` (the recipes' step function)
stops before training with an error that lists the components still missing.

Example `components.json`:

    {"nemotron_cc/medium": "/data/caches/nemotron_cc_medium", "starcoderdata": "gs://bucket/starcoder"}
"""

import os
from pathlib import Path

from tootsie.configfile import read_yaml
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.executor.step import direct_outputs, volatile_outputs
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.train.config import TrainConfig
from tootsie.train.loading import CHECKPOINTS

COMPONENTS_ENV = "TOOTSIE_COMPONENTS"
UNSET = "<unset>"
"""Cache path of a component the user has not supplied."""


def load_components(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a component → token cache mapping from a JSON/YAML file; relative paths resolve against its directory."""
    file = Path(path)
    data = read_yaml(file, "components file", "write a JSON/YAML mapping of component name to token cache directory")
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in data.items()):
        raise TootsieError(
            f"components file {file} must map component names to non-empty "
            'path strings, e.g. {"starcoderdata": "/data/starcoder"}'
        )
    return {name: value if "://" in value else str((file.parent / value).resolve()) for name, value in data.items()}


def components_from_env() -> dict[str, str]:
    """The mapping in the file named by $TOOTSIE_COMPONENTS, or {} when it is not set."""
    path = os.environ.get(COMPONENTS_ENV)
    return load_components(path) if path else {}


def missing_components(caches: dict[str, str]) -> list[str]:
    """Components whose cache is unset, or a local path that does not exist.

    URLs and references to steps, which run first, are not checked.
    """
    return sorted(
        name
        for name, path in caches.items()
        if isinstance(path, str) and (path == UNSET or ("://" not in path and not Path(path).exists()))
    )


@direct_outputs(CHECKPOINTS)
@volatile_outputs(METRICS_FILE)  # each record's step_seconds and tokens_per_s are wall-clock (docs/reproducibility.md)
def train_phase(config: TrainConfig, output_path: str, *, final_output: str | None = None) -> None:
    """A recipe phase's step: check every component has a token cache, then train.

    Training runs the in-loop evaluation `config.eval` asks for.
    """
    missing = missing_components(config.data.caches)
    if missing:
        paths = {name: config.data.caches[name] for name in missing}
        raise TootsieError(
            f"{len(missing)} mixture component(s) have no token cache: {paths}; write a JSON file mapping each "
            f"component name to its token cache directory and set {COMPONENTS_ENV}=<file> (see docs/recipes.md)"
        )
    run_training(config, output_path, final_output=final_output)
