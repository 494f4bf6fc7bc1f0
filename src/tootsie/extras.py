"""Optional dependencies: which extra brings which modules, checked before anything runs.

A command or step that needs an optional dependency says so up front, so a
missing one fails in one line that names the install command, before any
output directory is made, and is never mistaken for bad data.
"""

import importlib.util
from collections.abc import Iterable

from tootsie.errors import TootsieError

EXTRAS: dict[str, tuple[str, ...]] = {
    "demo": ("resiliparse", "fastwarc"),
    "web": ("resiliparse", "fastwarc", "trafilatura", "lingua"),
    "ray": ("ray",),
    "s3": ("s3fs",),
    "wandb": ("wandb",),
    "tensorboard": ("tensorboardX",),
    "hf": ("transformers", "torch"),
    "lmeval": ("lm_eval",),
}
"""Extra name (pyproject's optional-dependencies) -> the top-level modules it must make importable."""


class MissingExtra(TootsieError):
    """An optional dependency is not installed; the message names the `pip install` that brings it."""


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The names in `modules` that cannot be imported here (found without importing them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require(extras: Iterable[str], *, purpose: str) -> None:
    """Raise MissingExtra naming `pip install "tootsie[EXTRA]"` when a module of any of `extras` is missing."""
    for extra in extras:
        if extra not in EXTRAS:
            raise ValueError(f"unknown extra {extra!r}; known extras: {', '.join(sorted(EXTRAS))}")
        missing = missing_modules(EXTRAS[extra])
        if missing:
            raise MissingExtra(
                f"{purpose} needs {', '.join(missing)}, which is not installed: "
                f'pip install "tootsie[{extra}]" (in a checkout: pip install -e ".[{extra}]")'
            )
