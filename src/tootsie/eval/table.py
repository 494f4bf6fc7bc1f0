"""`tootsie eval table`: suite results side by side, in the 32B retrospective's base-model table layout.

A row is one model: one or more result objects of `tootsie eval suite --json`
read under one label. A column is one benchmark. For `marin-base` the columns
are the retrospective's 19 in its order (`benchmarks.MARIN_BASE_COLUMNS`),
after "Model", the prompt format and "Average", as in its table; any other
suite keeps its own order. Numbers are lm-eval's headline fractions shown as
percentages to one decimal, as the retrospective prints them, each with ± one
standard error (lm-eval's stderr).

"Average" is the simple mean of a row's values, as the retrospective's ("a
simple mean over shown tasks"). A row missing a column still gets the mean of
the columns it has, but the cell says over how many (`41.2 (13/19)`) and a
note names the missing ones, so a partial mean never passes for a full one.
Its ± is sqrt(Σ se²)/k for k columns, treating the tasks as independent.

The before/after view (`compare`) sets a base model against its
instruction-tuned version column by column: after − before, its standard
error sqrt(se_before² + se_after²), and ▼ where the base metric degrades
(after < before); a note names the falls larger than two standard errors.

Worked example: a base with arc_easy 0.600 ± 0.245 (n=5) and an SFT model with
0.400 ± 0.245 show as `60.0 ± 24.5` and `40.0 ± 24.5`, and the difference as
`-20.0 ± 34.6 ▼`, a fall within two standard errors (2 × 34.6 > 20.0).
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tootsie.errors import TootsieError
from tootsie.eval.benchmarks import BENCHMARKS, MARIN_BASE_COLUMNS, suite_benchmarks

TABLE_FORMATS = ("lm-eval", "olmes")
EMPTY = "—"
DEGRADED = "▼"
NOISE_SE = 2.0
"""A fall larger than this many standard errors of the difference is named as beyond noise in the notes."""
ROUNDING = 1e-9
"""Differences smaller than this are float noise (two means of the same values summed in another order), not falls."""
HOW_TO_WRITE = "write it with `tootsie eval suite --checkpoint RUN --suite S --data-dir D --json > FILE`"


@dataclass(frozen=True)
class TableColumn:
    """One benchmark column: its title in the table and the suite's benchmark name."""

    title: str
    task: str


@dataclass(frozen=True)
class Cell:
    """One model's result on one column, or why it is empty."""

    column: TableColumn
    value: float | None
    stderr: float | None = None
    n: int = 0
    metric: str | None = None
    prompt_format: str | None = None
    num_fewshot: int | None = None
    """Few-shot examples per prompt, where the result records it."""
    empty: str | None = None
    """Why there is no value (absent from the inputs, refused, another prompt format); None when there is one."""


@dataclass(frozen=True)
class Average:
    """The simple mean of a row's values and over how many of its columns it runs."""

    value: float | None
    stderr: float | None
    columns: int
    of: int
    missing: tuple[str, ...]


@dataclass(frozen=True)
class Row:
    """One model: its label, the result sources read for it, one cell per column and its Average."""

    label: str
    sources: tuple[str, ...]
    cells: tuple[Cell, ...]
    average: Average
    limits: tuple[int, ...] = ()
    """The `--limit`s its results were evaluated with (documents per task), if any."""


@dataclass(frozen=True)
class Delta:
    """One column of the before/after view: after − before, its standard error, and whether the base degrades."""

    title: str
    before: float | None
    after: float | None
    diff: float | None
    stderr: float | None

    @property
    def degraded(self) -> bool:
        """The instruction-tuned model scores below the base here."""
        return self.diff is not None and self.diff < -ROUNDING

    @property
    def beyond_noise(self) -> bool:
        """A fall larger than `NOISE_SE` standard errors of the difference."""
        if self.diff is None or self.stderr is None:
            return False
        return self.degraded and -self.diff > NOISE_SE * self.stderr


@dataclass(frozen=True)
class Table:
    """The rows to render, their columns, and the before/after view when asked for."""

    suite: str
    prompt_format: str
    columns: tuple[TableColumn, ...]
    rows: tuple[Row, ...]
    compare: tuple[Delta, ...] | None = None


def table_columns(suite: str) -> tuple[TableColumn, ...]:
    """The table's columns: the retrospective's 19 for `marin-base`, else the suite's benchmarks in its order."""
    titles = {task: title for title, task in MARIN_BASE_COLUMNS}
    if suite == "marin-base":
        return tuple(TableColumn(title, task) for title, task in MARIN_BASE_COLUMNS)
    return tuple(TableColumn(titles.get(b.name, b.name), b.name) for b in suite_benchmarks(suite))


def read_results(path: str | Path) -> dict[str, Any]:
    """A `tootsie eval suite --json` object from a file (the object alone, or a stdout whose last line it is)."""
    path = Path(path)
    if not path.is_file():
        raise TootsieError(f"{path}: no such results file; {HOW_TO_WRITE}")
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    for candidate in (text, lines[-1] if lines else ""):
        try:
            result = json.loads(candidate)
            break
        except json.JSONDecodeError:
            continue
    else:
        raise TootsieError(f"{path}: not a JSON object nor a stdout ending in one; {HOW_TO_WRITE}")
    _check_results(path, result)
    return result


def _check_results(path: Path, result: object) -> None:
    """Refuse an object that is not a suite result, naming the file, the row and the field."""
    if not isinstance(result, dict) or not isinstance(result.get("results"), list):
        raise TootsieError(f"{path}: no 'results' list, so not a `tootsie eval suite --json` result; {HOW_TO_WRITE}")
    if not isinstance(result.get("limit") or 0, int):
        raise TootsieError(f"{path}: limit={result['limit']!r} is not a whole number or null; {HOW_TO_WRITE}")
    for index, row in enumerate(result["results"]):
        where = f"{path}: results[{index}]"
        if not isinstance(row, dict) or not isinstance(row.get("task"), str) or "value" not in row:
            raise TootsieError(f"{where} has no 'task' name or no 'value' ({row!r:.80}); {HOW_TO_WRITE}")
        for key, kinds, kind in (("value", float, "number"), ("stderr", float, "number"), ("n", int, "whole number")):
            value = row.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, kinds))):
                raise TootsieError(f"{where} ({row['task']}): {key}={value!r} is not a {kind} or null; {HOW_TO_WRITE}")
        if row["value"] is not None and not 0.0 <= row["value"] <= 1.0:
            raise TootsieError(
                f"{where} ({row['task']}): value={row['value']!r} is not a fraction in [0, 1]; the table shows"
                " lm-eval's headline fractions as percentages, so pass the file the suite wrote, unedited"
            )


def _pick(column: TableColumn, found: list[tuple[str, dict[str, Any]]], prompt_format: str, label: str) -> Cell:
    """The cell for `column` from the (source, result row)s `found` for its task, or an empty cell saying why."""
    benchmark = BENCHMARKS.get(column.task)
    fallback = prompt_format == "olmes" and benchmark is not None and benchmark.olmes is None
    wanted = [(s, r) for s, r in found if r.get("prompt_format", "lm-eval") == prompt_format]
    if not wanted and fallback:  # the suite runs a task without an OLMES variant in lm-eval's format
        wanted = [(s, r) for s, r in found if r.get("prompt_format", "lm-eval") == "lm-eval"]
    if len(wanted) > 1:
        sources = sorted(source for source, _ in wanted)
        raise TootsieError(
            f"{column.task} ({prompt_format}) is in more than one result of {label!r}: {sources}; "
            "pass one result per benchmark for each label"
        )
    if not wanted:
        formats = sorted({str(r.get("prompt_format")) for _, r in found})
        reason = f"only in {', '.join(formats)} format" if found else "not in the results read"
        return Cell(column, None, empty=reason)
    source, row = wanted[0]
    if row["value"] is None:
        return Cell(column, None, empty=str(row.get("refused") or f"no value in {source}"))
    stderr = row.get("stderr")
    return Cell(
        column,
        float(row["value"]),
        None if stderr is None else float(stderr),
        int(row.get("n", 0)),
        row.get("metric"),
        row.get("prompt_format", "lm-eval"),
        row.get("num_fewshot"),
    )


def _average(cells: Sequence[Cell]) -> Average:
    values = [cell.value for cell in cells if cell.value is not None]
    errors = [cell.stderr for cell in cells if cell.value is not None and cell.stderr is not None]
    missing = tuple(cell.column.title for cell in cells if cell.value is None)
    if not values:
        return Average(None, None, 0, len(cells), missing)
    stderr = math.sqrt(sum(e * e for e in errors)) / len(values) if len(errors) == len(values) else None
    return Average(sum(values) / len(values), stderr, len(values), len(cells), missing)


def build_row(
    label: str, results: Sequence[tuple[str, dict[str, Any]]], columns: Sequence[TableColumn], prompt_format: str
) -> Row:
    """One model's row from its (source, suite result object)s; a benchmark found twice in one format refuses."""
    if prompt_format not in TABLE_FORMATS:
        raise TootsieError(f"prompt format must be one of {TABLE_FORMATS}, got {prompt_format!r}")
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for source, result in results:
        for row in result["results"]:
            found.setdefault(row["task"], []).append((source, row))
    cells = tuple(_pick(column, found.get(column.task, []), prompt_format, label) for column in columns)
    limits = tuple(sorted({int(r["limit"]) for _, r in results if r.get("limit") is not None}))
    return Row(label, tuple(source for source, _ in results), cells, _average(cells), limits)


def _delta(title: str, before: tuple[float | None, float | None], after: tuple[float | None, float | None]) -> Delta:
    (b, b_se), (a, a_se) = before, after
    diff = None if a is None or b is None else a - b
    stderr = None if diff is None or a_se is None or b_se is None else math.sqrt(a_se**2 + b_se**2)
    return Delta(title, b, a, diff, stderr)


def compare_rows(before: Row, after: Row) -> tuple[Delta, ...]:
    """The before/after view: Average first, then every column, as after − before."""
    pairs = [("Average", (before.average.value, before.average.stderr), (after.average.value, after.average.stderr))]
    pairs += [
        (b.column.title, (b.value, b.stderr), (a.value, a.stderr))
        for b, a in zip(before.cells, after.cells, strict=True)
    ]
    return tuple(_delta(title, b, a) for title, b, a in pairs)


def build_table(
    suite: str, rows: Sequence[Row], columns: Sequence[TableColumn], prompt_format: str, compare: bool = False
) -> Table:
    """The table; with `compare`, the two rows are a base and its instruction-tuned model, in that order."""
    if compare and len(rows) != 2:
        labels = [row.label for row in rows]
        raise TootsieError(f"the before/after view takes exactly two models, base then SFT; got {len(rows)}: {labels}")
    deltas = compare_rows(rows[0], rows[1]) if compare else None
    return Table(suite, prompt_format, tuple(columns), tuple(rows), deltas)


def _percent(value: float | None, stderr: float | None = None, sign: bool = False) -> str:
    """`60.0 ± 24.5` (a fraction as a percentage to one decimal), `—` for no value."""
    if value is None:
        return EMPTY
    text = f"{100 * value if abs(value) > ROUNDING else 0.0:+.1f}" if sign else f"{100 * value:.1f}"
    return text if stderr is None else f"{text} ± {100 * stderr:.1f}"


def _average_text(average: Average) -> str:
    text = _percent(average.value, average.stderr)
    return text if average.columns == average.of else f"{text} ({average.columns}/{average.of})"


def _format_text(row: Row, prompt_format: str) -> str:
    """The row's prompt format, with the number of columns that fell back to lm-eval's when OLMES was asked for."""
    fallen = [cell for cell in row.cells if cell.prompt_format not in (None, prompt_format)]
    return prompt_format if not fallen else f"{prompt_format} ({len(fallen)} lm-eval)"


def table_notes(table: Table) -> list[str]:
    """The notes under the table: units and format, the Average, every empty cell, metrics and sizes, limits."""
    fmt = {
        "lm-eval": "lm-eval's stock task configs (the retrospective's 'LM Eval Harness defaults')",
        "olmes": "OLMES-style variants where a benchmark has one, lm-eval's stock config elsewhere",
    }[table.prompt_format]
    notes = [
        f"Values are lm-eval's headline metric × 100, ± one standard error (lm-eval's stderr); prompt format: {fmt}.",
        f"Average is the simple mean over the {len(table.columns)} columns, as the retrospective's; its ± is"
        " sqrt(Σ se²)/k, treating the tasks as independent.",
    ]
    for row in table.rows:
        if row.average.missing:
            notes.append(
                f"Average of {row.label} is over {row.average.columns} of {row.average.of} columns (missing:"
                f" {', '.join(row.average.missing)}), not comparable to a full {row.average.of}-column average."
            )
    limited: dict[tuple[int, ...], list[str]] = {}
    for row in table.rows:
        if row.limits:
            limited.setdefault(row.limits, []).append(row.label)
    for limits, labels in limited.items():
        notes.append(
            f"{', '.join(labels)} {'was' if len(labels) == 1 else 'were'} scored on the first"
            f" {'/'.join(map(str, limits))} documents of each task (--limit), not the full sets."
        )
    notes += _empty_notes(table)
    if table.prompt_format == "olmes":
        fallen = [
            c.title
            for i, c in enumerate(table.columns)
            if any(r.cells[i].prompt_format == "lm-eval" for r in table.rows)
        ]
        if fallen:
            notes.append(f"In lm-eval's format (no OLMES variant): {', '.join(fallen)}.")
    metrics = []
    for index, column in enumerate(table.columns):
        cells = [row.cells[index] for row in table.rows if row.cells[index].value is not None]
        if cells:
            names = "/".join(sorted({str(cell.metric) for cell in cells}))
            sizes = "/".join(str(n) for n in sorted({cell.n for cell in cells}))
            shots = sorted({cell.num_fewshot for cell in cells if cell.num_fewshot is not None})
            shot_text = f", {'/'.join(map(str, shots))}-shot" if shots else ""
            metrics.append(f"{column.title} {names}{shot_text} (n={sizes})")
    if metrics:
        notes.append(f"Metrics, few-shot counts where recorded (documents scored): {'; '.join(metrics)}.")
    if table.compare is not None:
        notes += _compare_notes(table)
    return notes


def _empty_notes(table: Table) -> list[str]:
    """One note per (models, reason) naming every empty column it covers, e.g. the six a file does not hold."""
    groups: dict[tuple[str, str], list[str]] = {}
    for index, column in enumerate(table.columns):
        empty = [(row.label, row.cells[index].empty) for row in table.rows if row.cells[index].value is None]
        if empty:
            who = "every model" if len(empty) == len(table.rows) else ", ".join(label for label, _ in empty)
            reasons = "; ".join(sorted({str(reason) for _, reason in empty}))
            groups.setdefault((who, reasons), []).append(f"{column.title} ({column.task})")
    return [f"Empty for {who}: {', '.join(titles)} ({reasons})." for (who, reasons), titles in groups.items()]


def _compare_notes(table: Table) -> list[str]:
    before, after = table.rows[0].label, table.rows[1].label
    falls = [d.title for d in table.compare or () if d.degraded]
    beyond = [d.title for d in table.compare or () if d.beyond_noise]
    return [
        f"{DEGRADED} marks a column where {after} scores below {before} (the base metric degrades):"
        f" {len(falls)} of {len(table.compare or ())}{': ' + ', '.join(falls) if falls else ''}.",
        f"Falls larger than {NOISE_SE:g} standard errors of the difference (sqrt(se_before² + se_after²)):"
        f" {', '.join(beyond) if beyond else 'none'}.",
    ]


def _markdown_table(header: list[str], lines: list[list[str]], left: int) -> list[str]:
    align = [":---"] * left + ["---:"] * (len(header) - left)
    return [f"| {' | '.join(cells)} |" for cells in (header, align, *lines)]


def render_markdown(table: Table) -> str:
    """The table as Markdown a person can paste: the rows, the before/after view if any, then the notes."""
    titles = [column.title for column in table.columns]
    rows = [
        [f"**{row.label}**", _format_text(row, table.prompt_format), _average_text(row.average)]
        + [_percent(cell.value, cell.stderr) for cell in row.cells]
        for row in table.rows
    ]
    lines = _markdown_table(["Model", "Format", "Average", *titles], rows, left=2)
    if table.compare is not None:
        before, after = table.rows
        diffs = [_percent(d.diff, d.stderr, sign=True) + (f" {DEGRADED}" if d.degraded else "") for d in table.compare]
        view = [
            [before.label, _average_text(before.average)] + [_percent(c.value, c.stderr) for c in before.cells],
            [after.label, _average_text(after.average)] + [_percent(c.value, c.stderr) for c in after.cells],
            [f"{after.label} − {before.label}", *diffs],
        ]
        lines += ["", f"Before/after: the base model {before.label} → its instruction-tuned {after.label}", ""]
        lines += _markdown_table(["", "Average", *titles], view, left=1)
    lines += ["", *(f"- {note}" for note in table_notes(table))]
    return "\n".join(lines) + "\n"


def table_json(table: Table) -> dict[str, Any]:
    """The table's numbers as JSON: lm-eval's fractions (the Markdown shows them × 100), notes as rendered."""
    rows = []
    for row in table.rows:
        cells = [
            {"title": c.column.title, "task": c.column.task, "value": c.value, "stderr": c.stderr, "n": c.n}
            | {"metric": c.metric, "prompt_format": c.prompt_format, "num_fewshot": c.num_fewshot, "empty": c.empty}
            for c in row.cells
        ]
        average = vars(row.average) | {"missing": list(row.average.missing)}
        rows.append({"label": row.label, "sources": list(row.sources), "average": average, "cells": cells})
    compare = None
    if table.compare is not None:
        deltas = [vars(d) | {"degraded": d.degraded, "beyond_noise": d.beyond_noise} for d in table.compare]
        compare = {"before": table.rows[0].label, "after": table.rows[1].label, "deltas": deltas}
    return {
        "suite": table.suite,
        "prompt_format": table.prompt_format,
        "columns": [{"title": c.title, "task": c.task} for c in table.columns],
        "rows": rows,
        "compare": compare,
        "notes": table_notes(table),
    }
