"""The CLI's structural rules: every option is read by its handler, and no `register` is over 60 lines.

An option is read when its dest appears as `args.<dest>` (or the string
`"<dest>"`) in the handler or a `tootsie.cli` function it names (followed
transitively), or when `add_config_flags` registered it for a config class
that such a function passes to `config_from_args` (or `given_fields`).
"""

import argparse
import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tootsie.cli import main as cli_main
from tootsie.cli.options import RECORD

CLI_DIR = Path(cli_main.__file__).parent
MAX_REGISTER_LINES = 60


def leaf_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(command line, parser) of every parser below `parser` that has a handler."""
    if parser.get_default("handler") is not None:
        yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if child is not parser:
                    yield from leaf_parsers(child, (*path, name))


def reading_sources(function: Callable[..., object], seen: set[object] | None = None) -> list[str]:
    """The source of `function` and of every `tootsie.cli` function it names, transitively (what may read `args`)."""
    seen = set() if seen is None else seen
    if function in seen:
        return []
    seen.add(function)
    source = textwrap.dedent(inspect.getsource(function))
    sources = [source]
    for node in ast.walk(ast.parse(source)):
        target = None
        if isinstance(node, ast.Name):
            target = function.__globals__.get(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = getattr(function.__globals__.get(node.value.id), node.attr, None)
        if inspect.isfunction(target) and target.__module__.startswith("tootsie.cli"):
            sources += reading_sources(target, seen)
    return sources


def unread_options(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings of `parser` whose value its handler never reads."""
    source = "\n".join(reading_sources(inspect.unwrap(parser.get_default("handler"))))
    consumed = {
        dest
        for config_cls, entries in (parser.get_default(RECORD) or {}).items()
        if re.search(rf"(config_from_args|given_fields)\(\s*args,\s*{config_cls.__name__}\b", source)
        for dest, _ in entries.values()
    }
    unread = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        dest = action.dest
        if dest in consumed or re.search(rf"\bargs\.{dest}\b|[\"']{dest}[\"']", source):
            continue
        unread.append("/".join(action.option_strings) or dest)
    return unread


@pytest.mark.parametrize("command", sorted(cli_main.COMMANDS))
def test_every_option_is_read_by_its_handler(command: str) -> None:
    parser = cli_main.build_parser(command)
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {
        line: unread
        for line, leaf in leaf_parsers(top.choices[command], (command,))
        if (unread := unread_options(leaf))
    }
    assert not found, f"options no handler reads (remove them or use them): {found}"


@pytest.mark.parametrize("command", sorted(cli_main.COMMANDS))
def test_every_verb_takes_json_and_quiet(command: str) -> None:
    parser = cli_main.build_parser(command)
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = {
        line: flags
        for line, leaf in leaf_parsers(top.choices[command], (command,))
        if (flags := [flag for flag in ("--json", "--quiet") if flag not in leaf._option_string_actions])
    }
    assert not missing, f"add them with cli.options.add_output_flags: {missing}"


@pytest.mark.parametrize("path", sorted(CLI_DIR.glob("*.py")), ids=lambda path: path.name)
def test_no_register_function_is_over_60_lines(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("register")
        if node.end_lineno - node.lineno + 1 > MAX_REGISTER_LINES
    }
    assert not long, f"{path.name}: register functions over {MAX_REGISTER_LINES} lines: {long}"


def test_the_walk_finds_an_option_no_handler_reads() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--never-read-anywhere", type=int)
    parser.set_defaults(handler=test_the_walk_finds_an_option_no_handler_reads)
    assert unread_options(parser) == ["--never-read-anywhere"]
