"""Optional dependencies: which extra brings which modules, checked before anything runs.

A command or step that needs an optional dependency says so up front, so a
missing one fails in one line that names the install command, before any
output directory is made, and is never mistaken for bad data:

- a step function declares its extras with `executor.step.requires_extras`;
  the runner checks every step that would run before it makes a directory;
- a CLI command calls `require` (or `require_modules`, when it needs only some
  of an extra's modules, e.g. one extraction engine) before it does any work;
- code that imports an optional module at run time uses `import_extra`, so
  even a missed check fails with the same message;
- the datakit engine turns an ImportError raised inside a shard into a
  `MissingExtra` (`dependency_error`) and fails the job at once instead of
  counting a failed shard.

Example: without resiliparse, `require(("demo",), purpose="tootsie demo")`
raises `MissingExtra("tootsie demo needs resiliparse, fastwarc, which are not
installed: pip install "tootsie[demo]" (in a checkout: pip install -e ".[demo]")")`.
"""

import importlib
import importlib.util
from collections.abc import Iterable
from types import ModuleType

from tootsie.errors import TootsieError

EXTRAS: dict[str, tuple[str, ...]] = {
    "demo": ("resiliparse", "fastwarc"),
    "web": ("resiliparse", "fastwarc", "trafilatura", "lxml_html_clean", "lingua", "tld"),
    "ray": ("ray",),
    "s3": ("s3fs",),
    "wandb": ("wandb",),
    "tensorboard": ("tensorboardX",),
    "hf": ("transformers", "torch", "accelerate"),
    "lmeval": ("lm_eval",),
}
"""Extra name (pyproject's optional-dependencies) -> the top-level modules it must make importable.

Left out: `gpu` (a JAX plugin JAX finds itself), `bench` (peers of one benchmark
script) and the bundles `all` and `dev`.
"""
URL_EXTRAS = {"s3": "s3", "s3a": "s3"}
"""URL scheme -> the extra whose fsspec backend serves it."""


class MissingExtra(TootsieError):
    """An optional dependency is not installed; the message names the `pip install` that brings it."""


def install_hint(extra: str) -> str:
    """The command that installs `extra`, for an installed tootsie and for a checkout."""
    return f'pip install "tootsie[{extra}]" (in a checkout: pip install -e ".[{extra}]")'


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The names in `modules` that cannot be imported here (found without importing them)."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:  # a parent package of a dotted name is missing, or an import hook refuses it
            found = False
        if not found:
            missing.append(name)
    return missing


def _modules_of(extra: str) -> tuple[str, ...]:
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known extras: {', '.join(sorted(EXTRAS))}")
    return EXTRAS[extra]


def require_modules(modules: Iterable[str], *, extra: str, purpose: str) -> None:
    """Raise MissingExtra naming `extra` when any of `modules` (top-level names `extra` brings) is missing."""
    modules = tuple(modules)
    outside = sorted(set(modules) - set(_modules_of(extra)))
    if outside:
        raise ValueError(f"extra {extra!r} does not bring {outside}; it brings {list(EXTRAS[extra])}")
    missing = missing_modules(modules)
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise MissingExtra(f"{purpose} needs {', '.join(missing)}, which {verb} not installed: {install_hint(extra)}")


def require(extras: Iterable[str], *, purpose: str) -> None:
    """Raise MissingExtra naming `pip install "tootsie[EXTRA]"` when a module of any of `extras` is missing."""
    for extra in dict.fromkeys(extras):
        require_modules(_modules_of(extra), extra=extra, purpose=purpose)


def import_extra(name: str, *, extra: str, purpose: str) -> ModuleType:
    """Import the module `name` (dotted names too) that `extra` brings, or raise MissingExtra naming it."""
    require_modules((name.partition(".")[0],), extra=extra, purpose=purpose)
    return importlib.import_module(name)


def require_for_urls(paths: Iterable[str], *, purpose: str) -> None:
    """Raise MissingExtra when a URL among `paths` (s3://...) needs an extra that is missing."""
    for path in paths:
        scheme, separator, _ = str(path).partition("://")
        extra = URL_EXTRAS.get(scheme.lower()) if separator else None
        if extra is not None:
            require((extra,), purpose=f"{purpose} ({path})")


def extra_of(module: str) -> str | None:
    """The smallest extra that brings the top-level module of `module`, None when no extra does."""
    top = module.partition(".")[0]
    bringing = [extra for extra, modules in EXTRAS.items() if top in modules]
    return min(bringing, key=lambda extra: len(EXTRAS[extra])) if bringing else None


def dependency_error(error: BaseException, *, purpose: str) -> MissingExtra | None:
    """`error` as a MissingExtra when it means a missing dependency (one already, or an ImportError), else None."""
    if isinstance(error, MissingExtra):
        return error
    if not isinstance(error, ImportError):
        return None
    module = (error.name or "").partition(".")[0]
    extra = extra_of(module) if module else None
    remedy = install_hint(extra) if extra else "install it; a missing dependency is not bad data"
    reason = " ".join(str(error).split())
    return MissingExtra(f"{purpose} could not import {module or 'a module'} ({reason}): {remedy}")
