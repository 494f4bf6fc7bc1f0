"""Load an experiment file: a plain Python file that defines `STEPS = [...]`.

The file is imported by path under a fresh module name, so two experiment files
with the same stem never collide, and with its directory on `sys.path` while it
is imported, so it can import sibling helper modules. Every way this can go
wrong (missing file, syntax error, an exception while importing, no STEPS, a
non-Step inside STEPS) becomes a one-line TootsieError that names the file.
"""

import importlib.util
import itertools
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
    return _steps_of(module, os.fspath(path))


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
