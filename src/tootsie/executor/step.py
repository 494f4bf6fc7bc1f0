"""Steps and references to their outputs.

A `Step` is a named function applied to a frozen-dataclass config. A config
field may hold a `StepRef` (from `step.ref()`, `output_of(step)` or `ref / "x"`)
anywhere inside it: in a nested dataclass, a tuple, a list or a dict value.
Those referenced steps are the step's dependencies; before the function runs,
each reference is replaced by the string path of that step's output.

Every config field is part of the step's version unless declared with
`unhashed(...)`, which is for fields that cannot change the output (worker
counts, logging, progress bars). Forgetting to mark such a field only costs a
recomputation; forgetting to hash a field that matters would silently reuse a
stale output, which is why hashing is the default.

A step may also declare the `Resources` it needs (CPUs, GPUs, memory). They
are scheduling hints for the Ray backend, never part of the version: the same
config on a bigger machine gives the same output. Likewise, never hashed: the
output files that may legitimately differ between reruns (`volatile`: logs,
timings; listed in the manifest but never compared) and the optional extras
the function needs (`requires`, checked before anything runs). A step
function declares both for every step that uses it with the
`volatile_outputs` and `requires_extras` decorators.

A function that must write some top-level outputs straight to the step's
final location, even when the executor stages the step on local disk for
object storage (training's `checkpoints/`, so a preempted host loses nothing),
declares them with `direct_outputs`; the executor then calls it as
`fn(config, output_path, final_output=URL)` and leaves those names out of
staging and upload (`executor.staging`).
"""

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

C = TypeVar("C")

VOLATILE_ATTRIBUTE = "__tootsie_volatile__"
REQUIRES_ATTRIBUTE = "__tootsie_requires__"
DIRECT_ATTRIBUTE = "__tootsie_direct__"
F = TypeVar("F", bound=Callable[..., Any])
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+")


def _path_problem(path: str) -> str | None:
    """Why `path` is not a relative path of plain segments, or None when it is."""
    if path.startswith("/"):
        return "it starts with '/'; it must be relative"
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            return f"it has an empty, '.' or '..' segment ({segment!r})"
    return None


@dataclasses.dataclass(frozen=True)
class Resources:
    """What one run of a step needs from a Ray node; the local backend runs steps in-process and ignores it."""

    cpus: float = 1.0
    """CPU cores Ray reserves for the step (Ray's `num_cpus`); 0 lets it share a node freely."""
    gpus: float = 0.0
    """GPUs Ray reserves (Ray's `num_gpus`; it sets CUDA_VISIBLE_DEVICES for the step)."""
    memory_gb: float | None = None
    """Memory Ray reserves, in GiB (Ray's `memory`); None reserves none."""

    def __post_init__(self) -> None:
        for name in ("cpus", "gpus"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"Resources.{name} must be a finite number >= 0, got {value!r}; e.g. Resources(cpus=2)"
                )
        if self.memory_gb is not None and not (
            isinstance(self.memory_gb, (int, float)) and math.isfinite(self.memory_gb) and self.memory_gb > 0
        ):
            raise ValueError(
                f"Resources.memory_gb must be None or a finite number > 0, got {self.memory_gb!r}; e.g. memory_gb=8"
            )


@dataclasses.dataclass(frozen=True, eq=False)
class Step(Generic[C]):
    """A unit of work: `fn(resolved_config, output_path)` writes the step's output directory.

    Steps compare and hash by identity; two Step objects with the same name and
    config have the same version and share one output directory.
    """

    name: str
    """Path-like name, e.g. "demo/tokenize"; the output directory is `<prefix>/<name>-<hash>`."""
    fn: Callable[[C, str], None]
    """Called as `fn(resolved_config, output_path)` with every StepRef replaced by a path string."""
    config: C
    """A frozen dataclass instance; every field is hashed unless declared with `unhashed()`."""
    description: str = ""
    """One line shown in plans and metadata; not part of the version."""
    resources: Resources = Resources()
    """CPUs, GPUs and memory a Ray worker reserves for the step; not part of the version."""
    volatile: tuple[str, ...] = ()
    """Glob patterns of output files that may differ between reruns (beside the function's own); not hashed."""
    requires: tuple[str, ...] = ()
    """Optional extras (pyproject names, e.g. "web") the step needs beside the function's own; not hashed."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(
                f"Step name must be a non-empty string, got {self.name!r}; use a path like 'demo/tokenize'"
            )
        problem = _path_problem(self.name)
        bad = [s for s in self.name.split("/") if s and not _SEGMENT.fullmatch(s)]
        if problem is None and bad:
            problem = f"segment {bad[0]!r} has characters outside [A-Za-z0-9_.-]"
        if problem is not None:
            raise ValueError(f"Step name {self.name!r} is not valid: {problem}; use a path like 'demo/tokenize'")
        if not isinstance(self.resources, Resources):
            raise ValueError(
                f"Step {self.name!r}: resources must be a tootsie.executor.step.Resources, got {self.resources!r}; "
                "e.g. resources=Resources(cpus=4, gpus=1)"
            )
        if not callable(self.fn):
            raise ValueError(f"Step {self.name!r}: fn must be callable as fn(config, output_path), got {self.fn!r}")
        for field, example in (("volatile", "('metrics.jsonl',)"), ("requires", "('web',)")):
            value = getattr(self, field)
            if not (isinstance(value, tuple) and all(isinstance(item, str) and item for item in value)):
                raise ValueError(
                    f"Step {self.name!r}: {field} must be a tuple of non-empty strings, got {value!r}; "
                    f"e.g. {field}={example}"
                )
        config_type = type(self.config)
        if not dataclasses.is_dataclass(self.config) or isinstance(self.config, type):
            raise ValueError(
                f"Step {self.name!r}: config must be a frozen dataclass instance, got {config_type.__name__}; "
                "declare the config class with @dataclasses.dataclass(frozen=True)"
            )
        if not config_type.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise ValueError(
                f"Step {self.name!r}: config class {config_type.__qualname__} is not frozen; "
                "declare it with @dataclasses.dataclass(frozen=True) so the config cannot change after hashing"
            )

    @property
    def volatile_patterns(self) -> tuple[str, ...]:
        """The function's declared volatile patterns, then the step's own, without repeats."""
        return tuple(dict.fromkeys(getattr(self.fn, VOLATILE_ATTRIBUTE, ()) + self.volatile))

    @property
    def required_extras(self) -> tuple[str, ...]:
        """The function's declared extras, then the step's own, without repeats."""
        return tuple(dict.fromkeys(getattr(self.fn, REQUIRES_ATTRIBUTE, ()) + self.requires))

    @property
    def direct_names(self) -> tuple[str, ...]:
        """Top-level outputs the function writes straight to its final location (`direct_outputs`)."""
        return tuple(getattr(self.fn, DIRECT_ATTRIBUTE, ()))

    def ref(self, subpath: str = "") -> "StepRef":
        """A reference to this step's output directory, or to `subpath` inside it."""
        return StepRef(self, subpath)


@dataclasses.dataclass(frozen=True)
class StepRef:
    """A dependency on `step`'s output; resolves to `<output path>[/<subpath>]`."""

    step: Step[Any]
    """The step whose output is referenced."""
    subpath: str = ""
    """Relative path inside the output directory; empty for the directory itself."""

    def __post_init__(self) -> None:
        if not isinstance(self.step, Step):
            raise ValueError(f"StepRef needs a Step, got {type(self.step).__name__}; use step.ref() or output_of(step)")
        if not isinstance(self.subpath, str):
            raise ValueError(f"StepRef subpath must be a string, got {self.subpath!r}")
        problem = _path_problem(self.subpath) if self.subpath else None
        if problem is not None:
            raise ValueError(
                f"subpath {self.subpath!r} of a reference to step {self.step.name!r} is not valid: {problem}; "
                "use a path inside the output directory like 'tokenizer/vocab.json'"
            )

    def __truediv__(self, more: str) -> "StepRef":
        """`ref / "file.json"`: the same step with `more` appended to the subpath."""
        return StepRef(self.step, f"{self.subpath}/{more}" if self.subpath else more)


def output_of(step: Step[Any], subpath: str = "") -> StepRef:
    """A reference to `step`'s output directory (or `subpath` inside it); same as `step.ref(subpath)`."""
    return StepRef(step, subpath)


def volatile_outputs(*patterns: str) -> Callable[[F], F]:
    """Declare that a step function's outputs matching `patterns` (globs) may differ between reruns."""

    def mark(fn: F) -> F:
        setattr(fn, VOLATILE_ATTRIBUTE, tuple(getattr(fn, VOLATILE_ATTRIBUTE, ())) + patterns)
        return fn

    return mark


def requires_extras(*extras: str) -> Callable[[F], F]:
    """Declare the optional extras (e.g. "web") a step function needs; the runner checks them before anything runs."""

    def mark(fn: F) -> F:
        setattr(fn, REQUIRES_ATTRIBUTE, tuple(getattr(fn, REQUIRES_ATTRIBUTE, ())) + extras)
        return fn

    return mark


def direct_outputs(*names: str) -> Callable[[F], F]:
    """Declare top-level outputs a step function writes straight to its final location, never staged.

    The executor calls such a function as `fn(config, output_path, final_output=URL)`,
    where `final_output` is the step's output directory (a URL under an object-store
    prefix, else `output_path` itself); the function writes `names` under it.
    """

    def mark(fn: F) -> F:
        setattr(fn, DIRECT_ATTRIBUTE, tuple(getattr(fn, DIRECT_ATTRIBUTE, ())) + names)
        return fn

    return mark


def map_refs(value: Any, on_ref: Callable[[StepRef], Any]) -> Any:
    """`value` with every StepRef inside it replaced by `on_ref(ref)`.

    Walks dataclass fields, tuples, lists and dict values; containers are
    rebuilt (dataclasses through `dataclasses.replace`) only where something
    changed, so a value without references comes back as the same object.
    """
    if isinstance(value, StepRef):
        return on_ref(value)
    if isinstance(value, (Step, type)):
        return value
    if dataclasses.is_dataclass(value):
        changes = {}
        for field in dataclasses.fields(value):
            old = getattr(value, field.name)
            new = map_refs(old, on_ref)
            if new is not old:
                changes[field.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, (list, tuple)):
        items = [map_refs(item, on_ref) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, dict):
        mapped = {key: map_refs(item, on_ref) for key, item in value.items()}
        return value if all(mapped[key] is value[key] for key in value) else mapped
    return value


def find_refs(value: Any) -> list[StepRef]:
    """Every StepRef inside `value`, in field/element order."""
    found: list[StepRef] = []

    def collect(ref: StepRef) -> StepRef:
        found.append(ref)
        return ref

    map_refs(value, collect)
    return found
