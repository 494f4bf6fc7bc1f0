"""Layers import downward only (docs/style.md rule 12): a lower layer never imports a higher one."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tootsie"
# Lowest first; a module may import its own layer and any layer before it (docs/architecture.md
# describes each). `monitor` is the run-log library the trainer logs through, so it sits below
# `train`; `report` (the HTML report and the dashboard) reads runs back as files, far above.
# `corpora` (demo inputs) sits above `data` so the pipeline never depends on it; `demos`
# (experiments shipped in the package, e.g. the README's demo) strings the layers below together.
LAYERS = [
    "errors",
    "extras",
    "jsonfile",
    "configfile",
    "storage",
    "executor",
    "datakit",
    "data",
    "corpora",
    "models",
    "monitor",
    "train",
    "eval",
    "rl",
    "scaling",
    "report",
    "recipes",
    "release",
    "demos",
    "cli",
]


def _imported_layers(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        for name in names:
            parts = name.split(".")
            if parts[0] == "tootsie" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("layer", [layer for layer in LAYERS if (PACKAGE / layer).is_dir()])
def test_layer_imports_only_lower_layers(layer: str) -> None:
    allowed = set(LAYERS[: LAYERS.index(layer) + 1])
    for path in (PACKAGE / layer).rglob("*.py"):
        upward = {name for name in _imported_layers(path) if name in LAYERS and name not in allowed}
        assert not upward, f"{path.relative_to(PACKAGE)} imports higher layers {sorted(upward)}"
