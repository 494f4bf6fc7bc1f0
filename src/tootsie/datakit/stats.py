"""Counts of what a stage kept and dropped, by reason, mergeable across shards.

Every datakit stage reports how many records came in, how many went out, and
why each dropped record was dropped (datatrove's habit: a filter that does not
count what it drops cannot be audited).
"""

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class StageStats:
    """Mutable counters of one stage run (or one shard of it)."""

    input_docs: int = 0
    output_docs: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    def reject(self, reason: str) -> None:
        """Count one record dropped for `reason`."""
        self.rejected[reason] += 1

    def reject_input(self, reason: str) -> None:
        """Count one unreadable input record (it never became a document) as dropped for `reason`."""
        self.input_docs += 1
        self.rejected[reason] += 1

    def merge(self, other: "StageStats") -> None:
        """Add another shard's counts to these."""
        self.input_docs += other.input_docs
        self.output_docs += other.output_docs
        self.rejected.update(other.rejected)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict with reasons sorted by name."""
        return {"input_docs": self.input_docs, "output_docs": self.output_docs, "rejected": dict(sorted(self.rejected.items()))}
