"""Find the training runs under the dashboard's roots and say where each stands.

A run is a directory holding `metrics.jsonl` (not a summary's merged copy),
or one whose `config.json` or executor metadata holds a training config (a
step that has started but not logged yet). Runs are addressed by their path
under the root they were found in: root `demo` holding `train/pretrain-ab12`
gives the id `demo/train/pretrain-ab12`; a root that is itself a run is
addressed by its name. Symlinks are neither followed nor read: the walk stays
on the real directories under each root, and a file whose real path leaves
the root is not a run's file.

An output the executor moved aside before a rerun (`<run>.damaged-<time>`,
`<run>.stale-<time>`, `executor.aside`) is not a run and is not walked.

Status: an executor step reports its executor status (`SUCCESS` → done,
`RUNNING` with a live lease → running, `FAILED` or an interrupted run →
failed); a `tootsie train` directory has no status file, so it is done once
its last step is `num_steps - 1`, running while its metrics file changed in
the last `RUNNING_SECONDS`, and stopped otherwise.
"""

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tootsie.errors import TootsieError
from tootsie.executor.aside import ASIDE_NAME
from tootsie.executor.lease import LeaseSettings
from tootsie.executor.metadata import INFO_FILE
from tootsie.executor.status import STATUS_FILE, Status, observe
from tootsie.jsonfile import read_json
from tootsie.monitor.metrics_log import CONFIG_FILE, METRICS_FILE
from tootsie.report.run_summary import SUMMARY_FILE

SKIPPED_DIRECTORIES = frozenset({"checkpoints", "profile", "__pycache__", "node_modules"})
"""Directories never holding a run, not walked (a run's checkpoints alone can hold thousands of files)."""
MAX_DEPTH = 8
"""Directory levels walked below a root; an executor prefix nests runs 2-3 levels deep."""
RUNNING_SECONDS = 300.0
"""A `tootsie train` run without executor files counts as running while its metrics changed this recently."""
EXECUTOR_STATUS = {
    Status.SUCCESS: "done",
    Status.RUNNING: "running",
    Status.FAILED: "failed",
    Status.DEP_FAILED: "failed",
    Status.NOT_STARTED: "pending",
}


@dataclass(frozen=True)
class RunDirectory:
    """A training run found under a root."""

    id: str
    """Its address: the root's label, then its path under the root."""
    path: Path
    """The directory (real path, inside its root)."""
    root: Path
    """The root it was found under (real path)."""

    def file(self, name: str) -> Path | None:
        """`name` inside the run if it is a regular file whose real path stays under the root, else None."""
        path = self.path / name
        try:
            real = path.resolve(strict=True)
        except (FileNotFoundError, RuntimeError, OSError):
            return None
        return real if real.is_file() and _inside(real, self.root) else None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def root_labels(roots: Sequence[str | Path]) -> dict[str, Path]:
    """Label → real root directory: each root's name, made unique with -2, -3, ... when names repeat."""
    labels: dict[str, Path] = {}
    for given in roots:
        root = Path(given).expanduser()
        if not root.is_dir():
            raise TootsieError(
                f"dashboard root not found or not a directory: {given}; pass an executor prefix"
                " (tootsie demo --out, a --prefix) or a training output directory (tootsie train --out)"
            )
        real = root.resolve()
        base = real.name or "root"
        label, count = base, 1
        while label in labels:
            count += 1
            label = f"{base}-{count}"
        labels[label] = real
    return labels


def train_config(directory: Path) -> dict[str, object] | None:
    """The training config of a run directory (`config.json`, else executor metadata), None if it has none."""
    for name, pick in ((CONFIG_FILE, lambda d: d), (INFO_FILE, lambda d: d.get("config"))):
        try:
            payload = read_json(directory / name)
        except TootsieError:
            continue
        config = pick(payload) if isinstance(payload, dict) else None
        if isinstance(config, dict) and "num_steps" in config and "model" in config:
            return config
    return None


def _is_run(directory: Path, files: set[str]) -> bool:
    if SUMMARY_FILE in files:  # a summary's metrics.jsonl merges runs that are listed on their own
        return False
    if METRICS_FILE in files:
        return True
    return bool(files & {CONFIG_FILE, INFO_FILE}) and train_config(directory) is not None


def find_runs(labels: dict[str, Path]) -> list[RunDirectory]:
    """Every run under each labelled root, in path order; symlinked directories are not entered."""
    found: list[RunDirectory] = []
    for label, root in labels.items():
        for directory, subdirectories, files in os.walk(root, followlinks=False):
            here = Path(directory)
            relative = here.relative_to(root)
            regular = {name for name in files if not (here / name).is_symlink()}
            if _is_run(here, regular):
                run_id = label if relative == Path(".") else f"{label}/{relative.as_posix()}"
                found.append(RunDirectory(run_id, here, root))
                subdirectories.clear()  # runs do not nest
                continue
            if len(relative.parts) >= MAX_DEPTH:
                subdirectories.clear()
            subdirectories[:] = sorted(
                name
                for name in subdirectories
                if name not in SKIPPED_DIRECTORIES and not name.startswith(".") and not ASIDE_NAME.search(name)
            )
    return found


def run_status(run: RunDirectory, last_step: int | None, num_steps: int | None, *, now: float | None = None) -> str:
    """running, done, failed, stopped or pending (see the module docstring)."""
    moment = time.time() if now is None else now
    if run.file(STATUS_FILE) is not None or run.file(INFO_FILE) is not None:
        try:
            return EXECUTOR_STATUS[observe(run.path, LeaseSettings.from_env(), now=moment).status]
        except TootsieError:
            return "failed"  # a damaged status or lease file: the executor itself refuses it
    if last_step is not None and num_steps is not None and last_step + 1 >= num_steps:
        return "done"
    metrics = run.file(METRICS_FILE)
    if metrics is None:
        return "pending"
    return "running" if moment - metrics.stat().st_mtime < RUNNING_SECONDS else "stopped"
