"""Automatic rewind: when a loss spike settles into a plateau, go back and skip its data.

Design. The training loop keeps the recent `(step, loss)` points and runs the
spike classifier (`tootsie.monitor.spikes`) on them after every step. A spike
at step p is final once `horizon + settle` steps followed it (before that it
could still rejoin the band), so a `plateau` is acted on at step
`t = p + horizon + settle`: the run goes back to its newest checkpoint c < p
and skips every data step that steps c..t drew, the batches seen before and
during the spike (the recipe of PaLM, Chowdhery et al. 2022, section 5.1:
restart about 100 steps before a spike and skip 200-500 batches). Because `batch(step)` is stateless, skipping is exact:
train step s draws data step `DataSkips.data_step(s)`, the s-th data step
outside the skipped windows. Checkpoints after c are retired first, then the
event is appended to `rewinds.json`, the durable record the windows are read
back from on every resume; a crash between the two re-runs the same steps,
finds the same plateau and rewinds the same way, so a killed run still ends
bit-identical to an uninterrupted one.

Example: checkpoints every 4 steps, `horizon=6`, `settle=3`, junk batches at
data steps 30..39. The loss jumps at step 30 and stays up; at step 39 the spike
is a final plateau; the run reloads checkpoint 28 and skips data steps
[28, 40): train step 28 draws data step 40 (the first clean batch), step 29
draws 41, and so on.
"""

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.jsonfile import read_json
from tootsie.monitor.metrics_log import MetricsRead
from tootsie.monitor.signals import REWINDS_FILE, write_rewinds
from tootsie.monitor.spikes import SpikeConfig, find_spikes
from tootsie.train.checkpoint import Location, delete_checkpoint, list_checkpoints


@dataclass(frozen=True)
class RewindConfig:
    """Rewind to the last good checkpoint and skip the data window when a spike becomes a plateau."""

    spikes: SpikeConfig = field(default_factory=SpikeConfig)
    """The detector and classifier; a plateau is acted on `horizon + settle` steps after the spike starts."""
    max_rewinds: int = 3
    """Rewinds allowed per run; later plateaus are only logged (a run that keeps spiking needs a person)."""

    def __post_init__(self) -> None:
        if self.max_rewinds < 1:
            raise ValueError(
                f"max_rewinds must be >= 1, got {self.max_rewinds}; set rewind to None to turn rewinding off"
            )

    @property
    def delay(self) -> int:
        """Steps between a spike's start and the step at which its classification is final."""
        return self.spikes.horizon + self.spikes.settle


@dataclass(frozen=True)
class DataSkips:
    """Skipped data-step windows `[start, end)`, sorted and disjoint, and the step → data-step map they define."""

    windows: tuple[tuple[int, int], ...] = ()

    def data_step(self, step: int) -> int:
        """The data step that train step `step` draws: the `step`-th data step outside every window."""
        position = step
        for start, end in self.windows:
            if position >= start:
                position += end - start
        return position

    def add(self, start: int, end: int) -> "DataSkips":
        """These windows plus `[start, end)`, merged."""
        merged: list[tuple[int, int]] = []
        for low, high in sorted([*self.windows, (start, end)]):
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        return DataSkips(tuple(merged))

    def sequences_before(self, step: int, schedule: BatchSchedule) -> int:
        """Sequences trained on by the train steps before `step` (skipped windows do not count)."""
        position = self.data_step(step)
        skipped = sum(
            int(schedule.offset(end)) - int(schedule.offset(start)) for start, end in self.windows if end <= position
        )
        return int(schedule.offset(position)) - skipped


def read_rewinds(output: Path) -> list[dict[str, object]]:
    """The rewind events recorded in `output/rewinds.json` (oldest first; empty when none)."""
    payload = read_json(output / REWINDS_FILE)
    return list(payload["rewinds"]) if payload else []


def skips_of(events: list[dict[str, object]]) -> DataSkips:
    """The skipped windows of a run's rewind events."""
    skips = DataSkips()
    for event in events:
        start, end = event["skipped_data_steps"]
        skips = skips.add(int(start), int(end))
    return skips


class PlateauWatch:
    """The run's recent (step, loss) points and, after every step, the plateau check.

    Built from the run's logged records, as a resume reads them, so a run
    watched since step 0 and one resumed midway decide identically; only the
    last `2 * window + delay` points are kept (enough for a spike's baseline,
    and a constant cost per step).
    """

    def __init__(self, config: RewindConfig, records: list[dict[str, object]]) -> None:
        self.config = config
        self.points: deque[tuple[int, float]] = deque(maxlen=2 * config.spikes.window + config.delay + 1)
        for record in records:
            self._add(record.get("step"), record.get("loss"))

    def _add(self, step: object, loss: object) -> None:
        if isinstance(step, int) and isinstance(loss, (int, float)) and math.isfinite(loss):
            self.points.append((step, float(loss)))

    def observe(self, step: int, loss: float) -> dict[str, object] | None:
        """Add the loss of `step`; return the spike whose classification became final at it if that is a plateau."""
        self._add(step, loss)
        report = find_spikes(
            MetricsRead([{"step": s, "loss": value} for s, value in self.points], 0), self.config.spikes
        )
        for spike in report["spikes"]:
            if spike["kind"] == "plateau" and spike["step"] + self.config.delay == step:
                return spike
        return None


def rewind_target(checkpoints: Location, spike_step: int) -> int | None:
    """The newest finished checkpoint before the spike, or None when there is none."""
    before = [step for step, _ in list_checkpoints(checkpoints) if step < spike_step]
    return before[-1] if before else None


def record_rewind(
    output: Path, checkpoints: Location, events: list[dict[str, object]], event: dict[str, object]
) -> None:
    """Retire the checkpoints after the rewind target, then append `event` to `rewinds.json`.

    A retired checkpoint is first uncommitted (one atomic step: it stops
    being a resume candidate), then deleted (`checkpoint.delete_checkpoint`).
    """
    for step, path in list_checkpoints(checkpoints):
        if step > int(event["to_step"]):
            delete_checkpoint(path)
    write_rewinds(output, [*events, event])


def rewind_event(spike: dict[str, object], detected_at: int, to_step: int, skips: DataSkips) -> dict[str, object]:
    """The record of one rewind: the spike, where it was found, where the run went back to, what it skips."""
    return {
        "spike_step": int(spike["step"]),
        "height": float(spike["height"]),
        "baseline": float(spike["baseline"]),
        "detected_at": detected_at,
        "to_step": to_step,
        "skipped_data_steps": [skips.data_step(to_step), skips.data_step(detected_at) + 1],
    }


def rewind_fields(event: dict[str, object], count: int) -> dict[str, object]:
    """Metrics-record fields of the first step trained after a rewind."""
    start, end = event["skipped_data_steps"]
    return {
        "rewind/count": count,
        "rewind/from_step": event["detected_at"],
        "rewind/spike_step": event["spike_step"],
        "rewind/skip_start": start,
        "rewind/skip_end": end,
    }
