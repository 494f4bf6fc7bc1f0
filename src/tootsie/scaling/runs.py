"""Run records for the fits: read from sweep run directories or JSONL files, checked, never silently dropped.

A run record is one JSON object with at least `compute`, `params`, `tokens`
and `loss` (the isoflop fit) or `compute`, `batch_size` and `loss` (the
batch-size fit). Sources:

- a JSONL file, one record per line (blank lines allowed);
- a directory holding `run.json` (one sweep run's eval step) or `runs.jsonl`
  (the sweep's collect step).

Every problem is a `TootsieError` naming the file and line (or run): an
unparseable line, a missing or non-numeric field, a non-positive size, and a
NaN, infinite or missing loss. A caller may instead drop non-finite losses
explicitly (`drop_nonfinite=True`); the dropped records come back so the fit
can list them.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tootsie.errors import TootsieError

ISOFLOP_FIELDS = ("compute", "params", "tokens", "loss")
BATCH_FIELDS = ("compute", "batch_size", "loss")
RUN_FILE = "run.json"
RUNS_FILE = "runs.jsonl"


@dataclass(frozen=True)
class RunRecord:
    """One finished run: its numeric fields by name, and where it was read."""

    values: dict[str, float]
    """The required fields (compute, loss, ...) as floats."""
    source: str
    """`file:line` or the run.json path, for error messages."""
    name: str | None = None
    """The run's `name` field, if it has one."""
    extra: dict[str, object] = field(default_factory=dict)
    """Every other field of the record (kept for reports)."""

    def __getitem__(self, key: str) -> float:
        return self.values[key]

    def label(self) -> str:
        """`source (name)` for messages."""
        return f"{self.source} ({self.name})" if self.name else self.source


@dataclass(frozen=True)
class LoadedRuns:
    """Records that passed the checks, and the ones dropped on request (non-finite loss)."""

    runs: list[RunRecord]
    dropped: list[RunRecord]
    files: list[Path]


def _expand(path: Path) -> list[tuple[Path, bool]]:
    """(file, is_single_record) pairs for a path argument."""
    if path.is_dir():
        if (path / RUN_FILE).is_file():
            return [(path / RUN_FILE, True)]
        if (path / RUNS_FILE).is_file():
            return [(path / RUNS_FILE, False)]
        raise TootsieError(
            f"{path} holds neither {RUN_FILE} (one sweep run's eval step) nor {RUNS_FILE} "
            "(a sweep's collect step); pass one of those directories or a JSONL file"
        )
    if not path.is_file():
        raise TootsieError(f"run file not found: {path}")
    return [(path, path.suffix == ".json")]


def _records(file: Path, single: bool) -> list[tuple[str, object]]:
    text = file.read_text(encoding="utf-8")
    if single:
        try:
            return [(str(file), json.loads(text))]
        except json.JSONDecodeError as error:
            raise TootsieError(f"{file} is not valid JSON ({error}); rerun the step that wrote it") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((f"{file}:{number}", json.loads(line)))
        except json.JSONDecodeError as error:
            raise TootsieError(f"{file}:{number} is not a JSON object ({error}); fix or delete that line") from None
    return records


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def parse_record(source: str, payload: object, fields: Sequence[str]) -> RunRecord:
    """One record, with every required field a number, sizes positive and finite.

    The loss may be non-finite (checked by the caller).
    """
    if not isinstance(payload, dict):
        raise TootsieError(f"{source}: expected a JSON object with {', '.join(fields)}, got {type(payload).__name__}")
    name = payload.get("name") if isinstance(payload.get("name"), str) else None
    where = f"{source} ({name})" if name else source
    values = {}
    for key in fields:
        if key not in payload:
            raise TootsieError(f"{where}: missing field {key!r}; every run needs {', '.join(fields)}")
        number = _number(payload[key])
        if key == "loss":
            number = (
                math.nan
                if payload[key] is None
                or (isinstance(payload[key], str) and payload[key].lower() in ("nan", "inf", "-inf"))
                else number
            )
        if number is None:
            raise TootsieError(f"{where}: field {key!r} must be a number, got {payload[key]!r}")
        if key != "loss" and not (math.isfinite(number) and number > 0):
            raise TootsieError(f"{where}: field {key!r} must be a positive finite number, got {payload[key]!r}")
        values[key] = number
    return RunRecord(values, source, name, {k: v for k, v in payload.items() if k not in fields})


def load_runs(
    paths: Sequence[str | Path], fields: Sequence[str] = ISOFLOP_FIELDS, drop_nonfinite: bool = False
) -> LoadedRuns:
    """Read and check every run of `paths`; a non-finite loss is an error unless `drop_nonfinite`."""
    if not paths:
        raise TootsieError("no runs given; pass run directories or JSONL files")
    runs, dropped, files = [], [], []
    for argument in paths:
        for file, single in _expand(Path(argument)):
            files.append(file)
            for source, payload in _records(file, single):
                record = parse_record(source, payload, fields)
                if math.isfinite(record["loss"]):
                    runs.append(record)
                elif drop_nonfinite:
                    dropped.append(record)
                else:
                    raise TootsieError(
                        f"{record.label()}: loss is {record['loss']} (the run diverged or its eval failed); "
                        "rerun it, or pass --drop-nonfinite to leave such runs out (they are listed in the fit)"
                    )
    if not runs:
        raise TootsieError(f"no usable runs in {', '.join(map(str, paths))}")
    return LoadedRuns(runs, dropped, files)
