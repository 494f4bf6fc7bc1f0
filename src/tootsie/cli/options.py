"""Command-line flags derived from config dataclasses, so no default or help is restated by hand.

`add_config_flags(parser, NormalizeConfig)` adds one `--field-name` flag per
field: its type, choices and arity come from the type hint, its help from the
field's docstring (the string literal under the field in the class body), and
its default from the field, shown in the help but never passed on: a flag left
out is left out of the config too, so the dataclass alone owns every default.
`config_from_args(args, NormalizeConfig, engine=...)` builds the config from
the flags that were given plus keyword overrides, and turns the dataclass's
validation error into a one-line `TootsieError`.

Type hints map to flags like this:

    bool                  --x / --no-x
    int, float, str, Path --x VALUE (typed)
    Literal["a", "b"]     --x {a,b}
    X | None              --x VALUE (None is the field's default, not a flag value)
    tuple[X, ...]         --x VALUE [VALUE ...], repeatable (a tuple in the config)
    tuple[int|float, ...] the same, and a value may list several: --x 1e12,2e12
    str | tuple[str, ...] --x VALUE [VALUE ...] (one value stays a str)
    a dataclass           its own fields, when the field is in `flatten`

Any other type (a registry union, a dict) is an error at registration that
names the field: exclude it, or pass it as an override.

Example: `datakit extract` names its flag after the field and keeps the old
spelling as an alias:

    add_config_flags(parser, ExtractConfig, exclude=("engine",), positional=("inputs",),
                     aliases={"extractor": ("--engine",)})
    config = config_from_args(args, ExtractConfig, engine=engine_config(args))
"""

import argparse
import ast
import dataclasses
import functools
import inspect
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from tootsie.errors import TootsieError

C = TypeVar("C")
RECORD = "_config_flags"
"""Namespace attribute holding, per config class, each registered field's dest and value converter."""
SCALARS = (int, float, str, Path)

Convert = Callable[[Any], Any]


@functools.cache
def field_docs(config_cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right under it in the class body), base classes included."""
    docs: dict[str, str] = {}
    for cls in reversed(config_cls.__mro__):
        if not dataclasses.is_dataclass(cls) or cls is object:
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, following in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _first_paragraph(doc: str) -> str:
    """A docstring's first paragraph on one line, with `%` escaped for argparse."""
    return " ".join(doc.split("\n\n")[0].split()).replace("%", "%%")


def _flag_type(hint: Any, where: str) -> tuple[dict[str, Any], Convert]:
    """The argparse keywords for a type hint, and the converter from the parsed value to the config's value."""
    options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if len(options) == 1:
            return _flag_type(options[0], where)
        tuples = [arg for arg in options if typing.get_origin(arg) is tuple]
        if len(options) == 2 and len(tuples) == 1 and typing.get_args(tuples[0])[0] in options:
            keywords, _ = _flag_type(tuples[0], where)
            return keywords, lambda value: value[0] if len(value) == 1 else tuple(value)
    elif hint is bool:
        return {"action": argparse.BooleanOptionalAction}, _same
    elif hint in SCALARS:
        return {"type": hint}, _same
    elif origin is Literal:
        return {"choices": options, "type": type(options[0])}, _same
    elif origin is tuple and len(options) == 2 and options[1] is Ellipsis:
        keywords, _ = _flag_type(options[0], where)
        if options[0] in (int, float):  # numbers may also come comma-separated: --budgets 1e12,2e12
            return {"type": _comma_separated(options[0]), "nargs": "+", "action": "extend"}, _flattened
        if "action" not in keywords and "nargs" not in keywords:
            return {**keywords, "nargs": "+", "action": "extend"}, tuple  # repeatable: --x a --x b
    raise TypeError(
        f"{where} has type {hint!r}, which no flag expresses; exclude it from add_config_flags"
        " and pass it to config_from_args as an override, or flatten it if it is a dataclass"
    )


def _same(value: Any) -> Any:
    return value


def _comma_separated(kind: type) -> Callable[[str], list[Any]]:
    """An argparse type reading `1e12,2e12` (or one number) as a list of `kind`."""

    def parse(text: str) -> list[Any]:
        try:
            return [kind(item) for item in text.split(",") if item.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__} values like 1,2,3, got {text!r}") from None

    parse.__name__ = f"{kind.__name__} list"
    return parse


def _flattened(values: list[list[Any]]) -> tuple[Any, ...]:
    return tuple(value for group in values for value in group)


def _default_text(value: Any, flag: str) -> str:
    """` (default: X)` for a plain default worth showing; "" for a factory's (MISSING), None and empty values."""
    if value is dataclasses.MISSING or value is None or value == ():
        return ""
    if isinstance(value, bool):
        return f" (default: {flag if value else '--no-' + flag[2:]})"
    return f" (default: {value})".replace("%", "%%")


def _fields(
    config_cls: type, prefix: str, flatten: frozenset[str]
) -> Iterator[tuple[str, dataclasses.Field[Any], Any, type]]:
    """(dotted path, field, resolved type hint, owning class) of every init field, flattened where asked."""
    hints = typing.get_type_hints(config_cls)
    for field in dataclasses.fields(config_cls):
        if not field.init:
            continue
        path = prefix + field.name
        if path in flatten:
            yield from _fields(hints[field.name], path + ".", flatten)
        else:
            yield path, field, hints[field.name], config_cls


def _selected(path: str, only: frozenset[str] | None, exclude: frozenset[str]) -> bool:
    """Whether `path` (or a dotted parent of it) is chosen by `only` and not dropped by `exclude`."""
    parents = {".".join(path.split(".")[:i]) for i in range(1, path.count(".") + 2)}
    return (only is None or bool(parents & only)) and not parents & exclude


def add_config_flags(
    parser: argparse.ArgumentParser,
    config_cls: type,
    *,
    only: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    renames: Mapping[str, str] = {},
    required: Iterable[str] = (),
    positional: Iterable[str] = (),
    aliases: Mapping[str, Iterable[str]] = {},
    false_flags: Mapping[str, Iterable[str]] = {},
    metavars: Mapping[str, str] = {},
    defaults: Mapping[str, Any] = {},
    choices: Mapping[str, Iterable[Any]] = {},
    flatten: Iterable[str] = (),
) -> None:
    """Add one flag per field of `config_cls` (fields named by dotted path, e.g. `engine.workers` when flattened).

    `only`/`exclude` choose fields; `renames` gives a field another flag name
    (`{"threshold": "overlap"}` → `--overlap`); `aliases` adds old spellings
    (`{"extractor": ("--engine",)}`); `false_flags` adds old hidden flags that
    set a bool field to False (`{"add_bos": ("--no-bos",)}`); `required` makes
    a field with a default required; `positional` makes a field a positional
    argument; `metavars` names values in the usage line; `defaults` sets a
    command-line default that deliberately differs from the config's (say why
    at the call); `choices` gives the valid values of a field that is not a
    `Literal` but whose `__post_init__` checks them against a constant (pass
    that constant); `flatten` turns a nested dataclass field into flags of its
    own fields.
    """
    only_set = None if only is None else frozenset(only)
    exclude_set, required_set, positional_set = frozenset(exclude), frozenset(required), frozenset(positional)
    record: dict[type, dict[str, tuple[str, Convert]]] = dict(parser.get_default(RECORD) or {})
    entries = dict(record.get(config_cls, {}))
    for path, field, hint, owner in _fields(config_cls, "", frozenset(flatten)):
        if not _selected(path, only_set, exclude_set):
            continue
        where = f"{owner.__name__}.{field.name}"
        doc = field_docs(owner).get(field.name)
        if doc is None:
            raise TypeError(f"{where} has no docstring; write one under the field, it is the flag's help")
        dest = renames.get(path, field.name).removeprefix("--").replace("-", "_")
        keywords, convert = _flag_type(hint, where)
        keywords["help"] = _first_paragraph(doc)
        if path in metavars:
            keywords["metavar"] = metavars[path]
        if path in choices:
            keywords["choices"] = tuple(choices[path])
        if path in positional_set:
            parser.add_argument(dest, default=argparse.SUPPRESS, **{"metavar": dest.upper(), **keywords})
        else:
            no_default = field.default is field.default_factory is dataclasses.MISSING and path not in defaults
            keywords["required"] = no_default or path in required_set
            keywords["help"] += _default_text(defaults.get(path, field.default), _flag(dest))
            if path in defaults:
                keywords["default"] = defaults[path]
            _add_option(parser, dest, keywords, tuple(aliases.get(path, ())), tuple(false_flags.get(path, ())))
        entries[path] = (dest, convert)
    record[config_cls] = entries
    parser.set_defaults(**{RECORD: record})


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _add_option(
    parser: argparse.ArgumentParser,
    dest: str,
    keywords: dict[str, Any],
    aliases: tuple[str, ...],
    false_flags: tuple[str, ...],
) -> None:
    """Add `--dest`, its aliases and its hidden false flags; without a `default` keyword, a flag not given stays out
    of the namespace."""
    keywords.setdefault("default", argparse.SUPPRESS)
    parser.add_argument(_flag(dest), *aliases, dest=dest, **keywords)
    for flag in false_flags:
        parser.add_argument(flag, dest=dest, action="store_false", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _build(config_cls: type[C], values: Mapping[str, Any], overrides: dict[str, Any]) -> C:
    """`config_cls` from dotted-path values (nested ones built or `replace`d into an override) and overrides."""
    nested: dict[str, dict[str, Any]] = {}
    fields = dict(overrides)
    for path, value in values.items():
        head, _, rest = path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            fields[head] = value
    hints = typing.get_type_hints(config_cls)
    for name, inner in nested.items():
        base = fields.get(name)
        if base is None:
            fields[name] = _build(hints[name], inner, {})
        else:
            fields[name] = _build(type(base), inner, {f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    return config_cls(**fields)


def given_fields(args: argparse.Namespace, config_cls: type) -> dict[str, Any]:
    """The fields of `config_cls` whose flags were given, by dotted path (what `config_from_args` passes on).

    For a command that passes fields on as a mapping rather than a config
    (e.g. a permutation's options).
    """
    record = getattr(args, RECORD, {}).get(config_cls)
    if record is None:
        raise TypeError(f"no flags of {config_cls.__name__} on this command; call add_config_flags for it first")
    return {path: convert(getattr(args, dest)) for path, (dest, convert) in record.items() if hasattr(args, dest)}


def config_from_args(args: argparse.Namespace, config_cls: type[C], **overrides: Any) -> C:
    """The config built from the flags `add_config_flags` registered for `config_cls` and that were given, plus
    `overrides`; a validation error becomes a one-line `TootsieError` naming the class."""
    try:
        return _build(config_cls, given_fields(args, config_cls), overrides)
    except ValueError as error:
        raise TootsieError(f"{config_cls.__name__}: {error}") from None


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """Add `--json` (one JSON object as the last line of stdout) and `--quiet` (no progress or prose; errors and
    the JSON only): every command gets both here, and prints through `cli.output`, which honours them."""
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line of stdout")
    parser.add_argument(
        "--quiet", action="store_true", help="no progress or prose on stdout/stderr: only errors (and --json's object)"
    )


def rewrite_mode_flags(argv: list[str], path: Sequence[str], modes: Mapping[str, Sequence[str]]) -> list[str]:
    """`argv` with an old mode flag turned into today's command path, so the old shape stays an alias.

    With `path=("sft",)` and `modes={"--evaluate": ("sft", "evaluate")}`,
    `sft --evaluate --config c` becomes `sft evaluate --config c`; a key
    `--flag=value` also matches `--flag value`. A command module calls it from
    its `rewrite_aliases(argv)`, which `cli.main` applies before parsing.
    """
    if argv[: len(path)] != list(path):
        return argv
    rest = argv[len(path) :]
    for mode, command in modes.items():
        flag, _, value = mode.partition("=")
        for i, word in enumerate(rest):
            if word == mode or (value and word == flag and rest[i + 1 : i + 2] == [value]):
                return [*command, *rest[:i], *rest[i + (1 if word == mode else 2) :]]
    return argv


def config_dests(args: argparse.Namespace) -> dict[type, tuple[str, ...]]:
    """Per config class, the dests of its registered flags (what `config_from_args` reads; tests use it)."""
    return {cls: tuple(dest for dest, _ in entries.values()) for cls, entries in getattr(args, RECORD, {}).items()}
