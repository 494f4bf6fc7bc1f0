"""Load an experiment file: a plain Python file that defines `STEPS = [...]`.

The file is imported by path under a fresh module name, so two experiment files
with the same stem never collide, and with its directory on `sys.path` while it
is imported, so it can import sibling helper modules. Every way this can go
wrong (missing file, syntax error, an exception while importing, no STEPS, a
non-Step inside STEPS) becomes a one-line TootsieError that names the file.
An experiment may also define `PLAN` (a JSON-able dict, or a function
returning one), which `tootsie run --json` and `tootsie status --json` add to
their JSON line; the recipes print their phase plan this way.
"""

import importlib.util
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

from tootsie.errors import TootsieError
from tootsie.executor.report import describe_error
from tootsie.executor.step import Step

_counter = itertools.count()


def load_experiment(path: str | os.PathLike[str]) -> list[Step[Any]]:
    """Import the experiment file at `path` and return its module-level `STEPS` as a list of Steps."""
    return _steps_of(_import_experiment(path), os.fspath(path))


def load_experiment_with_plan(path: str | os.PathLike[str]) -> tuple[list[Step[Any]], dict[str, Any] | None]:
    """STEPS and the optional module-level PLAN: a JSON-able dict, or a zero-argument function returning one."""
    module = _import_experiment(path)
    return _steps_of(module, os.fspath(path)), _plan_of(module, os.fspath(path))


def _import_experiment(path: str | os.PathLike[str]) -> Any:
    """The experiment file imported as a fresh module; every failure is a TootsieError naming the file."""
    file = Path(path)
    if not file.exists():
        raise TootsieError(
            f"experiment file {os.fspath(path)!r} not found; pass the path of a .py file that defines STEPS"
        )
    if not file.is_file() or file.suffix != ".py":
        raise TootsieError(
            f"experiment file {os.fspath(path)!r} is not a .py file; pass a Python file that defines STEPS"
        )
    file = file.resolve()
    module_name = f"tootsie_experiment_{next(_counter)}_{file.stem}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise TootsieError(f"cannot import experiment file {os.fspath(path)!r}; pass a Python file that defines STEPS")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(file.parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        sys.modules.pop(module_name, None)
        where = f"{error.filename}, line {error.lineno}" if error.filename else f"line {error.lineno}"
        raise TootsieError(f"experiment file {os.fspath(path)!r} has a syntax error ({where}): {error.msg}") from None
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise TootsieError(f"importing experiment file {os.fspath(path)!r} raised {describe_error(error)}") from error
    finally:
        sys.path.remove(str(file.parent))
    return module


def _steps_of(module: Any, path: str) -> list[Step[Any]]:
    """The module's STEPS, checked to be a list or tuple of Step."""
    if not hasattr(module, "STEPS"):
        raise TootsieError(
            f"experiment file {path!r} has no STEPS; define a module-level STEPS = [...] list of tootsie.executor.Step"
        )
    steps = module.STEPS
    if not isinstance(steps, (list, tuple)):
        raise TootsieError(
            f"STEPS in {path!r} is a {type(steps).__name__}; "
            "define a module-level STEPS = [...] list of tootsie.executor.Step"
        )
    for index, step in enumerate(steps):
        if not isinstance(step, Step):
            raise TootsieError(
                f"STEPS[{index}] in {path!r} is a {type(step).__name__}, not a tootsie.executor.Step; "
                "build it with Step(name=..., fn=..., config=...)"
            )
    return list(steps)


def _plan_of(module: Any, path: str) -> dict[str, Any] | None:
    """The module's PLAN (called when it is a function), checked to be a JSON-able dict; None without one."""
    plan = getattr(module, "PLAN", None)
    if plan is None:
        return None
    if callable(plan):
        try:
            plan = plan()
        except Exception as error:
            raise TootsieError(f"PLAN() in {path!r} raised {describe_error(error)}") from error
    if not isinstance(plan, dict):
        raise TootsieError(
            f"PLAN in {path!r} is a {type(plan).__name__};"
            " define PLAN as a dict of JSON values, or a function returning one"
        )
    try:
        json.dumps(plan, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TootsieError(
            f"PLAN in {path!r} is not JSON-able ({error}); use dicts, lists, strings, finite numbers, booleans and None"
        ) from None
    return plan


def merge_plan(report: dict[str, Any], plan: dict[str, Any] | None, path: str) -> dict[str, Any]:
    """The report's JSON object with the experiment's PLAN keys added; a key both have is an error."""
    if plan is None:
        return report
    clash = sorted(set(plan) & set(report))
    if clash:
        raise TootsieError(f"PLAN in {path!r} uses keys {clash} that the run report already has; rename them")
    return {**report, **plan}
