"""Tiny local copies of suite benchmarks for tests: `tootsie.eval.benchmark_rows`' made-up rows, few per split.

`write_fixtures(data_dir)` writes the layout `tootsie eval mirror` writes, with
a sha256 manifest, ROWS rows per split (enough for 5-shot prompts, few enough
to keep the tests fast).
"""

from collections.abc import Sequence
from pathlib import Path

from tootsie.eval.benchmark_rows import benchmark_rows, write_benchmark_rows
from tootsie.eval.benchmarks import BENCHMARKS

ROWS = 6


def write_fixtures(data_dir: Path, names: Sequence[str] = tuple(BENCHMARKS), rows: int = ROWS) -> list[Path]:
    """Write `rows` made-up rows per split for each named benchmark; return the files."""
    return write_benchmark_rows(data_dir, names, rows)


def fixture_rows(name: str, split: str, rows: int = ROWS) -> list[dict]:
    """The rows `write_fixtures` writes for one benchmark's split."""
    return benchmark_rows(name, split, rows)


def fixture_texts(rows: int = ROWS) -> list[str]:
    """Every string in the fixtures, for training a tokenizer that covers them."""
    return [
        str(value)
        for name, benchmark in BENCHMARKS.items()
        for split in benchmark.splits
        for row in benchmark_rows(name, split, rows)
        for value in row.values()
    ]
