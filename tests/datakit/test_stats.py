"""The shared stage stats: every document kept or dropped once, shards merge, and the stats file is written whole."""

import json
from collections import Counter

import pytest

from tootsie.datakit.engine import merge_counts
from tootsie.datakit.stats import STATS_FILE, StageStats, finish_stage


def _shard(kept: int, reasons: list[str]) -> dict[str, object]:
    stats = StageStats()
    for _ in range(kept):
        stats.keep()
    for reason in reasons:
        stats.drop(reason)
    return stats.to_json()


def test_shards_merge_into_one_account_of_every_document() -> None:
    parts = [_shard(3, ["empty", "too_large"]), _shard(1, []), _shard(0, ["empty", "empty"])]
    merged = StageStats.from_json(merge_counts(parts))
    assert merged.to_json() == {"total": 8, "kept": 4, "dropped": {"empty": 3, "too_large": 1}}
    assert list(merged.to_json()["dropped"]) == ["empty", "too_large"]  # reasons sorted by name
    assert StageStats.from_json({}).to_json() == {"total": 0, "kept": 0, "dropped": {}}  # no finished shards


def test_finish_stage_writes_the_stage_keys_then_the_shared_ones(tmp_path) -> None:
    stats = finish_stage(
        tmp_path / "out",
        StageStats(total=5, kept=3, dropped=Counter(exact_duplicate=2)),
        {"docs": 5, "kept": 3, "shards": 2},
    )
    assert list(stats) == ["docs", "kept", "shards", "total", "dropped"]
    assert STATS_FILE == "stats.json"  # the on-disk name users and the release's step reader rely on
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == stats
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["stats.json"]  # no temporary file left


def test_finish_stage_refuses_counts_that_lose_documents(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"total=5, kept=3, dropped=\{'empty': 1\} leave 1 documents unaccounted"):
        finish_stage(tmp_path, StageStats(total=5, kept=3, dropped=Counter(empty=1)), {})
    assert not (tmp_path / STATS_FILE).exists()
