"""Run metadata: what produced an output, written to `.executor_info.json` next to it.

The hash says *which* config an output belongs to; the metadata says everything
else needed to reproduce or audit it: the full config (unhashed fields too),
the version that was hashed, the tootsie version and git commits of the tootsie
source and of the experiment, key package versions, Python, host, pid, the
CPUs the process may use (XLA CPU splits matmuls over that many threads, which
changes training's bits: docs/reproducibility.md), start and end times,
duration and final status. The environment part is collected
once per run (it runs `git`), then stamped into every step's file.
"""

import dataclasses
import datetime
import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import tootsie
from tootsie import storage
from tootsie.executor.graph import Node

INFO_FILE = ".executor_info.json"
KEY_PACKAGES = ("jax", "jaxlib", "equinox", "optax", "numpy", "pyarrow", "tokenizers")


def git_sha(directory: str | os.PathLike[str]) -> str | None:
    """`git rev-parse HEAD` in `directory`, or None when it is not in a repository or git is missing."""
    try:
        result = subprocess.run(
            ["git", "-C", os.fspath(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and sha else None


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask): XLA CPU's intra-op thread count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    """Installed versions of `names`, leaving out packages that are not installed."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


@dataclasses.dataclass(frozen=True)
class Environment:
    """Facts about the code and machine of one run, shared by all its steps' metadata files."""

    tootsie_version: str
    """`tootsie.__version__`."""
    tootsie_git: str | None
    """Commit of the tootsie source tree, None when it is not a git checkout."""
    experiment: str | None
    """Absolute path of the experiment file, None when steps were passed in directly."""
    experiment_git: str | None
    """Commit of the experiment file's directory, None when unknown."""
    packages: dict[str, str]
    """Versions of the key packages that are installed."""
    python: str
    """Python version, e.g. "3.11.7"."""
    host: str
    """Hostname."""
    pid: int
    """Process id of the runner."""
    cpus: int
    """CPUs the process may run on (its affinity mask): XLA CPU's thread count, which changes training's bits."""

    @classmethod
    def collect(cls, experiment_path: str | os.PathLike[str] | None) -> "Environment":
        """Gather the facts now (runs `git` up to twice)."""
        experiment = None if experiment_path is None else os.path.abspath(os.fspath(experiment_path))
        return cls(
            tootsie_version=tootsie.__version__,
            tootsie_git=git_sha(Path(tootsie.__file__).parent),
            experiment=experiment,
            experiment_git=None if experiment is None else git_sha(Path(experiment).parent),
            packages=package_versions(),
            python=platform.python_version(),
            host=socket.gethostname(),
            pid=os.getpid(),
            cpus=usable_cpus(),
        )


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat()


def write_info(
    node: Node,
    environment: Environment,
    *,
    status: str,
    started: float,
    ended: float | None = None,
    error: str | None = None,
) -> None:
    """Atomically write the metadata file of `node`, local or in object storage.

    Written at the start with `ended=None`, and again at the end.
    """
    payload: dict[str, Any] = {
        "name": node.step.name,
        "description": node.step.description,
        "hash": node.hash,
        "output_path": node.output_path,
        "config": node.full_config,
        "version": node.version,
        "tootsie_version": environment.tootsie_version,
        "git": {"tootsie": environment.tootsie_git, "experiment": environment.experiment_git},
        "experiment": environment.experiment,
        "packages": environment.packages,
        "python": environment.python,
        "host": environment.host,
        "pid": environment.pid,
        "cpus": environment.cpus,
        "start_time": _iso(started),
        "end_time": _iso(ended),
        "seconds": None if ended is None else round(ended - started, 3),
        "status": status,
        "error": error,
    }
    storage.write_json(storage.join(node.output_path, INFO_FILE), payload)


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What the metadata file says about the last attempt of a step."""

    seconds: float | None
    """Duration of the last finished attempt, None if none finished."""
    error: str | None
    """"<ExceptionType>: <message>" of the last attempt if it failed."""


def recorded(directory: str | os.PathLike[str]) -> Recorded:
    """Duration and error of the last attempt recorded in `directory`'s metadata file (None when absent)."""
    payload = storage.read_json(storage.join(os.fspath(directory), INFO_FILE)) or {}
    seconds, error = payload.get("seconds"), payload.get("error")
    return Recorded(
        seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
        error=error if isinstance(error, str) else None,
    )
