"""Rollouts: G sampled completions per prompt, scored, with per-token log-probs under the policy and a reference.

`rollout(policy, reference, tasks, environment, codec, config, rewards,
iteration=i)` repeats each task's prompt G times (`group_size`, rows of one
group are consecutive), samples completions with the KV-cache generator
(`models.generate`) in chunks of at most `batch_rows` rows, scores each with
the environment (`environments.score`: a completion stopped by its budget
is `truncated`), and then recomputes, with one plain forward pass per chunk,
the log-prob of every completion token under the policy and under the frozen
reference, and the policy's entropy there. Its two halves are
`sample_rollouts` (sampling and rewards) and `score_rollouts` (log-probs of
chosen rows): the RL buffer scores only the rows an update will train.

Which log-probs: the policy's own, at temperature 1 and without top-k/top-p.
Under temperature or nucleus sampling the sampler's probabilities are not the
policy's, so they are never recorded; the ratio of a later update is
`π_θ / π_rollout` with both computed this way, and the reference's are the
KL's other side. Sampling with temperature ≠ 1 is thus slightly off-policy,
as in every GRPO/RLOO implementation that samples that way.

Determinism: chunk c of iteration i samples with the seed
`SeedSequence([seed, i, c])`, so the same (iteration, seed, tasks, config)
gives bit-identical tokens and log-probs on a rerun (a resumed run redoes an
unfinished iteration exactly), and another seed or iteration other samples.

Arrays (`Rollouts`) are right-padded to T = the longest prompt + completion,
aligned as `train.policy_loss` expects: `policy_logprobs[i, t]` is
`log π(tokens[i, t] | tokens[i, :t])`, nonzero only where `completion_mask` is on.

Example: 2 tasks, `group_size=4`, `max_new_tokens=64` sample 8 completions in
one generate call of batch 8; `stats.truncated_fraction` 0.25 says 2 of them
hit 64 tokens, and with the default `RewardConfig` their rewards are excluded
(`reward_mask` off).
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from tootsie.models.generate import SamplingConfig, bucket, generate
from tootsie.models.kv_cache import DecoderModel
from tootsie.rl.environments import REASONS, Environment, RewardConfig, Task, score
from tootsie.train.policy_loss import token_logprobs

TRUNCATION_WARNING_FRACTION = 0.5
"""Above this share of truncated completions, `RolloutStats.truncation_warning` says so."""


class Codec(Protocol):
    """Text to token ids and back (a tokenizer; the prompt's ids include BOS)."""

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, as the policy reads a prompt."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of generated ids (special tokens dropped)."""
        ...


@dataclass(frozen=True)
class RolloutConfig:
    """How completions are sampled."""

    group_size: int = 4
    """G: completions per prompt (the group the advantages are normalized over)."""
    max_new_tokens: int = 64
    """Token budget per completion; a completion that reaches it without stopping is truncated."""
    temperature: float = 1.0
    """Sampling temperature (0 is greedy)."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1 keeps every token)."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 keeps all)."""
    seed: int = 0
    """Run seed; chunk c of iteration i samples with SeedSequence([seed, i, c])."""
    batch_rows: int = 64
    """Most completions per generate call and per log-prob forward pass."""
    stop_tokens: tuple[int, ...] = ()
    """Token ids that end a completion (EOS); kept as the completion's last token."""
    stop_strings: tuple[str, ...] = ()
    """Texts that end a completion once they appear in it."""

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ValueError(f"group_size={self.group_size} must be >= 1 (RLOO needs >= 2)")
        if self.batch_rows < 1:
            raise ValueError(f"batch_rows={self.batch_rows} must be >= 1")
        self.sampling(0, 0)  # validates max_new_tokens, temperature, top_p, top_k

    def sampling(self, iteration: int, chunk: int) -> SamplingConfig:
        """The generator's settings for chunk `chunk` of iteration `iteration`."""
        return SamplingConfig(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=sampling_seed(self.seed, iteration, chunk),
            stop_tokens=self.stop_tokens,
            stop_strings=self.stop_strings,
        )


def sampling_seed(seed: int, iteration: int, chunk: int) -> int:
    """The generator seed of one chunk: NumPy's SeedSequence over (seed, iteration, chunk), 32 bits."""
    return int(np.random.SeedSequence([seed, iteration, chunk]).generate_state(1)[0])


def completion_mask(prompt_lengths: np.ndarray, completion_lengths: np.ndarray, width: int) -> np.ndarray:
    """`[n, width]` bool: positions prompt_length .. prompt_length + completion_length − 1 of each row."""
    positions = np.arange(width)[None, :]
    return (positions >= prompt_lengths[:, None]) & (positions < (prompt_lengths + completion_lengths)[:, None])


@dataclass(frozen=True)
class Rollouts:
    """One iteration's completions: row i is sample i % G of task i // G, arrays right-padded to T."""

    task_ids: tuple[str, ...]
    """Task of each row."""
    tokens: Int[np.ndarray, "n t"]
    """Prompt then completion ids (padding 0)."""
    prompt_lengths: Int[np.ndarray, " n"]
    """Prompt tokens per row."""
    completion_lengths: Int[np.ndarray, " n"]
    """Generated tokens per row (a final stop token included)."""
    policy_logprobs: Float[np.ndarray, "n t"]
    """log π_policy(token t | tokens < t) at the rollout's weights, 0 off the completion."""
    reference_logprobs: Float[np.ndarray, "n t"]
    """The same under the frozen reference."""
    entropy: Float[np.ndarray, "n t"]
    """The policy's next-token entropy (nats) at each completion token, 0 elsewhere."""
    completions: tuple[str, ...]
    """Decoded completion text."""
    stop_reasons: tuple[str, ...]
    """The generator's stop reason (`eos`, `stop_string`, `max_new_tokens`)."""
    rewards: Float[np.ndarray, " n"]
    """Reward per row (0 where excluded)."""
    reward_mask: np.ndarray
    """Whether each row's reward counts (False: its reward is None, e.g. truncated)."""
    reasons: tuple[str, ...]
    """Why each reward was given (`environments.REASONS`)."""
    parsed: tuple[str, ...]
    """What the checker read from each completion."""
    group_size: int
    """G."""
    scored: np.ndarray
    """`[n]` bool: rows whose log-probs and entropy were computed (`score_rollouts`; zeros elsewhere)."""

    @property
    def completion_mask(self) -> np.ndarray:
        """`[n, t]` bool: the completion tokens, where log-probs and the loss live."""
        return completion_mask(self.prompt_lengths, self.completion_lengths, self.tokens.shape[1])

    @property
    def truncated(self) -> np.ndarray:
        """`[n]` bool: completions that reached the token budget without stopping."""
        return np.asarray([reason == "max_new_tokens" for reason in self.stop_reasons])


@dataclass(frozen=True)
class RolloutStats:
    """What one rollout logs."""

    completions: int
    """Completions sampled."""
    generated_tokens: int
    """Completion tokens in all."""
    generate_s: float
    """Wall seconds in the generator."""
    logprob_s: float
    """Wall seconds recomputing policy and reference log-probs."""
    truncated_fraction: float
    """Share of completions cut off at max_new_tokens."""
    mean_length: float
    """Mean completion length in tokens."""
    mean_entropy: float
    """The policy's mean next-token entropy over the scored completions' tokens (nats)."""
    reward_mean: float
    """Mean reward over the rows whose reward counts (NaN when none does)."""
    reward_std: float
    """Standard deviation of those rewards (NaN when none counts)."""
    counted_fraction: float
    """Share of completions whose reward counts (the rest are excluded from the update)."""
    reason_counts: tuple[tuple[str, int], ...]
    """(reason, completions) for every reason in REASONS."""

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of generation."""
        return self.generated_tokens / max(self.generate_s, 1e-9)

    def metrics(self) -> dict[str, float]:
        """The `rl/...` figures for metrics.jsonl; the reward's mean and std only when some reward counts."""
        rewards = {"rl/reward_mean": self.reward_mean, "rl/reward_std": self.reward_std}
        return (
            {
                "rl/tokens_per_s": self.tokens_per_s,
                "rl/truncated_fraction": self.truncated_fraction,
                "rl/counted_fraction": self.counted_fraction,
                "rl/mean_length": self.mean_length,
                "rl/entropy": self.mean_entropy,
            }
            | ({} if self.counted_fraction == 0 else rewards)
            | {f"rl/reason_{reason}": float(count) for reason, count in self.reason_counts}
        )

    def truncation_warning(self) -> str | None:
        """A sentence for the log when most completions were truncated, else None."""
        if self.truncated_fraction <= TRUNCATION_WARNING_FRACTION:
            return None
        return (
            f"{self.truncated_fraction:.0%} of {self.completions} completions hit max_new_tokens and were scored "
            "'truncated', not checked; raise max_new_tokens or train the model to stop (EOS)"
        )


@eqx.filter_jit
def _scores(
    policy: DecoderModel, reference: DecoderModel, tokens: Int[Array, "b t"]
) -> tuple[Float[Array, "b t"], Float[Array, "b t"], Float[Array, "b t"]]:
    logp, entropy = token_logprobs(policy(tokens), tokens)
    reference_logp, _ = token_logprobs(reference(tokens), tokens)
    return logp, reference_logp, entropy


def _chunks(count: int, size: int) -> list[range]:
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def sample_rollouts(
    policy: DecoderModel,
    tasks: Sequence[Task],
    environment: Environment,
    codec: Codec,
    config: RolloutConfig,
    rewards: RewardConfig,
    *,
    iteration: int,
) -> tuple[Rollouts, float]:
    """Sample `config.group_size` completions of every task and score them; no log-probs yet (`scored` all off).

    Also the seconds spent in the generator.
    """
    prompts = [codec.encode(task.prompt) for task in tasks for _ in range(config.group_size)]
    row_tasks = [task for task in tasks for _ in range(config.group_size)]
    started = time.perf_counter()
    generations = [
        generation
        for index, rows in enumerate(_chunks(len(prompts), config.batch_rows))
        for generation in generate(policy, [prompts[r] for r in rows], config.sampling(iteration, index), codec.decode)
    ]
    generate_s = time.perf_counter() - started
    texts = [codec.decode(list(g.tokens)) for g in generations]
    scored = [
        score(environment, task, text, truncated=g.stop_reason == "max_new_tokens", rewards=rewards)
        for task, text, g in zip(row_tasks, texts, generations)
    ]
    prompt_lengths = np.asarray([len(p) for p in prompts], np.int32)
    completion_lengths = np.asarray([len(g.tokens) for g in generations], np.int32)
    width = bucket(int((prompt_lengths + completion_lengths).max()))
    tokens = np.zeros((len(prompts), width), np.int32)
    for row, (prompt, generation) in enumerate(zip(prompts, generations)):
        tokens[row, : len(prompt) + len(generation.tokens)] = [*prompt, *generation.tokens]
    batch = Rollouts(
        task_ids=tuple(task.id for task in row_tasks),
        tokens=tokens,
        prompt_lengths=prompt_lengths,
        completion_lengths=completion_lengths,
        policy_logprobs=np.zeros(tokens.shape, np.float32),
        reference_logprobs=np.zeros(tokens.shape, np.float32),
        entropy=np.zeros(tokens.shape, np.float32),
        completions=tuple(texts),
        stop_reasons=tuple(g.stop_reason for g in generations),
        rewards=np.asarray([0.0 if r.value is None else r.value for r in scored], np.float32),
        reward_mask=np.asarray([r.value is not None for r in scored]),
        reasons=tuple(r.reason for r in scored),
        parsed=tuple(r.parsed for r in scored),
        group_size=config.group_size,
        scored=np.zeros(len(prompts), bool),
    )
    return batch, generate_s


def score_rollouts(
    policy: DecoderModel, reference: DecoderModel, batch: Rollouts, rows: np.ndarray, batch_rows: int
) -> tuple[Rollouts, float]:
    """`batch` with the log-probs (policy, reference) and entropy of `rows` computed, `batch_rows` rows per forward
    pass, and `scored` on there; also the seconds it took. Rows an update will not train need none."""
    mask = batch.completion_mask
    logp, reference_logp, entropy = (
        array.copy() for array in (batch.policy_logprobs, batch.reference_logprobs, batch.entropy)
    )
    started = time.perf_counter()
    for chunk in _chunks(len(rows), batch_rows):
        picked = rows[chunk.start : chunk.stop]
        padded = np.zeros((bucket(len(picked), minimum=1), batch.tokens.shape[1]), np.int32)
        padded[: len(picked)] = batch.tokens[picked]
        outputs = _scores(policy, reference, jnp.asarray(padded))
        for target, output in zip((logp, reference_logp, entropy), outputs):
            target[picked] = np.where(mask[picked], np.asarray(output)[: len(picked)], 0)
    scored = batch.scored.copy()
    scored[rows] = True
    updated = replace(batch, policy_logprobs=logp, reference_logprobs=reference_logp, entropy=entropy, scored=scored)
    return updated, time.perf_counter() - started


def rollout(
    policy: DecoderModel,
    reference: DecoderModel,
    tasks: Sequence[Task],
    environment: Environment,
    codec: Codec,
    config: RolloutConfig,
    rewards: RewardConfig,
    *,
    iteration: int,
) -> tuple[Rollouts, RolloutStats]:
    """Sample `config.group_size` completions of every task, score them, and recompute all their log-probs."""
    batch, generate_s = sample_rollouts(policy, tasks, environment, codec, config, rewards, iteration=iteration)
    rows = np.arange(len(batch.task_ids))
    batch, logprob_s = score_rollouts(policy, reference, batch, rows, config.batch_rows)
    return batch, rollout_stats(batch, generate_s, logprob_s)


def rollout_stats(batch: Rollouts, generate_s: float, logprob_s: float) -> RolloutStats:
    """The figures one rollout logs, from its completions and the two timings."""
    entropic = batch.completion_mask & batch.scored[:, None]
    counted = batch.rewards[batch.reward_mask]
    return RolloutStats(
        completions=len(batch.task_ids),
        generated_tokens=int(batch.completion_lengths.sum()),
        generate_s=generate_s,
        logprob_s=logprob_s,
        truncated_fraction=float(batch.truncated.mean()),
        mean_length=float(batch.completion_lengths.mean()),
        mean_entropy=float(batch.entropy[entropic].mean()) if entropic.any() else 0.0,
        reward_mean=float(counted.mean()) if counted.size else float("nan"),
        reward_std=float(counted.std()) if counted.size else float("nan"),
        counted_fraction=float(batch.reward_mask.mean()),
        reason_counts=tuple((reason, batch.reasons.count(reason)) for reason in REASONS),
    )
