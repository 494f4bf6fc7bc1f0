"""Read executor step directories back: their recorded config, inputs and stats.

Every step writes `.executor_info.json` holding its canonical config, in which a
dataclass is `{"__type__": "<class>", ...}` and an input is
`{"__step__": "<name>-<hash>", "subpath": ...}`. A release walks those records
to rebuild a run's history (warm starts) and its data lineage (token cache →
tokenizer, consolidate, dedup, normalize ...). References are resolved against
the prefix the step directory actually sits in, not the recorded absolute path,
so a copied or moved output tree still reads.

Example: `/out/demo/train/cooldown-ab12/` named `demo/train/cooldown` sits in
prefix `/out`; its ref `{"__step__": "demo/train/pretrain-cd34", "subpath": ""}`
resolves to `/out/demo/train/pretrain-cd34`.
"""

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tootsie.datakit.stats import STATS_FILE
from tootsie.errors import TootsieError
from tootsie.executor.hashing import STEP_KEY, TYPE_KEY
from tootsie.executor.metadata import INFO_FILE
from tootsie.jsonfile import read_json


@dataclasses.dataclass(frozen=True)
class StepInfo:
    """One step output directory and what its metadata file recorded."""

    directory: Path
    """Where the output is now."""
    name: str
    """Step name, e.g. "demo/train/cooldown"."""
    hash: str
    """Version hash (the suffix of the directory name)."""
    config: dict[str, Any]
    """Canonical config, unhashed fields included."""
    record: dict[str, Any]
    """The whole metadata file (git commits, package versions, times)."""

    @property
    def id(self) -> str:
        """`<name>-<hash>`: how other steps' configs refer to this one."""
        return f"{self.name}-{self.hash}"

    @property
    def type(self) -> str | None:
        """Class name of the config (`TrainConfig`, `TokenizeConfig`, ...)."""
        return self.config.get(TYPE_KEY)

    @property
    def prefix(self) -> Path:
        """The directory every step of this experiment sits under."""
        return self.directory.parents[len(self.name.split("/")) - 1]

    def resolve(self, value: object) -> Path | None:
        """The path a recorded input (a step ref, or a plain path string) points to; None for anything else."""
        if isinstance(value, dict) and STEP_KEY in value:
            subpath = value.get("subpath") or ""
            return self.prefix / value[STEP_KEY] / subpath if subpath else self.prefix / value[STEP_KEY]
        if isinstance(value, str) and value:
            return Path(value)
        return None

    def stats(self) -> dict[str, Any] | None:
        """The step's `stats.json` (datakit stages count what they drop), if it wrote one."""
        return read_json(self.directory / STATS_FILE)


def read_step(directory: Path) -> StepInfo | None:
    """The step whose output is `directory`, or None when it was not written by the executor."""
    info = read_json(directory / INFO_FILE)
    if info is None or not isinstance(info.get("config"), dict):
        return None
    return StepInfo(
        directory=directory, name=str(info["name"]), hash=str(info["hash"]), config=info["config"], record=info
    )


def find_steps(root: Path) -> list[StepInfo]:
    """Every executor step directory under `root`, in path order."""
    found = (read_step(info.parent) for info in sorted(root.rglob(INFO_FILE)))
    return [step for step in found if step is not None]


def step_refs(value: object) -> Iterator[dict[str, Any]]:
    """Every `{"__step__": ...}` reference inside a canonical config, depth first."""
    if isinstance(value, dict):
        if STEP_KEY in value:
            yield value
            return
        for item in value.values():
            yield from step_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from step_refs(item)


def plain(value: object, step: StepInfo) -> object:
    """A canonical config as plain data: `__type__` tags dropped, step refs replaced by resolved path strings."""
    if isinstance(value, dict):
        if STEP_KEY in value:
            return str(step.resolve(value))
        return {key: plain(item, step) for key, item in value.items() if key != TYPE_KEY}
    if isinstance(value, list):
        return [plain(item, step) for item in value]
    return value


def summary(value: object) -> object:
    """A config for a manifest: `__type__` tags, engine settings and None fields dropped; step refs as their ids."""
    if isinstance(value, dict):
        if STEP_KEY in value:
            return value[STEP_KEY] + (f"/{value['subpath']}" if value.get("subpath") else "")
        return {
            key: summary(item) for key, item in value.items() if key not in (TYPE_KEY, "engine") and item is not None
        }
    if isinstance(value, list):
        return [summary(item) for item in value]
    return value


def load_json(path: Path) -> dict[str, Any]:
    """A JSON object file that must exist (state.json, ledger.json, bpb.json)."""
    payload = read_json(path)
    if payload is None:
        raise TootsieError(f"{path} not found; the run or step that should have written it is unfinished or was moved")
    return payload
