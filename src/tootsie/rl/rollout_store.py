"""Rollout shards: one Parquet file per (iteration, seed), with its provenance, written atomically, read with checks.

Layout: `<run>/rollouts/iter_000012_seed_0.parquet` (`shard_path`). One row
per completion, in rollout order (row i is sample i % G of the i // G-th task):
`task_id`, `group`, `sample`, `prompt_tokens` and `completion_tokens`
(int32 lists), `policy_logprobs`, `reference_logprobs` and `entropy` (float32
lists, one value per completion token), `completion`, `stop_reason`,
`reward` (float32, null when excluded from the update), `reason`, `parsed`,
`scored` (bool: whether the row's log-probs and entropy were computed; zeros
where not; a shard without the column had every row scored).
The provenance (`RolloutProvenance`: iteration, seed, the policy's step, the
environment's name, the rollout and reward configs, the row count) is JSON in
the file's schema metadata under `tootsie.rollout`, so a shard carries it.

The file is written under a hidden temporary name and renamed into place
(`datakit.parquet_io.write_table_atomic`), so a shard at its final name is
whole; a run killed mid-write leaves only a `.iter_...tmp-PID` file, which
`list_shards` ignores and the next write of that shard replaces. `read_rollouts`
still checks everything it can: the Parquet footer, the format tag, that
iteration and seed match the name, the row count, the lengths of each row's
lists, the reasons, and that a reward is null exactly where the reward config
excludes its reason. Any failure is a `TootsieError` naming the file and
saying to delete it and redo the iteration. No pickle.

Example: `write_rollouts(run / "rollouts", batch, provenance)` with iteration
12, seed 0 writes `run/rollouts/iter_000012_seed_0.parquet`; `read_rollouts` of
it gives back the same arrays, bit for bit, and the provenance.
"""

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.errors import TootsieError
from tootsie.models.generate import STOP_REASONS, bucket
from tootsie.rl.environments import REASONS, RewardConfig
from tootsie.rl.rollout import RolloutConfig, Rollouts, completion_mask

FORMAT = "tootsie.rollouts.v1"
"""Format tag in every shard's provenance."""
METADATA_KEY = b"tootsie.rollout"
"""Schema-metadata key holding the provenance JSON."""
SHARD_NAME = re.compile(r"iter_(\d{6,})_seed_(\d+)\.parquet")
"""A finished shard's file name."""


@dataclass(frozen=True)
class RolloutProvenance:
    """Where a shard's completions came from."""

    iteration: int
    """RL iteration that sampled them."""
    seed: int
    """Run seed (with the iteration, it fixes every sample)."""
    policy_step: int
    """Training step of the policy weights that sampled them."""
    environment: str
    """Name of the environment that scored them."""
    rollout: RolloutConfig
    """Sampling settings (group size, budget, temperature, top-p, top-k, stops)."""
    rewards: RewardConfig
    """What each reason was worth (the truncated reward among them)."""
    rows: int
    """Completions in the shard."""


def shard_path(directory: str | Path, iteration: int, seed: int) -> Path:
    """Where the shard of (iteration, seed) lives under `directory`."""
    return Path(directory) / f"iter_{iteration:06d}_seed_{seed}.parquet"


def list_shards(directory: str | Path) -> list[tuple[int, int, Path]]:
    """(iteration, seed, path) of every finished shard under `directory`, by iteration then seed."""
    root = Path(directory)
    found = [(SHARD_NAME.fullmatch(p.name), p) for p in root.iterdir()] if root.is_dir() else []
    return sorted((int(m.group(1)), int(m.group(2)), p) for m, p in found if m)


def _ragged(array: np.ndarray, starts: np.ndarray, lengths: np.ndarray, dtype: pa.DataType) -> pa.Array:
    return pa.array([array[row, s : s + n] for row, (s, n) in enumerate(zip(starts, lengths))], pa.list_(dtype))


def write_rollouts(directory: str | Path, batch: Rollouts, provenance: RolloutProvenance) -> Path:
    """Write `batch` as the shard of (provenance.iteration, provenance.seed) under `directory`, atomically."""
    rows = len(batch.task_ids)
    if provenance.rows != rows or provenance.rollout.group_size != batch.group_size:
        raise ValueError(
            f"provenance says rows={provenance.rows}, group_size={provenance.rollout.group_size} but the batch has "
            f"{rows} rows in groups of {batch.group_size}; build the provenance from the batch"
        )
    starts, lengths = batch.prompt_lengths, batch.completion_lengths
    index = np.arange(rows, dtype=np.int32)
    table = pa.table(
        {
            "task_id": pa.array(batch.task_ids, pa.string()),
            "group": pa.array(index // batch.group_size, pa.int32()),
            "sample": pa.array(index % batch.group_size, pa.int32()),
            "prompt_tokens": _ragged(batch.tokens, np.zeros_like(starts), starts, pa.int32()),
            "completion_tokens": _ragged(batch.tokens, starts, lengths, pa.int32()),
            "policy_logprobs": _ragged(batch.policy_logprobs, starts, lengths, pa.float32()),
            "reference_logprobs": _ragged(batch.reference_logprobs, starts, lengths, pa.float32()),
            "entropy": _ragged(batch.entropy, starts, lengths, pa.float32()),
            "completion": pa.array(batch.completions, pa.string()),
            "stop_reason": pa.array(batch.stop_reasons, pa.string()),
            "reward": pa.array(batch.rewards, pa.float32(), mask=~batch.reward_mask),
            "reason": pa.array(batch.reasons, pa.string()),
            "parsed": pa.array(batch.parsed, pa.string()),
            "scored": pa.array(batch.scored, pa.bool_()),
        }
    )
    record = {"format": FORMAT} | dataclasses.asdict(provenance)
    path = shard_path(directory, provenance.iteration, provenance.seed)
    write_table_atomic(table.replace_schema_metadata({METADATA_KEY: json.dumps(record, sort_keys=True)}), path)
    return path


def _bad(path: Path, problem: str) -> TootsieError:
    return TootsieError(
        f"rollout shard {path} {problem}; it is not a finished shard: delete it and redo that iteration's rollout"
    )


def _provenance(path: Path, metadata: dict[bytes, bytes] | None) -> RolloutProvenance:
    try:
        record = json.loads((metadata or {})[METADATA_KEY])
    except (KeyError, ValueError):
        raise _bad(path, f"has no provenance ({METADATA_KEY.decode()} schema metadata)") from None
    if record.get("format") != FORMAT:
        raise _bad(path, f"has format {record.get('format')!r}, expected {FORMAT!r}")
    try:
        rollout = {k: tuple(v) if isinstance(v, list) else v for k, v in record["rollout"].items()}
        return RolloutProvenance(
            iteration=int(record["iteration"]),
            seed=int(record["seed"]),
            policy_step=int(record["policy_step"]),
            environment=str(record["environment"]),
            rollout=RolloutConfig(**rollout),
            rewards=RewardConfig(**record["rewards"]),
            rows=int(record["rows"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise _bad(path, f"has malformed provenance ({error!r})") from None


def _check(path: Path, table: pa.Table, provenance: RolloutProvenance) -> None:
    name = SHARD_NAME.fullmatch(path.name)
    if not name or (int(name.group(1)), int(name.group(2))) != (provenance.iteration, provenance.seed):
        raise _bad(path, f"holds iteration {provenance.iteration}, seed {provenance.seed}, which its name does not")
    if table.num_rows != provenance.rows or table.num_rows % provenance.rollout.group_size:
        raise _bad(
            path,
            f"has {table.num_rows} rows; its provenance says {provenance.rows} in groups of "
            f"{provenance.rollout.group_size}",
        )
    lengths = pc.list_value_length(table["completion_tokens"]).to_numpy(zero_copy_only=False)
    for column in ("policy_logprobs", "reference_logprobs", "entropy"):
        if not np.array_equal(pc.list_value_length(table[column]).to_numpy(zero_copy_only=False), lengths):
            raise _bad(path, f"has {column} lists whose lengths differ from completion_tokens'")
    reasons = table["reason"].to_pylist()
    if not set(reasons) <= set(REASONS) or not set(table["stop_reason"].to_pylist()) <= set(STOP_REASONS):
        raise _bad(path, f"has reasons outside {REASONS} or stop reasons outside {STOP_REASONS}")
    excluded = [provenance.rewards.value(reason) is None for reason in reasons]
    if table["reward"].is_null().to_pylist() != excluded:
        raise _bad(path, "has null rewards where its reward config gives one, or values where it excludes them")


def read_rollouts(path: str | Path) -> tuple[Rollouts, RolloutProvenance]:
    """The rollouts and provenance of a finished shard, after checking it (see the module docstring)."""
    shard = Path(path)
    if not shard.is_file():
        raise TootsieError(f"rollout shard {shard} does not exist; run that iteration's rollout first")
    try:
        table = pq.read_table(shard)
    except (pa.ArrowException, OSError) as error:
        raise _bad(shard, f"is not a readable Parquet file ({error})") from None
    provenance = _provenance(shard, table.schema.metadata)
    _check(shard, table, provenance)
    prompts, completions = table["prompt_tokens"].to_pylist(), table["completion_tokens"].to_pylist()
    prompt_lengths = np.asarray([len(p) for p in prompts], np.int32)
    completion_lengths = np.asarray([len(c) for c in completions], np.int32)
    width = bucket(int((prompt_lengths + completion_lengths).max(initial=1)))
    mask = completion_mask(prompt_lengths, completion_lengths, width)
    tokens = np.zeros((table.num_rows, width), np.int32)
    for row, (prompt, completion) in enumerate(zip(prompts, completions)):
        tokens[row, : len(prompt) + len(completion)] = [*prompt, *completion]
    per_token = {}
    for column in ("policy_logprobs", "reference_logprobs", "entropy"):
        values = np.zeros(tokens.shape, np.float32)
        flat = table[column].combine_chunks().flatten().to_numpy(zero_copy_only=False)
        values[mask] = flat  # row-major order of the mask is each row's completion in turn
        per_token[column] = values
    rewards = table["reward"].fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float32)
    batch = Rollouts(
        task_ids=tuple(table["task_id"].to_pylist()),
        tokens=tokens,
        prompt_lengths=prompt_lengths,
        completion_lengths=completion_lengths,
        policy_logprobs=per_token["policy_logprobs"],
        reference_logprobs=per_token["reference_logprobs"],
        entropy=per_token["entropy"],
        completions=tuple(table["completion"].to_pylist()),
        stop_reasons=tuple(table["stop_reason"].to_pylist()),
        rewards=rewards,
        reward_mask=~table["reward"].is_null().to_numpy(zero_copy_only=False),
        reasons=tuple(table["reason"].to_pylist()),
        parsed=tuple(table["parsed"].to_pylist()),
        group_size=provenance.rollout.group_size,
        scored=(
            table["scored"].to_numpy(zero_copy_only=False).astype(bool)
            if "scored" in table.column_names
            else np.ones(table.num_rows, bool)
        ),
    )
    return batch, provenance
