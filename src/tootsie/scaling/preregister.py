"""Preregistered predictions: a timestamped, hashed record written before a run, scored against its outcome after.

Marin preregisters the loss of a big run from its isoflop fit before launching
it (the 1e22 and 1e23 MoE runs in the seeds' weekly update), so the run tests
the law instead of tuning it. A record holds the prediction with its interval,
the UTC time, and the sha256 of the fit file it came from (and that file's
own input hashes); its `sha256` field hashes the canonical JSON of everything
else, so an edit after the fact is detected when it is scored. Records are
never overwritten.

Scoring takes the outcome as a number, or from runs: one run at the record's
budget gives its loss; three or more sizes give their isoflop minimum. When
the runs say when their training started (the training step's executor
metadata, found through the run record's `checkpoint`), the score also says
whether the record predates them. Infeasible runs (diverged) are no outcome
and are left out.

An executor step writes its record with `stamp=False`: no `created_at`, so
the record's bytes depend only on its inputs. Its time is then the step's
own executor metadata next to it (`end_time`, by which the record existed;
`start_time` if the step never finished).

Example: `tootsie scaling preregister --fit fit.json --compute 1e12 --name
tiny-1e12 --out prereg.json`, then after the runs `tootsie scaling score
prereg.json --runs runs.jsonl` gives the prediction, the measured isoflop
minimum at 1e12, the error and whether the interval held.
"""

import hashlib
import json
import math
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from tootsie import __version__, storage
from tootsie.errors import TootsieError
from tootsie.executor.metadata import INFO_FILE
from tootsie.executor.portable import portable, resolve_recorded
from tootsie.jsonfile import read_json, read_json_format, write_json_atomic
from tootsie.scaling.isoflop import budget_key, group_runs, vertices
from tootsie.scaling.predict import default_law, load_fit, predict
from tootsie.scaling.runs import REASON, RunRecord, load_runs

RECORD_FORMAT = "tootsie-preregistration/1"


def canonical_hash(payload: dict[str, object]) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of `payload` without its `sha256` field."""
    body = {key: value for key, value in payload.items() if key != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def preregister(
    fit_path: str | Path,
    compute: float,
    name: str,
    out: str | Path,
    law: str | None = None,
    note: str = "",
    *,
    stamp: bool = True,
) -> dict[str, object]:
    """Write a new prediction record for a run at `compute` to `out` (never over an existing file) and return it.

    `stamp=False` leaves out `created_at` (an executor step's output; see `preregistration_time`).
    """
    target = Path(out)
    if target.exists():
        raise TootsieError(f"{target} already exists; a preregistration is never overwritten: choose another --out")
    if not name.strip():
        raise TootsieError("--name must not be empty; name the run the prediction is for")
    fit = load_fit(fit_path)
    kind = law or default_law(fit)
    record: dict[str, object] = {"format": RECORD_FORMAT, "name": name}
    if stamp:
        record["created_at"] = _now()
    record |= {
        "compute": compute,
        "law": kind,
        "level": fit["config"]["level"],
        "prediction": predict(fit, compute, kind),
        "fit": {
            "path": portable(os.path.abspath(fit_path)),
            "sha256": hashlib.sha256(Path(fit_path).read_bytes()).hexdigest(),
            "inputs": fit["inputs"],
        },
        "note": note,
        "tootsie_version": __version__,
    }
    record["sha256"] = canonical_hash(record)
    write_json_atomic(target, record)
    return record


def load_record(path: str | Path) -> dict[str, object]:
    """A preregistration record, with its hash verified."""
    record = read_json_format(
        path, RECORD_FORMAT, "preregistration record", "write one with `tootsie scaling preregister`"
    )
    if record.get("sha256") != canonical_hash(record):
        raise TootsieError(
            f"{path} was modified after it was written: its content no longer matches its "
            f"sha256 {record.get('sha256')!r}; a changed preregistration cannot be scored"
        )
    return record


def preregistration_time(record: dict[str, object], path: str | Path) -> str | None:
    """When the record at `path` was written: its `created_at`, else its step's executor metadata; None if unknown."""
    if record.get("created_at"):
        return str(record["created_at"])
    info = read_json(Path(path).parent / INFO_FILE) or {}
    written = info.get("end_time") or info.get("start_time")
    return written if isinstance(written, str) else None


def training_start(run: RunRecord) -> str | None:
    """When the run's training step started (ISO 8601), from its executor metadata; None when unknown.

    A sweep's `run.json` names its training output portably (`checkpoint`) and keeps
    no clock time, so its bytes are reproducible; the start time is the training
    step's own `.executor_info.json`. Records written before that carry `train_started_at`.
    """
    if run.extra.get("train_started_at"):
        return str(run.extra["train_started_at"])
    checkpoint = run.extra.get("checkpoint")
    if not isinstance(checkpoint, str) or not checkpoint:
        return None
    if run.file is None:
        return None
    training = resolve_recorded(checkpoint, run.file.parent)
    if storage.is_remote(training):
        return None
    started = (read_json(Path(training) / INFO_FILE) or {}).get("start_time")
    return started if isinstance(started, str) else None


def outcome_from_runs(paths: Sequence[str | Path], compute: float) -> tuple[float, str, str | None]:
    """(loss, how it was measured, earliest training start) of the runs at `compute`.

    The loss is one run's loss, or the isoflop minimum of 3+ sizes.
    """
    loaded = load_runs(paths)
    matching = [run for run in loaded.runs if budget_key(run["compute"]) == budget_key(compute)]
    infeasible = [run for run in loaded.infeasible if budget_key(run["compute"]) == budget_key(compute)]
    if not matching and infeasible:
        reasons = "; ".join(f"{run.label()}: {run.extra.get(REASON)}" for run in infeasible)
        raise TootsieError(
            f"every run at the preregistered budget {compute:.4g} FLOPs is infeasible ({reasons}); "
            "there is no outcome to score: rerun the budget (e.g. at a lower learning rate)"
        )
    if not matching:
        budgets = sorted({budget_key(run["compute"]) for run in loaded.runs})
        raise TootsieError(
            f"no run at the preregistered budget {compute:.4g} FLOPs "
            f"among {', '.join(map(str, paths))} (budgets: {budgets})"
        )
    starts = [start for start in map(training_start, matching) if start]
    started = min(starts, key=datetime.fromisoformat) if len(starts) == len(matching) else None
    left_out = f" ({len(infeasible)} infeasible left out)" if infeasible else ""
    if len(matching) == 1:
        return matching[0]["loss"], f"run {matching[0].label()}{left_out}", started
    group = group_runs(matching)[0]
    minimum = vertices(group, group.losses[None, :])
    method = "isoflop minimum" if minimum.quadratic[0] else "lowest run (the parabola opens downwards)"
    return float(minimum.loss[0]), f"{method} of {len(matching)} runs{left_out}", started


def score(
    record: dict[str, object],
    actual: float,
    source: str,
    started: str | None = None,
    preregistered_at: str | None = None,
) -> dict[str, object]:
    """Compare a verified record's prediction with the measured `actual` loss.

    `preregistered_at` defaults to the record's `created_at` (`preregistration_time` finds it for an unstamped record).
    """
    if not math.isfinite(actual):
        raise TootsieError(f"the actual loss is {actual}; score a finished run with a finite loss")
    prediction = record["prediction"]
    written = preregistered_at or record.get("created_at")
    before = (
        None
        if started is None or written is None
        else datetime.fromisoformat(str(written)) <= datetime.fromisoformat(started)
    )
    return {
        "name": record["name"],
        "compute": record["compute"],
        "predicted": prediction["loss"],
        "low": prediction["low"],
        "high": prediction["high"],
        "actual": actual,
        "error": actual - prediction["loss"],
        "relative_error": abs(actual - prediction["loss"]) / actual,
        "within_interval": prediction["low"] <= actual <= prediction["high"],
        "actual_source": source,
        "preregistered_at": written,
        "run_started_at": started,
        "preregistered_before_run": before,
        "scored_at": _now(),
        "record_sha256": record["sha256"],
    }
