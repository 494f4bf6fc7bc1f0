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

A run that diverged inside a sweep says so: its record has `"feasible": false`
and a `reason` (Vizier marks such trials infeasible rather than crashing). It
is set apart in `LoadedRuns.infeasible`, never fitted and never an error; its
loss may be null or missing, its other fields are checked as usual. Example:
`{"name": "1e12-d32", "compute": 1e12, "params": 2.8e5, "tokens": 1.1e6,
"feasible": false, "reason": "loss nan at step 12", "loss": null}`.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tootsie.errors import TootsieError
from tootsie.executor.portable import portable

ISOFLOP_FIELDS = ("compute", "params", "tokens", "loss")
BATCH_FIELDS = ("compute", "batch_size", "loss")
RUN_FILE = "run.json"
RUNS_FILE = "runs.jsonl"
REASON = "reason"
"""The field of an infeasible record that says why the run failed."""


@dataclass(frozen=True)
class RunRecord:
    """One finished run: its numeric fields by name, and where it was read."""

    values: dict[str, float]
    """The required fields (compute, loss, ...) as floats."""
    source: str
    """`file:line` or the run.json path, for messages and outputs (`portable` inside a step)."""
    name: str | None = None
    """The run's `name` field, if it has one."""
    extra: dict[str, object] = field(default_factory=dict)
    """Every other field of the record (kept for reports)."""
    file: Path | None = None
    """The file the record was read from, as opened (for paths it records relative to itself)."""

    def __getitem__(self, key: str) -> float:
        return self.values[key]

    def label(self) -> str:
        """`source (name)` for messages."""
        return f"{self.source} ({self.name})" if self.name else self.source


@dataclass(frozen=True)
class LoadedRuns:
    """Records that passed the checks, the ones dropped on request (non-finite loss), and the infeasible ones."""

    runs: list[RunRecord]
    """Feasible runs with a finite loss: what the fits use."""
    dropped: list[RunRecord]
    """Runs with a non-finite loss left out because `drop_nonfinite` was asked for."""
    files: list[Path]
    """Every file read, in order (the fit records their hashes)."""
    infeasible: list[RunRecord] = field(default_factory=list)
    """Runs marked `"feasible": false` (diverged inside a sweep); their loss is NaN when null or missing."""


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
    """(source, payload) of every record of `file`; sources name the file portably, so a step's output that
    quotes them is the same under any prefix."""
    text, shown = file.read_text(encoding="utf-8"), portable(str(file))
    if single:
        try:
            return [(shown, json.loads(text))]
        except json.JSONDecodeError as error:
            raise TootsieError(f"{file} is not valid JSON ({error}); rerun the step that wrote it") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((f"{shown}:{number}", json.loads(line)))
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


def _feasible(source: str, payload: object) -> bool:
    """The record's `feasible` flag (True when absent); any value but a bool is an error naming the record."""
    flag = payload.get("feasible", True) if isinstance(payload, dict) else True
    if not isinstance(flag, bool):
        raise TootsieError(
            f"{source}: field 'feasible' must be true or false, got {flag!r}; "
            "a sweep writes false (with a reason) for a run that diverged"
        )
    return flag


def _infeasible_record(source: str, payload: dict[str, object], fields: Sequence[str]) -> RunRecord:
    """An infeasible run: every required field but the loss checked; the loss a number or NaN."""
    record = parse_record(source, payload, [key for key in fields if key != "loss"])
    loss = _number(payload.get("loss"))
    values = {**record.values, "loss": math.nan if loss is None else loss}
    return RunRecord(values, source, record.name, {k: v for k, v in record.extra.items() if k != "loss"})


def infeasible_list(runs: Sequence[RunRecord]) -> list[dict[str, object]]:
    """`{"source", "name", "compute", "reason"}` of each infeasible run, as the fit and batch-size outputs list them."""
    return [
        {"source": run.source, "name": run.name, "compute": run["compute"], "reason": run.extra.get(REASON)}
        for run in runs
    ]


def _set_apart(dropped: Sequence[RunRecord], infeasible: Sequence[RunRecord]) -> str:
    """`; dropped ...; infeasible ...` naming the runs set apart, for the error when none is left."""
    text = f"; dropped (non-finite loss): {', '.join(r.label() for r in dropped)}" if dropped else ""
    if infeasible:
        text += f"; infeasible: {', '.join(f'{r.label()}: {r.extra.get(REASON)}' for r in infeasible)}"
    return text


def load_runs(
    paths: Sequence[str | Path], fields: Sequence[str] = ISOFLOP_FIELDS, drop_nonfinite: bool = False
) -> LoadedRuns:
    """Read and check every run of `paths`; a non-finite loss is an error unless `drop_nonfinite`.

    Infeasible runs (`"feasible": false`) are set apart, whatever their loss.
    """
    if not paths:
        raise TootsieError("no runs given; pass run directories or JSONL files")
    runs, dropped, files, infeasible = [], [], [], []
    for argument in paths:
        for file, single in _expand(Path(argument)):
            files.append(file)
            for source, payload in _records(file, single):
                if not _feasible(source, payload):
                    infeasible.append(replace(_infeasible_record(source, payload, fields), file=file))
                    continue
                record = replace(parse_record(source, payload, fields), file=file)
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
        raise TootsieError(
            f"no usable runs in {', '.join(map(str, paths))}{_set_apart(dropped, infeasible)}; "
            "fits and scores need finished, feasible runs"
        )
    return LoadedRuns(runs, dropped, files, infeasible)
