"""Rollout shards: a bit-exact round trip with provenance, and refusal of partial, renamed or foreign files."""

import dataclasses
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tootsie.errors import TootsieError
from tootsie.rl.environments import RewardConfig
from tootsie.rl.rollout import RolloutConfig, Rollouts, completion_mask
from tootsie.rl.rollout_store import RolloutProvenance, list_shards, read_rollouts, shard_path, write_rollouts


def _batch(rows: int = 6, group_size: int = 3) -> Rollouts:
    rng = np.random.default_rng(0)
    prompt_lengths = rng.integers(2, 6, size=rows).astype(np.int32)
    completion_lengths = rng.integers(1, 9, size=rows).astype(np.int32)
    width = 16
    mask = completion_mask(prompt_lengths, completion_lengths, width)
    tokens = np.where(np.arange(width)[None, :] < (prompt_lengths + completion_lengths)[:, None], 7, 0)
    tokens = (tokens * rng.integers(1, 9, size=(rows, width))).astype(np.int32)
    logp = np.where(mask, -rng.random((rows, width)), 0).astype(np.float32)
    truncated = rng.random(rows) < 0.3
    reasons = tuple("truncated" if t else ("right" if i % 2 else "wrong") for i, t in enumerate(truncated))
    return Rollouts(
        task_ids=tuple(f"t{i // group_size}" for i in range(rows)),
        tokens=tokens,
        prompt_lengths=prompt_lengths,
        completion_lengths=completion_lengths,
        policy_logprobs=logp,
        reference_logprobs=np.where(mask, logp - 0.1, 0).astype(np.float32),
        entropy=np.where(mask, 2 * rng.random((rows, width)), 0).astype(np.float32),
        completions=tuple(f"text {i} ✓" for i in range(rows)),
        stop_reasons=tuple("max_new_tokens" if t else "eos" for t in truncated),
        rewards=np.asarray([0.0 if r != "right" else 1.0 for r in reasons], np.float32),
        reward_mask=~truncated,
        reasons=reasons,
        parsed=tuple("" if t else str(i) for i, t in enumerate(truncated)),
        group_size=group_size,
        scored=np.arange(rows) % 3 != 2,
    )


def _provenance(batch: Rollouts, iteration: int = 12, seed: int = 0) -> RolloutProvenance:
    config = RolloutConfig(group_size=batch.group_size, temperature=0.7, top_p=0.9, stop_tokens=(2,))
    return RolloutProvenance(iteration, seed, 40, "math", config, RewardConfig(), len(batch.task_ids))


def test_round_trip_is_bit_exact_with_provenance(tmp_path: Path) -> None:
    batch = _batch()
    provenance = _provenance(batch)
    path = write_rollouts(tmp_path / "rollouts", batch, provenance)
    assert path == tmp_path / "rollouts" / "iter_000012_seed_0.parquet" == shard_path(tmp_path / "rollouts", 12, 0)
    back, read_provenance = read_rollouts(path)
    assert read_provenance == provenance
    for field in dataclasses.fields(Rollouts):
        ours, theirs = getattr(batch, field.name), getattr(back, field.name)
        if isinstance(ours, np.ndarray):
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), field.name
        else:
            assert ours == theirs, field.name
    table = pq.read_table(path)
    assert table["reward"].null_count == int((~batch.reward_mask).sum()) > 0
    assert table["group"].to_pylist() == [0, 0, 0, 1, 1, 1] and table["sample"].to_pylist() == [0, 1, 2] * 2
    # a shard written before the `scored` column had every row scored
    pq.write_table(table.drop_columns(["scored"]), path)
    assert read_rollouts(path)[0].scored.all()


def test_partial_and_foreign_shards_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "rollouts"
    batch = _batch()
    path = write_rollouts(root, batch, _provenance(batch))
    write_rollouts(root, batch, _provenance(batch, iteration=3, seed=1))
    # A write killed before its rename leaves only a hidden temporary file: never listed as a shard.
    (root / ".iter_000013_seed_0.parquet.tmp-999").write_bytes(path.read_bytes()[:100])
    assert [(i, s) for i, s, _ in list_shards(root)] == [(3, 1), (12, 0)]
    # A shard cut short at its final name (a copy that stopped) fails the Parquet read.
    cut = shard_path(root, 14, 0)
    cut.write_bytes(path.read_bytes()[: os.path.getsize(path) // 2])
    with pytest.raises(TootsieError, match="not a readable Parquet file.*redo that iteration"):
        read_rollouts(cut)
    renamed = shard_path(root, 15, 0)
    renamed.write_bytes(path.read_bytes())
    with pytest.raises(TootsieError, match="iteration 12, seed 0, which its name does not"):
        read_rollouts(renamed)
    foreign = shard_path(root, 16, 0)
    pq.write_table(pa.table({"x": [1]}), foreign)
    with pytest.raises(TootsieError, match="has no provenance"):
        read_rollouts(foreign)
    with pytest.raises(TootsieError, match="does not exist"):
        read_rollouts(shard_path(root, 99, 0))
    with pytest.raises(ValueError, match="provenance says rows=5"):
        write_rollouts(root, batch, dataclasses.replace(_provenance(batch), rows=5))


def test_rewards_must_match_the_reward_config(tmp_path: Path) -> None:
    batch = _batch()
    # The shard claims truncated completions were worth -1, yet its truncated rewards are null.
    provenance = dataclasses.replace(_provenance(batch), rewards=RewardConfig(truncated=-1.0))
    path = write_rollouts(tmp_path, batch, provenance)
    with pytest.raises(TootsieError, match="null rewards"):
        read_rollouts(path)
