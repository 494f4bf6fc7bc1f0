"""Trackers: where a run's per-step records go, behind one small interface.

The JSONL log (`metrics.jsonl`, `MetricsLog`) is always on: every tootsie tool
reads it. Weights & Biases and TensorBoard are optional extras, chosen in
`TrainConfig.trackers` by registry name (`{kind: wandb, project: ...}`,
`{kind: tensorboard}`), each a frozen config whose `build()` opens a `Tracker`.
Each names its extra (`EXTRA`); `require_trackers` checks them all, which
`open_trackers` does before it opens any and `tootsie train` before it starts.

A record is the trainer's dict for one step. Backends that only chart numbers
get the numeric fields (`numeric_fields`: lists such as `layer_update_norms`
become `layer_update_norms/0`, `/1`, ...; a list of lists, an MoE run's
`moe/expert_load` [layers][experts], becomes each row's extremes,
`moe/expert_load/<layer>/max` and `/min`, the busiest and idlest expert's
share, two scalars a layer instead of layers × experts charts; the whole
matrix stays in `metrics.jsonl`, where the report and the dashboard draw it;
None is left out) and the string
fields (`phase`) as text: TensorBoard writes a text entry when the value
changes, W&B stores it in the run history. A resume or a rewind restarts the
run at an earlier step (`Tracker.rewind`): the JSONL log drops the records at
or after it, TensorBoard purges them (`purge_step`), and W&B charts against
the logged `step` field, so the re-run steps are drawn over the abandoned ones.

Example: `trackers: [{kind: tensorboard}]` writes `<out>/tensorboard/events.*`;
`tensorboard --logdir <out>/tensorboard` shows `loss`, `grad_norm`,
`layer_update_norms/0`, ... and the phase names under Text.
"""

import logging
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Protocol

from tootsie.configfile import register_kinds
from tootsie.extras import import_extra, require
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.monitor.metrics_log import METRICS_FILE, MetricsLog
from tootsie.monitor.progress import progress_tracker

logger = logging.getLogger(__name__)
WANDB_MODES = ("online", "offline", "disabled")
WANDB_ID_FILE = "wandb.json"


class Tracker(Protocol):
    """A destination for per-step records."""

    def log(self, record: dict[str, object], step: int) -> None:
        """Record the metrics of `step`."""

    def rewind(self, step: int) -> None:
        """The run restarts at `step` (a resume or a rewind): records at or after it are superseded."""

    def close(self) -> None:
        """Flush and release the backend."""


def numeric_fields(record: dict[str, object]) -> dict[str, float]:
    """The chartable fields: numbers (bools as 0/1), lists of numbers flattened to `name/i`, None left out.

    A list of lists (`moe/expert_load`, [layers][experts]) gives each row's extremes, `name/i/max` and
    `name/i/min` (over its finite numbers), not one chart per entry.
    """
    values: dict[str, float] = {}
    for name, value in record.items():
        if isinstance(value, (bool, int, float)):
            values[name] = float(value)
        elif isinstance(value, (list, tuple)) and any(isinstance(row, (list, tuple)) for row in value):
            for i, row in enumerate(value):
                numbers = row if isinstance(row, (list, tuple)) else ()
                finite = [float(v) for v in numbers if isinstance(v, (int, float)) and math.isfinite(v)]
                if finite:
                    values |= {f"{name}/{i}/max": max(finite), f"{name}/{i}/min": min(finite)}
        elif isinstance(value, (list, tuple)):
            values |= {
                f"{name}/{i}": float(item) for i, item in enumerate(value) if isinstance(item, (bool, int, float))
            }
    return values


def text_fields(record: dict[str, object]) -> dict[str, str]:
    """The string fields of a record (the schedule phase, say)."""
    return {name: value for name, value in record.items() if isinstance(value, str)}


def _require(module: str, extra: str, kind: str) -> ModuleType:
    """Import an optional backend, or raise MissingExtra naming the pip extra that provides it."""
    return import_extra(module, extra=extra, purpose=f"the {kind!r} tracker")


def require_trackers(choices: Sequence["TrackerChoice"]) -> None:
    """Raise MissingExtra for the first tracker in `choices` whose extra is not installed."""
    for kind, config in TRACKERS.items():
        if any(isinstance(choice, config) for choice in choices):
            require((config.EXTRA,), purpose=f"the {kind!r} tracker")


class JsonlTracker:
    """`metrics.jsonl` in the output directory, one flushed line per step."""

    def __init__(self, path: Path, start_step: int) -> None:
        self.path = path
        self._log = MetricsLog(path, resume_step=start_step)

    def log(self, record: dict[str, object], step: int) -> None:
        """Append `{"step": step, **record}`."""
        self._log.write({"step": step, **record})

    def rewind(self, step: int) -> None:
        """Drop the records at or after `step` from the file."""
        self._log.close()
        self._log = MetricsLog(self.path, resume_step=step)

    def close(self) -> None:
        """Close the file."""
        self._log.close()


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases (extra `wandb`); `mode: offline` writes a local run that `wandb sync` uploads later."""

    EXTRA: ClassVar[str] = "wandb"
    project: str = "tootsie"
    """W&B project."""
    name: str | None = None
    """Run name; None uses the output directory's name."""
    entity: str | None = None
    """W&B entity (team or user); None uses the logged-in default."""
    tags: tuple[str, ...] = ()
    """Run tags."""
    mode: str | None = None
    """'online', 'offline' or 'disabled'; None leaves it to W&B (the WANDB_MODE variable, `wandb offline`)."""

    def __post_init__(self) -> None:
        if self.mode is not None and self.mode not in WANDB_MODES:
            raise ValueError(f"mode must be one of {WANDB_MODES} or None, got {self.mode!r}")
        if not self.project:
            raise ValueError("project must be a non-empty name")

    def build(self, output: Path, run_config: dict[str, Any], start_step: int) -> Tracker:
        """Open (or, on a resume, reopen) this output directory's W&B run under `output/wandb`."""
        return WandbTracker(self, output, run_config)


class WandbTracker:
    """One W&B run per output directory; its id is kept in `wandb.json` so a resume continues the same run."""

    def __init__(self, config: WandbConfig, output: Path, run_config: dict[str, Any]) -> None:
        wandb = _require("wandb", "wandb", "wandb")
        saved = read_json(output / WANDB_ID_FILE)
        run_id = saved["id"] if saved and isinstance(saved.get("id"), str) else uuid.uuid4().hex[:16]
        if saved is None:
            write_json_atomic(output / WANDB_ID_FILE, {"id": run_id})
        self.run = wandb.init(
            project=config.project,
            entity=config.entity,
            name=config.name or output.resolve().name,
            tags=list(config.tags),
            mode=config.mode,
            dir=str(output),
            id=run_id,
            resume="allow",
            config=run_config,
        )
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")

    def log(self, record: dict[str, object], step: int) -> None:
        """Log numbers (lists flattened) and strings, charted against `step`."""
        self.run.log({**numeric_fields(record), **text_fields(record), "step": step})

    def rewind(self, step: int) -> None:
        """Nothing to drop: charts use the `step` field, so re-run steps overlay the abandoned ones."""

    def close(self) -> None:
        """Finish the run (an offline run's files are complete after this)."""
        self.run.finish()


@dataclass(frozen=True)
class TensorBoardConfig:
    """TensorBoard event files (extra `tensorboard`, written with tensorboardX)."""

    EXTRA: ClassVar[str] = "tensorboard"
    logdir: str | None = None
    """Event directory; None uses `<out>/tensorboard`."""

    def build(self, output: Path, run_config: dict[str, Any], start_step: int) -> Tracker:
        """A writer that purges events at or after `start_step` left by an earlier attempt."""
        return TensorBoardTracker(Path(self.logdir) if self.logdir else output / "tensorboard", start_step)


class TensorBoardTracker:
    """Scalars for every number, text entries when a string field (the phase) changes."""

    def __init__(self, logdir: Path, start_step: int) -> None:
        self._module = _require("tensorboardX", "tensorboard", "tensorboard")
        self.logdir = logdir
        self._open(start_step)

    def _open(self, start_step: int) -> None:
        # Two writers opened in one second would share a file name; TensorBoard reads files in name order.
        self._writer = self._module.SummaryWriter(
            str(self.logdir), purge_step=start_step or None, filename_suffix=f".{time.time_ns()}"
        )
        self._texts: dict[str, str] = {}

    def log(self, record: dict[str, object], step: int) -> None:
        """Write each finite number as a scalar and each changed string as text."""
        for name, value in numeric_fields(record).items():
            if math.isfinite(value):  # tensorboardX prints a complaint for each NaN; a gap in the chart says the same
                self._writer.add_scalar(name, value, step)
        for name, value in text_fields(record).items():
            if self._texts.get(name) != value:
                self._writer.add_text(name, value, step)
                self._texts[name] = value

    def rewind(self, step: int) -> None:
        """Start a new event file that tells TensorBoard to drop events at or after `step`."""
        self._writer.close()
        self._open(step)

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


TRACKERS: dict[str, type] = {"wandb": WandbConfig, "tensorboard": TensorBoardConfig}
register_kinds(TRACKERS)
TrackerChoice = WandbConfig | TensorBoardConfig


class Trackers:
    """Several trackers behind the one interface; the JSONL log comes first."""

    def __init__(self, trackers: Sequence[Tracker]) -> None:
        self.trackers = list(trackers)

    def log(self, record: dict[str, object], step: int) -> None:
        """Log to every tracker."""
        for tracker in self.trackers:
            tracker.log(record, step)

    def rewind(self, step: int) -> None:
        """Rewind every tracker to `step`."""
        for tracker in self.trackers:
            tracker.rewind(step)

    def close(self) -> None:
        """Close every tracker, even when one fails (the first failure is raised after)."""
        failures = []
        for tracker in self.trackers:
            try:
                tracker.close()
            except Exception as error:  # noqa: BLE001 - every backend must get its close
                logger.error("closing tracker %s failed: %s", type(tracker).__name__, error)
                failures.append(error)
        if failures:
            raise failures[0]


def open_trackers(
    output: Path, choices: Sequence[TrackerChoice], run_config: dict[str, Any], start_step: int
) -> Trackers:
    """The JSONL log, every configured tracker and the progress line, for a run (re)starting at `start_step`.

    The progress line (`monitor.progress`) needs the run's length: it is drawn
    when `run_config` (the TrainConfig as plain data) has `num_steps` and
    progress is not off in this process.
    """
    require_trackers(choices)
    opened: list[Tracker] = [JsonlTracker(output / METRICS_FILE, start_step)]
    try:
        for choice in choices:
            opened.append(choice.build(output, run_config, start_step))
        total = run_config.get("num_steps")
        progress = progress_tracker(output, total, start_step) if isinstance(total, int) else None
        if progress is not None:
            opened.append(progress)
    except BaseException:
        Trackers(opened).close()
        raise
    return Trackers(opened)
