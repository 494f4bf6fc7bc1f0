"""Training progress as a tracker: step / total, loss, tokens/s and ETA, live on a terminal or every 20 s in a log.

`open_trackers` adds a `ProgressTracker` beside the JSONL log whenever the
process's progress mode (`$TOOTSIE_PROGRESS`, `--quiet` sets it to off) is not
off, so `tootsie train`, and every training step the executor runs for
`tootsie run` and `tootsie demo`, shows its progress without the trainer
knowing about terminals. `training_note` reads the same figures back from a
run's files, for `tootsie status` on a step that is still running. The line itself is `executor.progress.ProgressLine`
(shared with the datakit's shard progress); it writes to stderr only.

Example, a 400-step run in a log (not a terminal)::

    12:00:05 train pretrain-1a2b3c4d5e6f: step 1/400 (0%) loss 10.812 1,234 tok/s
    12:00:25 train pretrain-1a2b3c4d5e6f: step 120/400 (30%) loss 3.412 12,345 tok/s eta 2m10s
"""

import math
from pathlib import Path

from tootsie.executor.progress import ProgressLine, progress_mode, progress_text
from tootsie.jsonfile import read_json
from tootsie.monitor.metrics_log import CONFIG_FILE, METRICS_FILE, read_metrics


def training_fields(record: dict[str, object]) -> tuple[str, ...]:
    """The figures of a training record shown on the progress line: `loss 3.412`, `12,345 tok/s` (and an RL
    iteration's `reward 0.312`)."""
    fields = []
    loss, tokens_per_s = record.get("loss"), record.get("tokens_per_s")
    if isinstance(loss, (int, float)):
        fields.append(f"loss {loss:.3f}" if math.isfinite(loss) else f"loss {loss}")
    reward = record.get("rl/reward_mean")  # an RL run: the loss of a policy gradient says little, the reward does
    if isinstance(reward, (int, float)):
        fields.append(f"reward {reward:.3f}")
    if isinstance(tokens_per_s, (int, float)) and math.isfinite(tokens_per_s):
        fields.append(f"{tokens_per_s:,.0f} tok/s")
    return tuple(fields)


class ProgressTracker:
    """A `Tracker` that draws a run's progress: after step `s` is logged, `s + 1` of `total_steps` are done."""

    def __init__(self, line: ProgressLine, start_step: int) -> None:
        self.line = line
        self.line.restart(start_step)

    def log(self, record: dict[str, object], step: int) -> None:
        """Show the step just finished with its loss and tokens/s."""
        self.line.update(step + 1, training_fields(record))

    def rewind(self, step: int) -> None:
        """The run restarts at `step`: the bar goes back and the ETA is measured afresh."""
        self.line.restart(step)

    def close(self) -> None:
        """Leave the last state on screen (or print it to the log)."""
        self.line.close()


def progress_tracker(output: Path, total_steps: int, start_step: int) -> ProgressTracker | None:
    """The progress tracker of a run writing `output`, or None when progress is off in this process."""
    if progress_mode() == "off":
        return None
    return ProgressTracker(ProgressLine(f"train {output.resolve().name}", total_steps, "step"), start_step)


def training_note(directory: str | Path) -> str | None:
    """`step 120/400 (30%) loss 3.412 ...` from a run directory's last logged record; None without one."""
    path = Path(directory)
    if not (path / METRICS_FILE).is_file():
        return None
    records = read_metrics(path / METRICS_FILE).records
    if not records or not isinstance(records[-1].get("step"), int):
        return None
    last = records[-1]
    total = (read_json(path / CONFIG_FILE) or {}).get("num_steps")
    done, fields = last["step"] + 1, training_fields(last)
    return (
        progress_text("step", done, total, fields, None)
        if isinstance(total, int)
        else " ".join((f"step {done}", *fields))
    )
