"""What the run report reads: the runs of one or several directories, with configs, rewinds and colours.

A directory holds `metrics.jsonl`: a training output directory (its config
from the executor's `.executor_info.json` or `tootsie train`'s `config.json`),
or a summary directory whose merged metrics label every record with its `run`
(pretrain, cooldown) and whose `summary.json` names each run's directory
(relative to the prefix when the executor ran the summary). Each
run also brings the rewinds its directory recorded (`rewinds.json`).

Several directories are compared: the first is the reference, every run of a
directory is drawn in that directory's colour, and labels are prefixed with the
directory's name when it holds more than one run (`a/pretrain`, `a/cooldown`).
With `x="tokens"` every record's `step` becomes the tokens trained on after it
(its original step kept as `train_step`), so panels, phases and rewinds line up
by data seen instead of optimizer steps.
"""

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tootsie.errors import TootsieError
from tootsie.executor.hashing import STEP_KEY
from tootsie.executor.metadata import INFO_FILE
from tootsie.executor.portable import portable, resolve_recorded, step_prefix
from tootsie.jsonfile import read_json
from tootsie.monitor.metrics_log import CONFIG_FILE, METRICS_FILE, read_metrics
from tootsie.monitor.signals import Rewind, read_rewinds
from tootsie.report.panels import Records, Span

X_AXES = ("step", "tokens")


@dataclass(frozen=True)
class RunData:
    """One run of the recipe: its metric records (step order), and its config if one was found."""

    label: str
    records: Records
    """Records with an integer step, in step order."""
    config: dict[str, object] | None
    config_source: str | None
    group: int = 0
    """Index of the directory it came from (0: the reference); runs of one directory share a colour."""
    rewinds: tuple[Rewind, ...] = ()
    """The rewinds its directory recorded."""

    @property
    def span(self) -> Span | None:
        """First and last logged step, None when there are no records."""
        return Span(self.label, self.records[0]["step"], self.records[-1]["step"]) if self.records else None


@dataclass(frozen=True)
class RunDirectory:
    """Everything the report reads from one directory, or several merged (`compared`)."""

    directory: Path
    runs: tuple[RunData, ...]
    skipped_lines: int
    """Unparseable lines of the metrics file(s)."""
    stepless: int
    """Parsed records without an integer step (left out of everything)."""
    summary: dict[str, object]
    compared: tuple[Path, ...] = ()
    """Every directory, reference first, when several are compared; empty for a single one."""


def get(config: dict[str, object] | None, *path: str) -> object:
    """A nested config value, None when any key is missing."""
    value: object = config
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _run_config(directory: Path) -> tuple[dict[str, object] | None, str | None]:
    """A run's config and where it came from (`portable`): the executor's metadata file, else config.json."""
    info = read_json(directory / INFO_FILE)
    if info and isinstance(info.get("config"), dict):
        return info["config"], portable(str(directory / INFO_FILE))
    config = read_json(directory / CONFIG_FILE)
    return (config, portable(str(directory / CONFIG_FILE))) if config else (None, None)


def _summary_run_dirs(root: Path, summary: dict[str, object]) -> dict[str, str]:
    """Run label → training directory of a summary.

    From summary.json (relative to the prefix when a step wrote it), else from the summary step's metadata
    (refs under its prefix).
    """
    if isinstance(summary.get("runs"), dict):
        return {label: resolve_recorded(str(path), root) for label, path in summary["runs"].items()}
    info = read_json(root / INFO_FILE) or {}
    refs, prefix = get(info, "config", "runs"), step_prefix(root)
    if not isinstance(refs, dict) or prefix is None:
        return {}
    return {
        label: str(Path(prefix) / ref[STEP_KEY])
        for label, ref in refs.items()
        if isinstance(ref, dict) and isinstance(ref.get(STEP_KEY), str)
    }


def load_run_directory(directory: str | Path) -> RunDirectory:
    """Read the metrics (grouped by their `run` label), configs, rewinds and summary of a run or summary directory."""
    root = Path(directory)
    if not (root / METRICS_FILE).is_file():
        raise TootsieError(
            f"no {METRICS_FILE} in {root};"
            " pass a training output directory (tootsie train --out) or the demo's summary directory"
        )
    from tootsie.report.run_summary import SUMMARY_FILE  # the summary step writes its report through this module

    read = read_metrics(root / METRICS_FILE)
    summary = read_json(root / SUMMARY_FILE) or {}
    run_dirs = _summary_run_dirs(root, summary)
    records = sorted((r for r in read.records if isinstance(r.get("step"), int)), key=lambda r: r["step"])
    own_config, own_source = _run_config(root)
    default_label = str((read_json(root / INFO_FILE) or {}).get("name", root.name)).rsplit("/", 1)[-1]
    groups: dict[str, Records] = {}
    for record in records:
        groups.setdefault(str(record.get("run", default_label)), []).append(record)
    runs = []
    for label, group in groups.items():
        config, source = (
            _run_config(Path(run_dirs[label]))
            if label in run_dirs
            else (own_config, own_source)
            if len(groups) == 1
            else (None, None)
        )
        rewinds = read_rewinds(run_dirs[label]) if label in run_dirs else read_rewinds(root)
        runs.append(RunData(label, group, config, source, rewinds=rewinds))
    return RunDirectory(root, tuple(runs), read.skipped_lines, len(read.records) - len(records), summary)


def directory_names(directories: list[Path]) -> list[str]:
    """Short distinct names: the directory name, with its parent's when two share one."""
    names = [d.resolve().name for d in directories]
    if len(set(names)) < len(names):
        names = [f"{d.resolve().parent.name}/{d.resolve().name}" for d in directories]
    return [f"{name} ({i})" if names.count(name) > 1 else name for i, name in enumerate(names)]


def load_runs(directories: list[str | Path]) -> RunDirectory:
    """One directory as `load_run_directory` reads it, or several compared: runs relabelled, grouped by directory."""
    if not directories:
        raise TootsieError("no run directory given; pass one or more training output or summary directories")
    if len(directories) == 1:
        return load_run_directory(directories[0])
    paths = [Path(d) for d in directories]
    loaded = [load_run_directory(p) for p in paths]
    runs = tuple(
        replace(run, label=name if len(data.runs) == 1 else f"{name}/{run.label}", group=index)
        for index, (name, data) in enumerate(zip(directory_names(paths), loaded))
        for run in data.runs
    )
    return RunDirectory(
        paths[0],
        runs,
        sum(d.skipped_lines for d in loaded),
        sum(d.stepless for d in loaded),
        loaded[0].summary,
        tuple(paths),
    )


def _tokens_of(run: RunData) -> tuple[np.ndarray, np.ndarray]:
    """The run's (step, tokens after the step) pairs, for mapping steps to tokens."""
    pairs = [(r["step"], r["tokens"]) for r in run.records if isinstance(r.get("tokens"), (int, float))]
    if not pairs:
        raise TootsieError(
            f"run {run.label!r} logged no `tokens` field, so it cannot be drawn against tokens; use --x step"
        )
    steps, tokens = zip(*pairs)
    return np.asarray(steps, dtype=np.float64), np.asarray(tokens, dtype=np.float64)


def step_to_tokens(run: RunData, step: float) -> int:
    """Tokens trained on after `step` of `run` (interpolated between logged steps)."""
    steps, tokens = _tokens_of(run)
    return int(round(float(np.interp(step, steps, tokens))))


def steps_to_tokens(run: RunData, steps: np.ndarray) -> np.ndarray:
    """`step_to_tokens` of many steps, reading the run's tokens once."""
    logged, tokens = _tokens_of(run)
    return np.array([int(round(float(value))) for value in np.interp(steps, logged, tokens)])


def on_tokens(data: RunDirectory) -> RunDirectory:
    """Every run with `step` replaced by its tokens (original kept as `train_step`), rewinds mapped the same way."""
    runs = []
    for run in data.runs:
        _tokens_of(run)  # fails early, naming the run, when it logged no tokens
        records = [
            {**r, "train_step": r["step"], "step": int(r["tokens"])}
            for r in run.records
            if isinstance(r.get("tokens"), (int, float))
        ]
        rewinds = tuple(
            replace(w, to_step=step_to_tokens(run, w.to_step), from_step=step_to_tokens(run, w.from_step))
            for w in run.rewinds
        )
        runs.append(replace(run, records=records, rewinds=rewinds))
    return replace(data, runs=tuple(runs))
