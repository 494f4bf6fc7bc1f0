"""Split a document directory into `train/` and `heldout/` by document id.

A document is held out when its id (a uniform hash of its text) maps below
`heldout_fraction`, so the split is deterministic, needs no RNG state, and a
document can never be in both halves, even across reruns or shards.
`stats.json` holds the documents per split (`train`, `heldout`) and the
shared `total` / `kept` / `dropped` (`tootsie.datakit.stats`): the split
drops nothing.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tootsie.datakit.ids import id_fraction
from tootsie.datakit.parquet_io import parquet_files, write_table_atomic
from tootsie.datakit.stats import StageStats, finish_stage

SPLITS = ("train", "heldout")


@dataclass(frozen=True)
class SplitConfig:
    """Which documents to split and how many to hold out."""

    input: str
    """A document directory (Parquet files with `id` and `text`)."""
    heldout_fraction: float = 0.05
    """Expected fraction of documents that go to `heldout/`."""

    def __post_init__(self) -> None:
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}")


def split_documents(config: SplitConfig, output_path: str) -> dict[str, Any]:
    """Write each input shard's rows to `train/` or `heldout/`; return document counts by split and the shared stats."""
    out = Path(output_path)
    counts = dict.fromkeys(SPLITS, 0)
    for path in parquet_files(config.input):
        table = pq.read_table(path)
        heldout = pa.array([id_fraction(doc_id) < config.heldout_fraction for doc_id in table.column("id").to_pylist()])
        for split, mask in (("train", pc.invert(heldout)), ("heldout", heldout)):
            part = table.filter(mask)
            write_table_atomic(part, out / split / path.name)
            counts[split] += part.num_rows
    total = sum(counts.values())
    return finish_stage(out, StageStats(total=total, kept=total), counts)
