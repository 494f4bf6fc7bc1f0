"""`cli.options`: flags, defaults and help derived from a config dataclass, and the config built back."""

import argparse
from dataclasses import dataclass, field
from typing import Literal

import pytest

from tootsie.cli.options import (
    add_config_flags,
    add_output_flags,
    config_dests,
    config_from_args,
    field_docs,
    rewrite_mode_flags,
)
from tootsie.errors import TootsieError


@dataclass(frozen=True)
class Inner:
    """A nested config."""

    workers: int = 4
    """Worker processes."""
    label: str = "x"
    """A label."""


@dataclass(frozen=True)
class Example:
    """A config with one field of each kind of hint."""

    inputs: tuple[str, ...]
    """Files to read."""
    rate: float = 0.5
    """Fraction kept; 50% by default."""
    fuzzy: bool = True
    """Also look for near matches."""
    mode: Literal["fast", "exact"] = "fast"
    """How to look.

    A second paragraph, not in the help.
    """
    field_name: str | tuple[str, ...] = "question"
    """One field or several."""
    limit: int | None = None
    """At most this many; None: all."""
    inner: Inner = field(default_factory=Inner)
    """Nested settings."""

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1:
            raise ValueError(f"rate must be in (0, 1], got {self.rate=}")


def _parser(**keywords: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    add_config_flags(parser, Example, **keywords)
    return parser


def test_field_docs_reads_the_literal_under_each_field() -> None:
    docs = field_docs(Example)
    assert docs["rate"] == "Fraction kept; 50% by default."
    assert docs["mode"].startswith("How to look.\n\nA second paragraph")


def test_flags_take_type_default_and_help_from_the_dataclass() -> None:
    text = _parser(exclude=("inner",)).format_help()
    assert "--inputs INPUTS [INPUTS ...]" in text
    assert "Fraction kept; 50% by default. (default: 0.5)" in text
    assert "--fuzzy, --no-fuzzy" in text and "(default: --fuzzy)" in text
    assert "{fast,exact}" in text and "second paragraph" not in text
    assert "At most this many; None: all." in text and "(default: None)" not in text


def test_only_given_flags_reach_the_config_so_the_dataclass_owns_defaults() -> None:
    parser = _parser(exclude=("inner",))
    args = parser.parse_args(["--inputs", "a", "b", "--no-fuzzy", "--field-name", "q"])
    assert config_from_args(args, Example) == Example(inputs=("a", "b"), fuzzy=False, field_name="q")
    args = parser.parse_args(["--inputs", "a", "--field-name", "q", "r", "--mode", "exact", "--limit", "3"])
    config = config_from_args(args, Example, rate=0.25)
    assert (config.field_name, config.mode, config.limit, config.rate) == (("q", "r"), "exact", 3, 0.25)


def test_positional_aliases_renames_required_and_cli_defaults() -> None:
    parser = _parser(
        positional=("inputs",),
        renames={"rate": "keep"},
        aliases={"mode": ("--how",)},
        false_flags={"fuzzy": ("--exact-only",)},
        required=("limit",),
        defaults={"fuzzy": False},
        only=("inputs", "rate", "mode", "limit", "fuzzy"),
    )
    args = parser.parse_args(["a", "--keep", "0.1", "--how", "exact", "--limit", "2"])
    assert config_from_args(args, Example) == Example(inputs=("a",), rate=0.1, mode="exact", limit=2, fuzzy=False)
    assert "(default: --no-fuzzy)" in parser.format_help() and "--exact-only" not in parser.format_help()
    args = parser.parse_args(["a", "--fuzzy", "--exact-only", "--limit", "2"])
    assert config_from_args(args, Example).fuzzy is False
    with pytest.raises(SystemExit):
        parser.parse_args(["a"])  # --limit is required


def test_flattened_nested_fields_build_the_nested_config() -> None:
    parser = _parser(flatten=("inner",), exclude=("inner.label",))
    args = parser.parse_args(["--inputs", "a", "--workers", "2"])
    assert config_from_args(args, Example).inner == Inner(workers=2)
    base = Inner(workers=9, label="kept")
    assert config_from_args(args, Example, inner=base).inner == Inner(workers=2, label="kept")
    assert config_dests(args)[Example] == ("inputs", "rate", "fuzzy", "mode", "field_name", "limit", "workers")


def test_a_validation_error_is_one_line_naming_the_class() -> None:
    args = _parser(exclude=("inner",)).parse_args(["--inputs", "a", "--rate", "2"])
    with pytest.raises(TootsieError, match=r"Example: rate must be in \(0, 1\]"):
        config_from_args(args, Example)


def test_a_type_no_flag_expresses_names_the_field() -> None:
    with pytest.raises(TypeError, match=r"Example\.inner has type .*exclude it"):
        _parser()


def test_output_flags() -> None:
    parser = argparse.ArgumentParser()
    add_output_flags(parser)
    assert vars(parser.parse_args(["--json", "--quiet"])) == {"json": True, "quiet": True}


def test_rewrite_mode_flags_keeps_old_shapes_as_aliases() -> None:
    modes = {"--evaluate": ("sft", "evaluate"), "--format=chat": ("datakit", "tokenize-chat")}
    assert rewrite_mode_flags(["sft", "--evaluate", "--config", "c"], ("sft",), modes) == [
        "sft",
        "evaluate",
        "--config",
        "c",
    ]
    tokenize = ("datakit", "tokenize")
    assert rewrite_mode_flags(["datakit", "tokenize", "d", "--format", "chat"], tokenize, modes) == [
        "datakit",
        "tokenize-chat",
        "d",
    ]
    assert rewrite_mode_flags(["datakit", "tokenize", "--format=chat", "d"], tokenize, modes)[:2] == [
        "datakit",
        "tokenize-chat",
    ]
    assert rewrite_mode_flags(["datakit", "tokenize", "d"], tokenize, modes) == ["datakit", "tokenize", "d"]
    assert rewrite_mode_flags(["train", "--evaluate"], ("sft",), modes) == ["train", "--evaluate"]


@dataclass(frozen=True)
class Numbers:
    """Tuples of numbers."""

    budgets: tuple[float, ...] = (1.0,)
    """Budgets."""
    widths: tuple[int, ...] = (8,)
    """Widths."""


def test_number_tuples_take_commas_or_spaces() -> None:
    parser = argparse.ArgumentParser()
    add_config_flags(parser, Numbers)
    args = parser.parse_args(["--budgets", "1e12,2e12", "4e12", "--widths", "16,32"])
    assert config_from_args(args, Numbers) == Numbers(budgets=(1e12, 2e12, 4e12), widths=(16, 32))
    with pytest.raises(SystemExit):
        parser.parse_args(["--widths", "16,x"])
