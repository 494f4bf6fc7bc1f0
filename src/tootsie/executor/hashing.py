"""Canonical form of a config, a step's version, and the hash that names its output.

The hash must be the same in every process and on every machine, whatever the
field declaration order, dict insertion order or PYTHONHASHSEED, so it is
computed from a canonical JSON document rather than from Python's `hash()`:

- a dataclass becomes `{"__type__": <class __qualname__>, <field>: <value>, ...}`
  with `unhashed()` fields left out, and `hashed_when_set()` fields while they
  are None, so adding an optional field keeps every existing hash (the module
  name is not used, so moving a config class between files keeps its hashes);
- a StepRef becomes `{"__step__": "<dep name>-<dep hash>", "subpath": ...}`, so
  any change upstream changes every hash downstream;
- tuples and lists become lists; dicts (str keys only) are sorted by key;
- str/int/bool/None stay as they are; floats are JSON floats (NaN and inf are
  rejected); a pathlib path becomes its string; an Enum becomes its value;
- anything else is an error naming the field, because an unknown object has
  no stable text form (a `repr` with a memory address would change every run).

The hash is the first 12 hex characters of the sha256 of that JSON written with
sorted keys and compact separators.
"""

import dataclasses
import enum
import hashlib
import json
import math
import pathlib
from collections.abc import Callable
from typing import Any

from tootsie.configfile import is_unhashed, is_unset
from tootsie.errors import TootsieError
from tootsie.executor.step import Step, StepRef, find_refs

HASH_CHARS = 12
TYPE_KEY = "__type__"
"""The key of a canonical dataclass that holds its class `__qualname__`."""
STEP_KEY = "__step__"
"""The key of a canonical step reference that holds the referenced step's id, "<name>-<hash>"."""
SUPPORTED = "use a frozen dataclass, a str/int/float/bool/None, an Enum, a pathlib.Path, or a list/tuple/dict of those"

HashOf = Callable[[Step[Any]], str]


def step_id(step: Step[Any], step_hash: str) -> str:
    """The id of a step version, "<name>-<hash>": also the last part of its output path."""
    return f"{step.name}-{step_hash}"


def canonical(value: Any, *, hash_of: HashOf, path: str = "config", include_unhashed: bool = False) -> Any:
    """The canonical JSON-ready form of `value`; `hash_of(step)` is the hash of a referenced step.

    `path` names `value` in error messages (e.g. "config.model.rope"). With
    `include_unhashed` the `unhashed()` fields are kept too (for the metadata
    file, which records the full config).
    """
    if isinstance(value, StepRef):
        return {STEP_KEY: step_id(value.step, hash_of(value.step)), "subpath": value.subpath}
    if isinstance(value, Step):
        raise TootsieError(
            f"{path} holds the Step {value.name!r} itself; depend on its output with step.ref() or output_of(step)"
        )
    if isinstance(value, enum.Enum):
        return canonical(value.value, hash_of=hash_of, path=f"{path}.value", include_unhashed=include_unhashed)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TootsieError(
                f"{path} is {value!r}; NaN and infinity have no canonical JSON form, use a finite float or None"
            )
        return float(value)
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _canonical_dataclass(value, hash_of=hash_of, path=path, include_unhashed=include_unhashed)
    if isinstance(value, (list, tuple)):
        return [
            canonical(item, hash_of=hash_of, path=f"{path}[{index}]", include_unhashed=include_unhashed)
            for index, item in enumerate(value)
        ]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TootsieError(
                    f"{path} has the key {key!r} of type {type(key).__name__}; "
                    "dict keys must be str so the canonical JSON is unambiguous"
                )
        return {
            key: canonical(value[key], hash_of=hash_of, path=f"{path}[{key!r}]", include_unhashed=include_unhashed)
            for key in sorted(value)
        }
    raise TootsieError(f"{path} has unsupported type {type(value).__qualname__}; {SUPPORTED}")


def _canonical_dataclass(value: Any, *, hash_of: HashOf, path: str, include_unhashed: bool) -> dict[str, Any]:
    """Canonical form of a dataclass instance: its type name and its (hashed) fields, sorted."""
    cls = type(value)
    if not cls.__dataclass_params__.frozen:
        raise TootsieError(
            f"{path} is a {cls.__qualname__}, which is not frozen; declare it with @dataclasses.dataclass(frozen=True) "
            "so it cannot change after it was hashed"
        )
    out: dict[str, Any] = {TYPE_KEY: cls.__qualname__}
    for field in dataclasses.fields(value):
        field_path = f"{path}.{field.name}"
        field_value = getattr(value, field.name)
        if is_unhashed(field) and not include_unhashed:
            refs = find_refs(field_value)
            if refs:
                raise TootsieError(
                    f"{field_path} is declared unhashed() but references step {refs[0].step.name!r}; "
                    "an input always affects the output, so declare the field without unhashed()"
                )
            continue
        if is_unset(field, field_value):
            continue
        out[field.name] = canonical(field_value, hash_of=hash_of, path=field_path, include_unhashed=include_unhashed)
    return dict(sorted(out.items()))


def version(step: Step[Any], *, hash_of: HashOf) -> dict[str, Any]:
    """The version of `step`: its name, canonical config and the id and hash of each input."""
    dependencies = {step_id(ref.step, hash_of(ref.step)): hash_of(ref.step) for ref in find_refs(step.config)}
    return {
        "name": step.name,
        "config": canonical(step.config, hash_of=hash_of),
        "dependencies": dict(sorted(dependencies.items())),
    }


def canonical_json(payload: Any) -> str:
    """`payload` as JSON with sorted keys and compact separators: the exact text that is hashed."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


def hash_json(payload: Any) -> str:
    """First 12 hex characters of the sha256 of `canonical_json(payload)`."""
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()[:HASH_CHARS]
