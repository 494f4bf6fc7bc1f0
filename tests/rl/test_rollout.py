"""Rollouts on a tiny random model: shapes, seeding, recomputed log-probs, truncation, stats."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.models.generate import sample
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.rl.environments import RewardConfig, Task
from tootsie.rl.math_checker import MathChecker
from tootsie.rl.rollout import RolloutConfig, rollout, sampling_seed
from tootsie.rl.rollout_store import RolloutProvenance, read_rollouts, write_rollouts
from tootsie.train.policy_loss import KLConfig, policy_loss, rloo_advantages, token_logprobs

OFFSET = 3
"""Byte b is token b + 3; 1 is BOS, 2 is EOS (0 pads)."""
CONFIG = LlamaConfig(
    vocab_size=256 + OFFSET, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4, num_kv_heads=2
)
TASKS = [Task(f"t{i}", f"Q: {i}+{i}?\nA:", str(2 * i)) for i in range(2)]
"""Short prompts (the arithmetic task's run to ~150 bytes), so each generate compiles small programs."""


class ByteCodec:
    """A byte-level tokenizer for the tiny model."""

    def encode(self, text: str) -> list[int]:
        return [1, *(b + OFFSET for b in text.encode("utf-8"))]

    def decode(self, ids: list[int]) -> str:
        return bytes(i - OFFSET for i in ids if i >= OFFSET).decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def models() -> tuple[LlamaModel, LlamaModel]:
    build = eqx.filter_jit(lambda key: LlamaModel(CONFIG, key=key))  # one compile instead of one per weight
    return build(jax.random.PRNGKey(0)), build(jax.random.PRNGKey(1))


def _run(models, iteration: int = 0, **overrides):
    config = RolloutConfig(**({"group_size": 4, "max_new_tokens": 8, "batch_rows": 4} | overrides))
    return rollout(*models, TASKS, MathChecker(), ByteCodec(), config, RewardConfig(), iteration=iteration)


@eqx.filter_jit
def _logits(model: LlamaModel, tokens: jax.Array) -> jax.Array:
    return model(tokens)


def _direct_logprobs(model: LlamaModel, tokens: np.ndarray, start: int, stop: int) -> np.ndarray:
    logits = np.asarray(_logits(model, jnp.asarray(tokens[None, :stop])), np.float64)[0]
    log_softmax = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return np.asarray([log_softmax[t - 1, tokens[t]] for t in range(start, stop)])


def test_shapes_logprobs_and_determinism(models) -> None:
    batch, stats = _run(models, iteration=5)
    n = len(TASKS) * 4
    assert batch.tokens.shape[0] == n and batch.policy_logprobs.shape == batch.tokens.shape
    assert batch.task_ids == tuple(t.id for t in TASKS for _ in range(4))
    assert np.all(batch.completion_lengths == 8) and np.all(batch.truncated)
    mask = batch.completion_mask
    assert np.all(mask.sum(axis=1) == batch.completion_lengths)
    assert np.all(batch.policy_logprobs[~mask] == 0) and np.all(batch.policy_logprobs[mask] < 0)
    # Recomputed under each model at temperature 1 by a plain forward pass: the padded batch equals one row alone.
    for row in (0, 5, n - 1):
        start, stop = batch.prompt_lengths[row], batch.prompt_lengths[row] + batch.completion_lengths[row]
        for model, stored in zip(models, (batch.policy_logprobs, batch.reference_logprobs)):
            np.testing.assert_allclose(
                stored[row, start:stop], _direct_logprobs(model, batch.tokens[row], start, stop), atol=2e-5
            )
    assert not np.allclose(batch.policy_logprobs[mask], batch.reference_logprobs[mask])
    # G samples of one prompt differ from each other.
    completions = batch.tokens[:4, batch.prompt_lengths[0] : batch.prompt_lengths[0] + 8]
    assert len({tuple(row) for row in completions.tolist()}) > 1

    again, _ = _run(models, iteration=5)
    assert np.array_equal(again.tokens, batch.tokens)
    assert np.array_equal(again.policy_logprobs, batch.policy_logprobs)
    assert np.array_equal(again.reference_logprobs, batch.reference_logprobs)
    for other in (_run(models, iteration=6)[0], _run(models, iteration=5, seed=1)[0]):
        assert not np.array_equal(other.tokens, batch.tokens)
    assert sampling_seed(0, 5, 0) != sampling_seed(0, 5, 1) != sampling_seed(1, 5, 0)
    assert stats.generated_tokens == 8 * n and stats.tokens_per_s > 0
    assert stats.mean_entropy > 0 and stats.mean_length == 8.0


def test_truncation_is_counted_and_excluded(models) -> None:
    batch, stats = _run(models, max_new_tokens=2)
    assert stats.truncated_fraction == 1.0 and batch.reasons == ("truncated",) * len(batch.reasons)
    assert not batch.reward_mask.any() and stats.counted_fraction == 0.0
    assert "rl/reward_mean" not in stats.metrics() and stats.metrics()["rl/reason_truncated"] == 8.0
    assert "100% of 8 completions hit max_new_tokens" in stats.truncation_warning()
    # Every token stops a row: no completion is truncated, each is one token long and checked (no answer in it).
    stopped, stopped_stats = _run(models, max_new_tokens=2, stop_tokens=tuple(range(CONFIG.vocab_size)))
    assert stopped_stats.truncated_fraction == 0.0 and stopped_stats.truncation_warning() is None
    assert np.all(stopped.completion_lengths == 1) and stopped.reward_mask.all()
    assert set(stopped.reasons) == {"parse_failure"} and stopped_stats.metrics()["rl/reward_mean"] == 0.0


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="group_size"):
        RolloutConfig(group_size=0)
    with pytest.raises(ValueError, match="top_p"):
        RolloutConfig(top_p=0.0)


def test_unfiltered_sampling_is_the_plain_categorical() -> None:
    """Rollouts at top_p 1, top_k 0 (on-policy) draw from softmax(logits / T) itself, without the filters' sort."""
    logits = jax.random.normal(jax.random.PRNGKey(4), (64, 50), jnp.float32)
    key = jax.random.PRNGKey(5)
    drawn = sample(logits, jnp.float32(0.7), jnp.int32(0), jnp.float32(1.0), key=key)
    assert np.array_equal(np.asarray(drawn), np.asarray(jax.random.categorical(key, logits / 0.7, axis=-1)))
    nucleus = sample(logits, jnp.float32(0.7), jnp.int32(0), jnp.float32(0.5), key=key)
    assert not np.array_equal(np.asarray(nucleus), np.asarray(drawn))


def test_a_rollout_round_trips_its_shard_and_feeds_the_policy_loss(models, tmp_path) -> None:
    """The stored shard gives back the rollout bit for bit, and the update's log-probs at the rollout's weights
    reproduce the stored ones: ratio 1, nothing clipped, KL to itself 0."""
    batch, _ = _run(models, iteration=2, stop_tokens=(2,), max_new_tokens=6)
    config = RolloutConfig(group_size=4, max_new_tokens=6, batch_rows=4, stop_tokens=(2,))
    provenance = RolloutProvenance(2, 0, 7, "math", config, RewardConfig(), len(batch.task_ids))
    back, _ = read_rollouts(write_rollouts(tmp_path, batch, provenance))
    for name in ("tokens", "policy_logprobs", "reference_logprobs", "rewards", "reward_mask"):
        assert np.array_equal(getattr(back, name), getattr(batch, name)), name
    policy = models[0]
    logp, _ = eqx.filter_jit(lambda m, t: token_logprobs(m(t), t))(policy, jnp.asarray(back.tokens))
    rewards = jnp.asarray(back.rewards.reshape(-1, back.group_size))
    advantages = rloo_advantages(rewards, jnp.asarray(back.reward_mask.reshape(-1, back.group_size))).reshape(-1)
    _, metrics = policy_loss(
        logp,
        jnp.asarray(back.policy_logprobs),
        logp,
        advantages,
        jnp.asarray(back.completion_mask),
        jnp.ones(len(back.task_ids), jnp.float32),  # every row, counted or not: the alignment holds for all
        0.2,
        KLConfig("k3", 0.1),
    )
    assert float(metrics["rl/ratio_mean"]) == pytest.approx(1.0, abs=1e-4)
    assert float(metrics["rl/clip_fraction"]) == 0.0 and float(metrics["rl/kl"]) == 0.0
