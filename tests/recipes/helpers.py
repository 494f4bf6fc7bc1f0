"""Shared by the recipe tests: the seed tables read from `../shared/seeds`, and the experiment modules."""

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"
needs_seeds = pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the seed documents are not at {SEEDS}")


def seed_table(file: str, *anchors: str) -> list[list[str]]:
    """Body rows (cells) of the first markdown table after `anchors`, each found after the previous one."""
    text = (SEEDS / file).read_text(encoding="utf-8")
    position = 0
    for anchor in anchors:
        position = text.index(anchor, position)
    lines = text[position:].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return table[2:]


def number(cell: str) -> float:
    """A table cell such as "30.69%", "18,500" or "10x" as a number."""
    return float(cell.rstrip("%x").replace(",", ""))


def load_experiment_module(name: str) -> ModuleType:
    """Import `experiments/<name>.py` with no $TOOTSIE_COMPONENTS (every component unset)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TOOTSIE_COMPONENTS", raising=False)
        spec = importlib.util.spec_from_file_location(f"recipe_test_{name}", REPO / "experiments" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert "TOOTSIE_COMPONENTS" not in os.environ
    return module
