"""A command whose extra is missing fails in one line naming `pip install "tootsie[EXTRA]"`, before any step directory.

Each command runs in a real `tootsie` process whose `sitecustomize` (on
PYTHONPATH) swaps the import system's path finder for one that does not see
the hidden modules: `importlib.util.find_spec` gives None and `import` raises
ModuleNotFoundError, as in an install without the extra. Nothing is uninstalled.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import communicate
from tootsie.cli.main import main

REPO = Path(__file__).resolve().parents[2]
HIDING_FINDER = '''
import os
import sys
from importlib.machinery import PathFinder

HIDDEN = frozenset(filter(None, os.environ["TOOTSIE_TEST_HIDDEN_MODULES"].split(",")))


class HidingPathFinder(PathFinder):
    """The standard path finder, blind to the hidden top-level modules."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(fullname, path, target)


sys.meta_path[sys.meta_path.index(PathFinder)] = HidingPathFinder
'''
DEMO_REMEDY = 'pip install "tootsie[demo]"'


def run_without(tmp_path: Path, hidden: tuple[str, ...], *command: str) -> tuple[int, str]:
    """Run `tootsie COMMAND` from the checkout with `hidden` modules not importable; return (exit code, stderr)."""
    site = tmp_path / "hiding-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(HIDING_FINDER, encoding="utf-8")
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH")))),
        "TOOTSIE_TEST_HIDDEN_MODULES": ",".join(hidden),
        "JAX_PLATFORMS": "cpu",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tootsie.cli.main", *command],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = communicate(process, timeout=240)
    return process.returncode, err


def assert_one_line(err: str, remedy: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and remedy in lines[0], err
    return lines[0]


@pytest.mark.slow
def test_demo_without_its_extra_fails_before_any_directory(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    code, err = run_without(tmp_path, ("resiliparse", "fastwarc"), "demo", "--out", str(out))
    line = assert_one_line(err, DEMO_REMEDY)
    assert code == 2 and line.startswith("tootsie: the demo needs resiliparse, fastwarc, which are not installed: ")
    assert not out.exists()


@pytest.mark.slow
def test_running_the_demo_experiment_without_the_extra_fails_before_any_step_directory(tmp_path: Path) -> None:
    prefix = tmp_path / "runs"
    code, err = run_without(
        tmp_path, ("fastwarc",), "run", str(REPO / "experiments" / "demo.py"), "--prefix", str(prefix)
    )
    line = assert_one_line(err, DEMO_REMEDY)
    assert code == 2 and "step demo/extracted/web needs fastwarc" in line
    assert not prefix.exists()


@pytest.mark.slow
def test_datakit_extract_names_the_web_extra_per_engine(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html><title>t</title><body><p>text</p></body></html>", encoding="utf-8")
    out = tmp_path / "docs"
    code, err = run_without(
        tmp_path, ("trafilatura",), "datakit", "extract", str(page), "--out", str(out), "--engine", "trafilatura"
    )
    line = assert_one_line(err, 'pip install "tootsie[web]"')
    assert code == 2 and line.startswith("tootsie: datakit extract --extractor trafilatura needs trafilatura")
    assert not out.exists()


def test_commands_check_their_extras_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "lingua", None)
    assert main(["datakit", "langid", str(tmp_path / "docs"), "--out", str(tmp_path / "lang")]) == 2
    assert_one_line(capsys.readouterr().err, 'pip install "tootsie[web]"')
    monkeypatch.setitem(sys.modules, "s3fs", None)
    assert main(["datakit", "normalize", "s3://bucket/raw", "--out", str(tmp_path / "docs")]) == 2
    assert "(s3://bucket/raw) needs s3fs" in assert_one_line(capsys.readouterr().err, 'pip install "tootsie[s3]"')
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert main(["export", "hf", str(tmp_path / "run"), "--out", str(tmp_path / "hf"), "--verify"]) == 2
    assert_one_line(capsys.readouterr().err, 'pip install "tootsie[hf]"')
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    suite = ["eval", "suite", "--checkpoint", str(tmp_path), "--suite", "core", "--data-dir", str(tmp_path / "d")]
    assert main(suite) == 2
    assert_one_line(capsys.readouterr().err, 'pip install "tootsie[lmeval]"')
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["demo", "--out", str(tmp_path / "demo"), "--backend", "ray"]) == 2
    assert_one_line(capsys.readouterr().err, 'pip install "tootsie[ray]"')
    assert sorted(path.name for path in tmp_path.iterdir()) == []
