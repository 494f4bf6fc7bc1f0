"""Every module-level import in the package comes from the base dependencies, so `pip install .` (`make demo`) works.

The test suite runs with every extra installed, so a module that only an extra
brings (jinja2 came with transformers) would pass every other test and fail a
fresh install. This walks the base dependencies of pyproject.toml and their
requirements, and checks each third-party module that a file of src/tootsie
imports at module level (extras are imported inside functions) belongs to one
of them.
"""

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
EXTRA_BACKENDS = {"ray", "lm-eval"}
"""Extras imported at module level by backend modules that tootsie itself imports only when that extra is asked
for (executor.ray_backend, datakit.ray_engine, eval.lm_eval_*); by distribution name."""


def _closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` install, with their own requirements (no extras), by canonical name."""
    seen: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        pending.extend(Requirement(text) for text in metadata.requires(requirement.name) or ())
    return seen


def _module_level_imports() -> set[str]:
    """Top-level names of the absolute imports at module level in src/tootsie."""
    names = set()
    for file in (ROOT / "src" / "tootsie").rglob("*.py"):
        for node in ast.parse(file.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"tootsie", "__future__"}


def test_module_level_imports_are_base_dependencies() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    allowed = _closure(declared) | EXTRA_BACKENDS
    owners = metadata.packages_distributions()
    imported = _module_level_imports()
    assert "jax" in imported and "numpy" in imported  # the scan sees the package's imports
    third_party = {module: owners.get(module, [module]) for module in imported}
    missing = {
        module: dists
        for module, dists in third_party.items()
        if not any(canonicalize_name(dist) in allowed for dist in dists)
    }
    assert missing == {}, (
        f"imported at module level but not a base dependency (add it to pyproject, or import it where used): {missing}"
    )
