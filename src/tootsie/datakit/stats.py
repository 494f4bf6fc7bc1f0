"""Counts of what a stage kept and dropped, by reason, mergeable across shards, and the stats file they go to.

Every datakit stage reports one shared shape (datatrove's habit, docs/style.md rule 10:
a filter that does not count what it drops cannot be audited): `total`
documents seen, `kept` documents, and `dropped` documents by reason, each
dropped document under exactly one reason, so `total == kept +
sum(dropped.values())`. A stage that only labels documents (quality, dedup,
decontaminate) counts what consolidate would drop on its labels. Shards count
with `keep()` / `drop()`, return `to_json()`, and the reduce sums them
(`merge_counts`) and reads them back with `from_json`.

`finish_stage` writes a stage's `stats.json` (`STATS_FILE`, the one name every
reader uses): the stage's own keys, then the shared ones, atomically, after
every other output, so a present stats file means a finished stage.

Example: 5 records of which one is empty and one repeats another give
`{"total": 5, "kept": 3, "dropped": {"empty": 1, "exact_duplicate": 1}}`.
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tootsie.jsonfile import write_json_atomic

STATS_FILE = "stats.json"
"""The name of a stage's counts inside its output directory; every reader and writer uses this one."""


@dataclass
class StageStats:
    """Mutable counters of one stage run (or one shard of it): documents seen, kept, and dropped by reason."""

    total: int = 0
    """Documents (or unreadable records) the stage saw."""
    kept: int = 0
    """Documents that went (or, for a labelling stage, would go) to the output."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Reason → documents dropped for it; each dropped document counts under one reason."""

    def keep(self) -> None:
        """Count one document kept."""
        self.total += 1
        self.kept += 1

    def drop(self, reason: str) -> None:
        """Count one document (or unreadable record) dropped for `reason`."""
        self.total += 1
        self.dropped[reason] += 1

    def to_json(self) -> dict[str, Any]:
        """The shared keys as a JSON-ready dict, reasons sorted by name."""
        return {"total": self.total, "kept": self.kept, "dropped": dict(sorted(self.dropped.items()))}

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> "StageStats":
        """Counters from a `to_json()` dict, or from shard dicts summed by `merge_counts` (missing keys count 0)."""
        return cls(
            total=int(payload.get("total", 0)),
            kept=int(payload.get("kept", 0)),
            dropped=Counter(payload.get("dropped", {})),
        )


def finish_stage(output_path: str | Path, counts: StageStats, details: Mapping[str, Any]) -> dict[str, Any]:
    """Write `<output_path>/stats.json` atomically, the stage's `details` then the shared counts, and return it.

    Refuses counts that lose documents (`total != kept + dropped`): a stage
    must account for every document it saw.
    """
    lost = counts.total - counts.kept - sum(counts.dropped.values())
    if lost:
        raise ValueError(
            f"stage stats for {output_path} do not add up: total={counts.total}, kept={counts.kept},"
            f" dropped={dict(counts.dropped)} leave {lost} documents unaccounted for;"
            " count every document with keep() or drop()"
        )
    stats = {**details, **counts.to_json()}
    write_json_atomic(Path(output_path) / STATS_FILE, stats)
    return stats
