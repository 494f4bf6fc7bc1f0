"""The training loop is imported only by the training entry point; `train_loop` reads in at most 40 lines."""

import ast
import inspect
from pathlib import Path

from tootsie.train import trainer

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tootsie"
LOOP_MODULE = "tootsie.train.trainer"
ALLOWED = {"eval/training.py"}
"""Modules outside train/ that may import the loop: the one training entry point."""


def _imports_loop(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(alias.name == LOOP_MODULE for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == LOOP_MODULE:
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "tootsie.train":
            if any(alias.name == "trainer" for alias in node.names):
                return True
    return False


def test_no_module_outside_train_imports_the_training_loop_but_the_entry_point() -> None:
    importers = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if _imports_loop(path)}
    outside = {name for name in importers if not name.startswith("train/")}
    assert outside == ALLOWED, (
        f"import train.state, train.callbacks or train.loading instead: {sorted(outside - ALLOWED)}"
    )


def test_the_import_walk_finds_every_import_form(tmp_path: Path) -> None:
    for line in (
        "import tootsie.train.trainer",
        "from tootsie.train import trainer",
        "from tootsie.train.trainer import x",
    ):
        (tmp_path / "m.py").write_text(line + "\n")
        assert _imports_loop(tmp_path / "m.py"), line
    (tmp_path / "m.py").write_text("from tootsie.train.state import TrainState\n")
    assert not _imports_loop(tmp_path / "m.py")


def test_train_loop_reads_in_at_most_40_lines() -> None:
    lines = inspect.getsource(trainer.train_loop).splitlines()
    assert len(lines) <= 40, f"train_loop is {len(lines)} lines; move the new work into a callback (train.callbacks)"
