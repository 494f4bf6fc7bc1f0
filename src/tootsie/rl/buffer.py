"""The rollout buffer: an RL run's data source, filled by sampling from the policy the run is training.

An RL batch is not a function of (config, step) alone: it depends on the
policy at the step. `RolloutBuffer` is both the run's `DataSource` and one of
its callbacks. When the loop asks for the rows of step s, the buffer serves
iteration i = s // updates_per_iteration:

1. if the iteration's shard (`rollouts/iter_NNNNNN_seed_S.parquet`) exists,
   it is read back (and refused if its provenance disagrees: another policy
   step or seed);
2. else the policy as it is now (`run.state.model`, at step i × updates) samples
   G completions of the iteration's P prompts (the environment's train tasks
   from `first_task` + i × P), the environment scores them, the policy and the
   frozen reference score the tokens of the rows it will train (`rl.rollout`;
   all of them unless `rl.prompts` samples more), and the shard is
   written under a temporary name and renamed, then read back, so a fresh and
   a resumed run train on the same bits;
3. the objective turns each group's rewards into advantages, and the rows
   carry tokens, the loss mask (completion tokens of counted completions), the
   rollout and reference log-probs and the advantages, padded to `seq_len`.
   With `rl.prompts` above the groups an iteration trains, the groups whose
   advantages are not all 0 come first (`trained_groups`), and
   `rl/informative_groups` logs their share of the sampled ones;
4. step s trains minibatch (s mod updates) mod M of them, `train.data.batch_size`
   rows from row ((s mod updates) mod M) × batch_size on (M = `rl.minibatches`;
   the advantages are computed over the whole iteration, by group, first).

Resume: sampling is seeded by (seed, iteration, chunk) and the policy at
step i × updates is restored bit for bit, so a run killed mid-rollout
resamples the same completions, and one killed mid-update reuses the shard.

The iteration's rollout figures (`RolloutStats.metrics`: `rl/reward_mean`,
`rl/truncated_fraction`, `rl/entropy`, ...; `rl/tokens_per_s` only when it
sampled) and `rl/advantage_std` join the record of its first update, and a
run where most completions truncate says so in its log. After each update
the record's `rl/kl` is checked against the stated `kl_bound`
(`rl/kl_over_bound` is 1 for an update above it, with a warning in the log).
"""

import logging
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tootsie.configfile import kind_of
from tootsie.errors import TootsieError
from tootsie.rl.codec import TokenizerCodec
from tootsie.rl.config import RLConfig
from tootsie.rl.rollout import Rollouts, rollout_stats, sample_rollouts, score_rollouts
from tootsie.rl.rollout_store import RolloutProvenance, read_rollouts, shard_path, write_rollouts
from tootsie.train.callbacks import Callback, Record, Run
from tootsie.train.faults import rl_fault
from tootsie.train.loading import load_model, model_config_of, resolve_checkpoint

logger = logging.getLogger(__name__)
ROLLOUTS = "rollouts"
"""The run's subdirectory of rollout shards."""


@dataclass(frozen=True)
class RolloutRows:
    """One iteration's rollouts as training rows, `[rows, seq_len]` each (`data.source.Rows` plus the RL fields)."""

    tokens: np.ndarray
    segment_ids: np.ndarray
    loss_mask: np.ndarray
    rollout_logprobs: np.ndarray
    reference_logprobs: np.ndarray
    advantages: np.ndarray

    def rows(self, start: int, stop: int) -> "RolloutRows":
        """Rows `start` .. `stop − 1`."""
        return RolloutRows(*(getattr(self, name)[start:stop] for name in self.__dataclass_fields__))


def informative_groups(advantages: np.ndarray, group_size: int) -> np.ndarray:
    """`[groups]` bool: groups with a nonzero advantage (the others carry no policy gradient)."""
    return np.abs(advantages.reshape(-1, group_size)).max(axis=1) > 0


def trained_groups(advantages: np.ndarray, group_size: int, count: int) -> np.ndarray:
    """Indices of the `count` groups an iteration trains: those with a nonzero advantage first, then the others,
    each in sampling order, returned sorted (with exactly `count` groups sampled: all of them)."""
    informative = informative_groups(advantages, group_size)
    order = np.concatenate([np.flatnonzero(informative), np.flatnonzero(~informative)])
    return np.sort(order[:count])


def training_rows(batch: Rollouts, advantages: np.ndarray, seq_len: int, keep: np.ndarray) -> RolloutRows:
    """Rows `keep` of `batch` as rows of `seq_len` tokens: the loss on the completion tokens of completions whose
    reward counts."""
    width = batch.tokens.shape[1]
    longest = int((batch.prompt_lengths + batch.completion_lengths).max())
    if longest > seq_len:
        raise TootsieError(
            f"a rollout row holds {longest} tokens (prompt + completion) but train.data.seq_len is {seq_len}; "
            "raise seq_len to at least the longest prompt + rl.rollout.max_new_tokens"
        )

    def fit(array: np.ndarray, dtype: type) -> np.ndarray:
        out = np.zeros((len(keep), seq_len), dtype)
        columns = min(width, seq_len)
        out[:, :columns] = array[keep, :columns]
        return out

    mask = batch.completion_mask & batch.reward_mask[:, None]
    return RolloutRows(
        tokens=fit(batch.tokens, np.int32),
        segment_ids=np.zeros((len(keep), seq_len), np.int32),
        loss_mask=fit(mask, np.float32),
        rollout_logprobs=fit(batch.policy_logprobs, np.float32),
        reference_logprobs=fit(batch.reference_logprobs, np.float32),
        advantages=np.repeat(advantages[keep].astype(np.float32)[:, None], seq_len, axis=1),
    )


class RolloutBuffer(Callback):
    """The RL run's data source (one iteration's rollouts per `updates_per_iteration` steps) and its callback."""

    order = 25  # after the record's own fields, before the trackers write it

    def __init__(self, config: RLConfig, output: Path) -> None:
        self.config, self.directory = config, Path(output) / ROLLOUTS
        self.codec = TokenizerCodec.load(config.rl.tokenizer)
        rollout_config = config.rl.rollout
        self.sampling = replace(rollout_config, stop_tokens=(*rollout_config.stop_tokens, self.codec.eos_id))
        self.environment = config.rl.environment
        self.checker = self.environment.checker()
        reference = resolve_checkpoint(config.reference)
        self.reference = load_model(model_config_of(reference), reference)
        self.run: Run | None = None
        self.served: tuple[int, RolloutRows] | None = None
        self.pending: Record = {}

    def start(self, run: Run) -> None:
        """Keep the run: its current policy samples each new iteration."""
        self.run = run

    def batch_shape(self, step: int) -> tuple[int, int]:
        """(prompts × G, seq_len), fixed by `train.data`."""
        data = self.config.train.data
        return data.batch_size, data.seq_len

    def batch(self, step: int, worker: int = 0, num_workers: int = 1) -> RolloutRows:
        """Worker `worker`'s contiguous share of step `step`'s minibatch of its iteration's rows."""
        updates = self.config.rl.updates_per_iteration
        rows = self.iteration_rows(step // updates)
        size = self.config.train.data.batch_size
        start = (step % updates % self.config.rl.minibatches) * size
        share = size // num_workers
        return rows.rows(start + worker * share, start + (worker + 1) * share)

    def iteration_rows(self, iteration: int) -> RolloutRows:
        """The rows of `iteration`, from its shard (sampled now if missing)."""
        if self.served is not None and self.served[0] == iteration:
            return self.served[1]
        policy_step = iteration * self.config.rl.updates_per_iteration
        path = shard_path(self.directory, iteration, self.sampling.seed)
        sampled: Record = {}
        if not path.is_file():
            sampled = self.sample(iteration, policy_step)
        batch, provenance = read_rollouts(path)
        if provenance.policy_step != policy_step or provenance.rollout != self.sampling:
            raise TootsieError(
                f"{path} was sampled by the policy at step {provenance.policy_step} with {provenance.rollout}, "
                f"but this run's iteration {iteration} samples at step {policy_step} with {self.sampling}; "
                "delete the rollouts directory's later shards (or use a new --out) and rerun"
            )
        group = self.sampling.group_size
        advantages = self.advantages(batch)
        stats = rollout_stats(batch, generate_s=0.0, logprob_s=0.0)
        counted = advantages[batch.reward_mask]
        informative = informative_groups(advantages, group)
        self.pending = (
            {"rl/iteration": float(iteration)}
            | {k: v for k, v in stats.metrics().items() if k != "rl/tokens_per_s"}
            | {"rl/advantage_std": float(counted.std()) if counted.size else 0.0}
            | {"rl/informative_groups": float(informative.mean())}
            | sampled
        )
        warning = stats.truncation_warning()
        if warning is not None:
            logger.warning("iteration %d: %s", iteration, warning)
        rows = training_rows(batch, advantages, self.config.train.data.seq_len, self.trained_rows(advantages))
        self.served = (iteration, rows)
        rl_fault("mid-update", iteration)
        return rows

    def advantages(self, batch: Rollouts) -> np.ndarray:
        """`[rows]` advantages of `batch`, by group, from the objective."""
        group = self.sampling.group_size
        rewards, mask = batch.rewards.reshape(-1, group), batch.reward_mask.reshape(-1, group)
        return self.config.train.objective.advantages(rewards, mask).reshape(-1)

    def trained_rows(self, advantages: np.ndarray) -> np.ndarray:
        """The rows an iteration with these `[rows]` advantages trains: those of its `trained_groups`, in order."""
        group = self.sampling.group_size
        groups = trained_groups(advantages, group, self.config.groups_per_iteration)
        return (groups[:, None] * group + np.arange(group)[None, :]).reshape(-1)

    def sample(self, iteration: int, policy_step: int) -> Record:
        """Sample, score and store `iteration`'s rollouts with the current policy; its timing figures."""
        if self.run is None or self.run.state.step != policy_step:
            at = None if self.run is None else self.run.state.step
            raise TootsieError(f"iteration {iteration} must be sampled by the policy at step {policy_step}, not {at}")
        count = self.config.prompts_per_iteration
        tasks = self.environment.tasks("train", self.config.rl.first_task + iteration * count, count)
        policy = self.run.state.model
        batch, generate_s = sample_rollouts(
            policy, tasks, self.checker, self.codec, self.sampling, self.config.rl.rewards, iteration=iteration
        )
        batch, logprob_s = score_rollouts(
            policy, self.reference, batch, self.trained_rows(self.advantages(batch)), self.sampling.batch_rows
        )
        stats = rollout_stats(batch, generate_s, logprob_s)
        rl_fault("mid-rollout", iteration)
        provenance = RolloutProvenance(
            iteration=iteration,
            seed=self.sampling.seed,
            policy_step=policy_step,
            environment=kind_of(self.environment),
            rollout=self.sampling,
            rewards=self.config.rl.rewards,
            rows=len(batch.task_ids),
        )
        write_rollouts(self.directory, batch, provenance)
        return {"rl/tokens_per_s": stats.tokens_per_s, "rl/rollout_seconds": stats.generate_s + stats.logprob_s}

    def after_step(self, run: Run, step: int, record: Record) -> None:
        """Add the iteration's rollout figures to its first update's record; check `rl/kl` against the bound."""
        record.update(self.pending)
        self.pending = {}
        bound = self.config.rl.kl_bound
        if bound is not None and "rl/kl" in record:
            kl = float(record["rl/kl"])  # type: ignore[arg-type]
            record |= {"rl/kl_bound": bound, "rl/kl_over_bound": float(kl > bound)}
            if kl > bound:
                logger.warning("step %d: rl/kl = %.4g exceeds the stated bound %.4g (rl.kl_bound)", step, kl, bound)
