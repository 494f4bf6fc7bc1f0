"""A wheel of this repository, installed in a fresh virtualenv, runs `tootsie demo` and `--example-config` anywhere.

Both commands run in an empty working directory: this is what `pip install
tootsie` gives a user, with no source checkout and no `experiments/`. The heavy
dependencies (JAX and friends) are not reinstalled: the fresh environment reads
them from this one's site-packages through a `.pth` file. Python does not
process the `.pth` files inside a directory a `.pth` names, so this
environment's editable install of tootsie stays out of the fresh one, which the
test checks by asking where `tootsie` comes from.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tootsie.configfile import load_config
from tootsie.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT = 180
"""Seconds for one packaging command (copy, wheel build, venv, install); each takes a few seconds."""
RUN_TIMEOUT = 240
"""Seconds for one tootsie command; `--example-config` takes ~20 s and `demo --tiny` ~35 s on 2 CPU cores."""


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `command`, failing the test with its output when it exits non-zero (or is killed at `timeout`)."""
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        output = f"{str(error.stdout)[-2000:]}\n{str(error.stderr)[-2000:]}"
        pytest.fail(f"{command} still ran after {timeout} s; killed it. Its output ended:\n{output}")
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _build_wheel(tmp_path: Path, env: dict[str, str]) -> Path:
    """A wheel built offline from a copy of the sources (so the build writes nothing into the checkout)."""
    source = tmp_path / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    _run([*pip_wheel, "-w", str(wheels), str(source)], tmp_path, env, BUILD_TIMEOUT)
    (wheel,) = wheels.glob("tootsie-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path, env: dict[str, str]) -> Path:
    """A new virtualenv holding only the wheel; this environment's site-packages supply the dependencies."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env, BUILD_TIMEOUT)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)]
    _run(install, tmp_path, env, BUILD_TIMEOUT)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    fresh_site = Path(_run([str(python), "-c", purelib], tmp_path, env, BUILD_TIMEOUT).stdout.strip())
    parent_sites = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    pth = fresh_site / "tootsie_test_dependencies.pth"
    pth.write_text("".join(f"{site}\n" for site in parent_sites), encoding="utf-8")
    return venv


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_wheel_in_a_fresh_venv_runs_the_demo_and_the_example_config_from_an_empty_dir(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(JAX_PLATFORMS="cpu", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    wheel = _build_wheel(tmp_path, env)
    venv = _fresh_venv(tmp_path, wheel, env)
    empty = tmp_path / "empty"
    empty.mkdir()

    where = _run([str(venv / "bin" / "python"), "-c", "import tootsie; print(tootsie.__file__)"], empty, env, 60)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the wheel's copy, not this checkout's src/

    tootsie = str(venv / "bin" / "tootsie")
    example = _run([tootsie, "train", "--example-config"], empty, env, RUN_TIMEOUT)
    (empty / "example.yaml").write_text(example.stdout, encoding="utf-8")
    config = load_config(empty / "example.yaml", TrainConfig, root="train")
    assert set(config.data.caches) == {"code", "prose"}
    for cache in config.data.caches.values():  # built under the default prefix, in the working directory
        assert Path(cache).is_relative_to(empty / "tootsie-demo") and Path(cache).is_dir(), cache

    demo = _run([tootsie, "demo", "--tiny", "--out", "demo-out", "--json"], empty, env, RUN_TIMEOUT)
    summary = json.loads(demo.stdout.splitlines()[-1])
    assert summary["ok"] and all(step["status"] == "SUCCESS" for step in summary["steps"]), summary["steps"]
    assert summary["bpb"]["final"]["macro_avg"] < summary["bpb"]["init"]["macro_avg"], summary["bpb"]
    report = Path(summary["artifacts"]["report"])
    assert report.is_relative_to(empty / "demo-out") and report.is_file(), report
