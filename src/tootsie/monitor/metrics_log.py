"""The always-on metrics log: one JSON object per line, one line per step.

Writers flush every line, so a crash loses at most the line being written;
readers skip a truncated last line or a malformed line and say how many they
skipped, instead of failing on the evidence of the crash they are meant to
explain.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

METRICS_FILE = "metrics.jsonl"
"""The name of a run's metrics log inside its output directory; every reader and writer uses this one."""
CONFIG_FILE = "config.json"
"""The resolved config of a training run, next to its metrics log (written by the trainer, read by reports)."""


def _json_safe(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


class MetricsLog:
    """Append-only JSONL writer; reopening drops records at or after `resume_step`."""

    def __init__(self, path: str | Path, resume_step: int = 0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = (
            [r for r in read_metrics(self.path).records if int(r.get("step", -1)) < resume_step]
            if self.path.exists()
            else []
        )
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
        tmp.replace(self.path)
        self._file: TextIO = open(self.path, "a", encoding="utf-8")

    def write(self, record: dict[str, object]) -> None:
        """Append one record (non-finite floats become null or "inf") and flush."""
        self._file.write(json.dumps({k: _json_safe(v) for k, v in record.items()}) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


@dataclass(frozen=True)
class MetricsRead:
    """Records read from a metrics file, and how many lines were unreadable."""

    records: list[dict[str, object]]
    skipped_lines: int


def read_metrics(path: str | Path) -> MetricsRead:
    """Read every parseable JSON object line of `path`, counting the lines skipped."""
    records, skipped = [], 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                skipped += 1
    return MetricsRead(records=records, skipped_lines=skipped)
