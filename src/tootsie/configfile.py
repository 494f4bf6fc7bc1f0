"""Frozen-dataclass configs from YAML/JSON files, with errors that name the field.

`load_config(path, TrainConfig)` reads a file with `yaml.safe_load` and builds
the dataclass tree field by field, checking each value against the type hints:
an unknown field, a missing one, or a value of the wrong type is a
`TootsieError` naming its full path (`train.model.num_heads`) and the fix.
`to_plain` turns a config back into plain lists and dicts, so a config printed
by `--example-config` reads back unchanged.

A field typed as a union of registered configs (a schedule, an optimizer) is
written with a `kind:` key naming the registry entry, e.g.
`schedule: {kind: wsd_s, peak_lr: 0.001, cycles: [...]}`; registries call
`register_kinds` so that the name picks the class, with no guessing among
classes that share field names, and type the field with `registry_union`, the
union derived from the registry (never restated by hand). A bare name where a
`{kind: ...}` mapping belongs is refused with the mapping to write instead.
A pure name choice with no options (a decay shape, a remat policy, a model
preset) is a `Literal` of the registry's keys; a name outside it is an error
listing the valid names, like an unknown kind.
"""

import dataclasses
import json
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tootsie.errors import TootsieError

T = TypeVar("T")
KIND_KEY = "kind"
UNHASHED = "tootsie.unhashed"
HASHED_WHEN_SET = "tootsie.hashed_when_set"
_KIND_OF: dict[type, str] = {}
_CLASS_OF: dict[str, list[type]] = {}
_DEFAULT_OF: dict[frozenset[type], type] = {}


def unhashed(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field left out of a step's version: only for settings that cannot change the output."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={UNHASHED: True})


def is_unhashed(field: dataclasses.Field[Any]) -> bool:
    """Whether `field` was declared with `unhashed()`."""
    return bool(field.metadata.get(UNHASHED, False))


def hashed_when_set() -> Any:
    """An optional field (default None) left out of a step's version while None, so adding it keeps existing hashes."""
    return dataclasses.field(default=None, metadata={HASHED_WHEN_SET: True})


def is_unset(field: dataclasses.Field[Any], value: Any) -> bool:
    """Whether `field` was declared with `hashed_when_set()` and `value` is its None default."""
    return value is None and bool(field.metadata.get(HASHED_WHEN_SET, False))


def register_kinds(registry: dict[str, type]) -> None:
    """Make a registry's names usable as `kind:` tags in config files."""
    for kind, cls in registry.items():
        _KIND_OF[cls] = kind
        _CLASS_OF.setdefault(kind, []).append(cls)


def registry_union(registry: dict[str, type], default: str | None = None) -> Any:
    """The union of a registry's config classes, registered as `kind:` tags.

    The type of a field that takes any of them. `default` names the kind a mapping without `kind:`
    builds: how configs wrote the field before it became a registry choice (a model config is a Llama).
    """
    register_kinds(registry)
    if default is not None:
        _DEFAULT_OF[frozenset(registry.values())] = registry[default]
    return typing.Union[tuple(registry.values())]  # noqa: UP007 - X | Y cannot spread a tuple built at run time


def default_kind_union(default: type, registry: dict[str, type]) -> Any:
    """`default` (written without `kind:`, its plain form unchanged) or one of `registry`'s configs (with `kind:`).

    For a field that gains alternatives after configs were written: existing files and hashes stay as they were.
    """
    register_kinds(registry)
    _DEFAULT_OF[frozenset((default, *registry.values()))] = default
    return typing.Union[(default, *registry.values())]  # noqa: UP007 - X | Y cannot spread a tuple built at run time


def names_literal(registry: dict[str, Any]) -> Any:
    """`Literal[...]` of a registry's names: the type of a field that picks one by name (checked at load)."""
    return typing.Literal[tuple(registry)]


def kind_of(config: Any) -> str:
    """The registry name (`kind:` tag) of a registered config."""
    if type(config) not in _KIND_OF:
        raise TypeError(f"{type(config).__name__} is in no registry; register it with register_kinds")
    return _KIND_OF[type(config)]


def _describe(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def from_plain(hint: Any, value: Any, where: str) -> Any:
    """Build a value of type `hint` from plain YAML/JSON data; `where` names it in errors."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin is typing.Literal:
        if value not in args:
            raise TootsieError(f"{where}: unknown name {value!r}; choose one of {sorted(args)}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        if isinstance(value, dict) and KIND_KEY in value:
            return _tagged_from_plain(args, value, where)
        default = _DEFAULT_OF.get(frozenset(a for a in args if a is not type(None)))
        if isinstance(value, dict) and default is not None:
            return _dataclass_from_plain(default, value, where)
        if isinstance(value, str) and any(o in _KIND_OF for o in args):
            raise TootsieError(_bare_kind_message(args, value, where))
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return from_plain(option, value, where)
            except TootsieError as error:
                errors.append(str(error))
        raise TootsieError(errors[0] if len(errors) == 1 else f"{where}: {value!r} matches none of {_describe(hint)}")
    if dataclasses.is_dataclass(hint):
        return _dataclass_from_plain(hint, value, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TootsieError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_plain(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
        if len(args) != len(value):
            raise TootsieError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(from_plain(a, item, f"{where}[{i}]") for i, (a, item) in enumerate(zip(args, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise TootsieError(f"{where}: expected a mapping, got {value!r}")
        checked_keys = args[0] not in (str, Any)
        return {
            from_plain(args[0], str(k), f"{where} key") if checked_keys else str(k): from_plain(
                args[1], v, f"{where}.{k}"
            )
            for k, v in value.items()
        }
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and not (
        isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
    ):
        raise TootsieError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def _known_kinds(options: tuple[Any, ...]) -> list[str]:
    return sorted(_KIND_OF[o] for o in options if o in _KIND_OF)


def _bare_kind_message(options: tuple[Any, ...], value: str, where: str) -> str:
    """The error for a bare name where a `{kind: ...}` mapping belongs.

    (How configs before registries wrote a choice.)
    """
    known = _known_kinds(options)
    if value in known:
        return (
            f"{where}: a bare name {value!r} is not accepted here; write {{kind: {value}}}"
            " (options of the kind as more keys)"
        )
    return f"{where}: unknown kind {value!r}; choose one of {known}, written as {{kind: NAME}}"


def _tagged_from_plain(options: tuple[Any, ...], value: dict[str, Any], where: str) -> Any:
    """The union member whose registry name is `value["kind"]`, built from the other keys."""
    kind = value[KIND_KEY]
    matches = [cls for cls in _CLASS_OF.get(kind, []) if cls in options]
    if not matches:
        raise TootsieError(f"{where}.kind: unknown kind {kind!r}; choose one of {_known_kinds(options)}")
    return _dataclass_from_plain(matches[0], {k: v for k, v in value.items() if k != KIND_KEY}, where)


def _dataclass_from_plain(cls: type[T], value: Any, where: str) -> T:
    if not isinstance(value, dict):
        raise TootsieError(f"{where}: expected a mapping of {cls.__name__} fields, got {value!r}")
    if KIND_KEY in value and cls in _KIND_OF:
        if value[KIND_KEY] != _KIND_OF[cls]:
            problem = "does not fit here" if value[KIND_KEY] in _CLASS_OF else "is an unknown kind"
            raise TootsieError(f"{where}.kind: {value[KIND_KEY]!r} {problem}; this field takes kind {_KIND_OF[cls]!r}")
        value = {k: v for k, v in value.items() if k != KIND_KEY}
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise TootsieError(
            f"{where}: unknown field {unknown[0]!r} for {cls.__name__}; known fields: {', '.join(sorted(fields))}"
        )
    missing = [
        name
        for name, f in fields.items()
        if name not in value and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise TootsieError(f"{where}: missing required field {missing[0]!r} of {cls.__name__}")
    kwargs = {name: from_plain(hints[name], item, f"{where}.{name}") for name, item in value.items()}
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise TootsieError(f"{where}: {error}") from None


def read_yaml(path: str | Path, what: str = "config file", fix: str = "") -> Any:
    """The plain data in a YAML (or JSON) file the user wrote; a missing or unparseable file is a `TootsieError`.

    `what` names the file in the errors and `fix` says how to write one.
    """
    file = Path(path)
    if not file.is_file():
        raise TootsieError(f"{what} not found: {file}" + (f"; {fix}" if fix else ""))
    text = file.read_text(encoding="utf-8")
    try:
        # JSON as JSON: YAML 1.1 reads an exponent without a dot (`1e-05`, as json.dumps writes it) as a string
        return json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise TootsieError(f"{what} {file} is not valid YAML/JSON: {error}") from None


def load_config(path: str | Path, cls: type[T], root: str = "config") -> T:
    """Read a YAML or JSON file into a `cls` config, validating every field."""
    return from_plain(cls, read_yaml(path), f"{Path(path).name}:{root}")


def _every_field(field: dataclasses.Field[Any]) -> bool:
    return True


def to_plain(value: Any, keep: Callable[[dataclasses.Field[Any]], bool] = _every_field) -> Any:
    """A config as plain dicts, lists and scalars (tuples become lists).

    `keep` picks the dataclass fields written (all by default; the train layer's drift check keeps the hashed ones).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = {KIND_KEY: _KIND_OF[type(value)]} if type(value) in _KIND_OF else {}
        return kind | {
            f.name: to_plain(getattr(value, f.name), keep) for f in dataclasses.fields(value) if f.init and keep(f)
        }
    if isinstance(value, (list, tuple)):
        return [to_plain(v, keep) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v, keep) for k, v in value.items()}
    return value


def dump_config(config: Any) -> str:
    """YAML text of a config, in field order."""
    return yaml.safe_dump(json.loads(json.dumps(to_plain(config))), sort_keys=False)
