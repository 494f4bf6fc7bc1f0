"""The runs the dashboard knows: found under its roots, rescanned now and then, each with its metrics index.

The server asks it for the list page's rows and for a run's new records;
runs are looked up by id in what the scan found, never by a path taken from a
request, so a request can only ever reach the files of a run under a root.
"""

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tootsie.errors import TootsieError
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.monitor.signals import REWINDS_FILE, read_rewinds
from tootsie.report.dashboard.metrics_index import MetricsIndex
from tootsie.report.dashboard.runs import RunDirectory, find_runs, run_status, train_config

RESCAN_SECONDS = 5.0
"""The roots are walked again for new runs at most this often (the page polls every 2 s)."""


@dataclass(frozen=True)
class _Tracked:
    run: RunDirectory
    index: MetricsIndex
    num_steps: int | None


class RunRegistry:
    """Runs under labelled roots (label → real directory) and their metrics indexes; safe across threads."""

    def __init__(self, labels: dict[str, Path]) -> None:
        self.labels = labels
        self._lock = threading.Lock()
        self._runs: dict[str, _Tracked] = {}
        self._scanned = -float("inf")

    def _scan(self) -> dict[str, _Tracked]:
        with self._lock:
            if time.monotonic() - self._scanned >= RESCAN_SECONDS:
                runs = {}
                for run in find_runs(self.labels):
                    known = self._runs.get(run.id)
                    if known is not None and known.run.path == run.path and known.num_steps is not None:
                        runs[run.id] = known
                        continue
                    config = train_config(run.path) or {}  # read again while a starting run has not written it
                    steps = config.get("num_steps")
                    index = known.index if known is not None and known.run.path == run.path else None
                    runs[run.id] = _Tracked(
                        run, index or MetricsIndex(run.path / METRICS_FILE), steps if isinstance(steps, int) else None
                    )
                self._runs, self._scanned = runs, time.monotonic()
            return dict(self._runs)

    def rows(self) -> list[dict[str, object]]:
        """One row per run: id, path, status, step, tokens, loss, plus num_steps, revision, records and rewinds."""
        rows = []
        for run_id, tracked in self._scan().items():
            if tracked.run.file(METRICS_FILE) is not None:
                tracked.index.refresh()
            latest = tracked.index.latest
            rewinds = self._rewinds(tracked.run)
            rows.append(
                {
                    "id": run_id,
                    "path": str(tracked.run.path),
                    "status": run_status(tracked.run, latest.step, tracked.num_steps),
                    "step": latest.step,
                    "tokens": latest.tokens,
                    "loss": latest.loss,
                    "num_steps": tracked.num_steps,
                    "revision": tracked.index.revision,
                    "records": tracked.index.records,
                    "rewinds": rewinds,
                }
            )
        return rows

    @staticmethod
    def _rewinds(run: RunDirectory) -> list[dict[str, object]]:
        """The run's rewinds as JSON; none when it has no (readable) rewinds.json under the root."""
        if run.file(REWINDS_FILE) is None:
            return []
        try:
            return [rewind.to_json() for rewind in read_rewinds(run.path)]
        except TootsieError:
            return []

    def metrics(self, run_id: str, since: int) -> tuple[int, bytes] | None:
        """The run's revision and its records after step `since` as a JSON array; None for an unknown run."""
        tracked = self._scan().get(run_id)
        if tracked is None:
            return None
        if tracked.run.file(METRICS_FILE) is None:
            return tracked.index.revision, b"[]"
        return tracked.index.records_since(since)
