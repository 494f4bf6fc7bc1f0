"""Every `tootsie ...` command line in README.md and docs/*.md still works.

Each line's command (`tootsie datakit dedup`) shows its `--help` and exits 0,
and every `--flag` the line names exists on it (after the command module's
alias rewrites). A line in a code block that has no placeholder syntax
(`[...]`, `A|B`, `...`) must parse as a whole, as a user would paste it.
"""

import argparse
import re
import shlex
from pathlib import Path

import pytest

from tootsie.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
IN_BLOCK = re.compile(r"(?:^|\s)(?:\$ )?(tootsie [a-z][^#]*)")
INLINE = re.compile(r"`(tootsie [a-z][^`]*)`")
SHELL_END = re.compile(r"\s(?:&&|;|\||2?>|&)(?:\s|$)")
PLACEHOLDER = re.compile(r"[\[\]|()…<>]|\.\.\.")


def documented_lines(path: Path) -> list[tuple[str, str, bool]]:
    """(where, command line, whole) of each `tootsie ...` line: whole for a code-block line to parse as is."""
    found, in_block, pending = [], False, ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.name}:{number}"
        if FENCE.match(line):
            in_block = not in_block
        elif in_block and line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
        elif in_block:
            match = IN_BLOCK.search(pending + line)
            pending = ""
            if match:
                command = SHELL_END.split(match.group(1))[0].strip()
                found.append((where, command, not PLACEHOLDER.search(command)))
        else:
            found += [(where, span.strip(), False) for span in INLINE.findall(line)]
    return found


LINES = [line for document in DOCUMENTS for line in documented_lines(document)]


def command_parser(argv: list[str]) -> tuple[list[str], argparse.ArgumentParser]:
    """The command words of `argv` (`datakit`, `dedup`) and the parser they lead to."""
    parser = cli_main.build_parser(argv[0] if argv[0] in cli_main.COMMANDS else "")
    path = []
    for word in argv:
        choices = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
        if word not in choices:
            break
        path.append(word)
        parser = choices[word]
    return path, parser


def test_the_documents_hold_command_lines() -> None:
    assert len(LINES) > 100 and sum(whole for _, _, whole in LINES) > 50


@pytest.mark.parametrize(("where", "line", "whole"), LINES, ids=[f"{w} {c[:60]}" for w, c, _ in LINES])
def test_documented_command_line_works(where: str, line: str, whole: bool, capsys: pytest.CaptureFixture[str]) -> None:
    argv = cli_main.with_aliases([word.strip("[]()") for word in shlex.split(line)[1:] if word.strip("[]()")])
    path, parser = command_parser(argv)
    assert path, f"{where}: {line!r} names no command"
    with pytest.raises(SystemExit) as help_exit:
        cli_main.main([*path, "--help"])
    assert help_exit.value.code == 0, f"{where}: tootsie {' '.join(path)} --help failed"
    flags = [word.split("=")[0] for word in argv if word.startswith("--")]
    unknown = [flag for flag in flags if flag not in parser._option_string_actions]
    assert not unknown, f"{where}: {line!r}: tootsie {' '.join(path)} has no {unknown}"
    if whole:
        capsys.readouterr()
        cli_main.parse_args(argv)


def test_docs_cli_lists_every_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert not [name for name in cli_main.COMMANDS if f"`{name}`" not in text]
