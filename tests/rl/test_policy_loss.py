"""Policy-loss math (train.policy_loss) against hand computations in NumPy, and its properties."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.train.policy_loss import (
    KLConfig,
    clipped_objective,
    grpo_advantages,
    kl_estimate,
    policy_loss,
    rloo_advantages,
    sequence_mean,
    token_logprobs,
)

REWARDS = np.array([[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 0.0]], np.float32)
ALL = np.ones_like(REWARDS, bool)


def test_grpo_advantages_match_numpy() -> None:
    got = np.asarray(grpo_advantages(jnp.asarray(REWARDS), jnp.asarray(ALL), eps=1e-6))
    mean, std = REWARDS.mean(axis=1, keepdims=True), REWARDS.std(axis=1, keepdims=True)
    np.testing.assert_allclose(got, (REWARDS - mean) / (std + 1e-6), rtol=1e-6)
    np.testing.assert_allclose(got[0], [1, -1, -1, 1], atol=1e-5)


def test_grpo_leaves_excluded_samples_out_of_the_group() -> None:
    mask = np.array([[True, True, False, True]] * 2)
    got = np.asarray(grpo_advantages(jnp.asarray(REWARDS), jnp.asarray(mask)))
    kept = REWARDS[1, [0, 1, 3]]
    np.testing.assert_allclose(got[1, [0, 1, 3]], (kept - kept.mean()) / (kept.std() + 1e-6), rtol=1e-5)
    assert got[0, 2] == 0 and got[1, 2] == 0


def test_rloo_advantages_by_hand_and_sum_to_zero() -> None:
    got = np.asarray(rloo_advantages(jnp.asarray(REWARDS), jnp.asarray(ALL)))
    # r_i − mean of the other three: row 0 → 1 − 1/3, 0 − 2/3; row 1 → 3 − 1, 1 − 5/3, 2 − 4/3, 0 − 2.
    np.testing.assert_allclose(got, [[2 / 3, -2 / 3, -2 / 3, 2 / 3], [2, -2 / 3, 2 / 3, -2]], rtol=1e-6)
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(16, 5)).astype(np.float32)
    mask = rng.random((16, 5)) < 0.7
    advantages = np.asarray(rloo_advantages(jnp.asarray(rewards), jnp.asarray(mask)))
    np.testing.assert_allclose((advantages * mask).sum(axis=1), 0.0, atol=1e-5)
    assert np.all(advantages[~mask] == 0)
    alone = np.asarray(rloo_advantages(jnp.asarray(REWARDS[:1]), jnp.asarray([[True, False, False, False]])))
    assert np.all(alone == 0)


def test_kl_estimators_by_hand_and_k3_nonnegative() -> None:
    policy = np.array([[-1.0, -2.0, -0.5]], np.float32)
    reference = np.array([[-1.5, -1.0, -0.5]], np.float32)
    log_r = reference - policy
    expected = {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": np.exp(log_r) - 1 - log_r}
    for kind, want in expected.items():
        got = np.asarray(kl_estimate(jnp.asarray(policy), jnp.asarray(reference), kind))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    rng = np.random.default_rng(1)
    a, b = (jnp.asarray(rng.normal(scale=3.0, size=(8, 64)).astype(np.float32)) for _ in range(2))
    assert float(jnp.min(kl_estimate(a, b, "k3"))) >= 0.0
    with pytest.raises(ValueError, match="kl.kind"):
        KLConfig(kind="k4")
    with pytest.raises(ValueError, match="kl.coef"):
        KLConfig(coef=-0.1)


def test_k1_and_k3_average_to_the_exact_kl_on_policy_samples() -> None:
    policy, reference = np.array([0.7, 0.2, 0.1]), np.array([0.4, 0.4, 0.2])
    exact = float(np.sum(policy * np.log(policy / reference)))
    # The expectation under the policy, computed exactly over the three outcomes.
    logp, logq = jnp.log(jnp.asarray(policy, jnp.float32))[None], jnp.log(jnp.asarray(reference, jnp.float32))[None]
    for kind in ("k1", "k3"):
        mean = float(jnp.sum(jnp.asarray(policy, jnp.float32) * kl_estimate(logp, logq, kind)[0]))
        assert mean == pytest.approx(exact, rel=1e-5)


def test_clipped_objective_by_hand() -> None:
    logp_rollout = np.zeros((2, 3), np.float32)
    ratio = np.array([[1.0, 1.5, 0.5], [1.1, 0.7, 1.0]], np.float32)
    advantages = np.array([1.0, -2.0], np.float32)
    mask = np.array([[True, True, True], [True, True, False]])
    loss, fraction = clipped_objective(
        jnp.log(jnp.asarray(ratio)), jnp.asarray(logp_rollout), jnp.asarray(advantages), jnp.asarray(mask), 0.2
    )
    # A=1: −min(r, clip(r)) → −1, −1.2, −0.5; A=−2: −min(−2r, −2 clip(r)) → 2.2, 1.6, masked.
    np.testing.assert_allclose(np.asarray(loss), [[-1.0, -1.2, -0.5], [2.2, 1.6, 0.0]], rtol=1e-5)
    assert float(fraction) == pytest.approx(3 / 5)  # 1.5, 0.5 and 0.7 lie outside [0.8, 1.2]


def test_at_ratio_one_the_clipped_gradient_is_the_policy_gradient() -> None:
    rng = np.random.default_rng(2)
    logp = jnp.asarray(rng.normal(size=(3, 6)).astype(np.float32))
    advantages = jnp.asarray(rng.normal(size=3).astype(np.float32))
    mask = jnp.asarray(rng.random((3, 6)) < 0.8)
    weights = jnp.ones(3, jnp.float32)
    kl = KLConfig(kind="k3", coef=0.0)

    def clipped(x: jax.Array) -> jax.Array:
        return policy_loss(x, logp, logp, advantages, mask, weights, 0.2, kl)[0]

    def plain(x: jax.Array) -> jax.Array:
        return jnp.mean(sequence_mean(-advantages[:, None] * x, mask))

    np.testing.assert_allclose(np.asarray(jax.grad(clipped)(logp)), np.asarray(jax.grad(plain)(logp)), rtol=1e-6)


def test_policy_loss_adds_the_weighted_kl_and_drops_zero_weight_sequences() -> None:
    logp = jnp.asarray([[0.0, -1.0, -2.0], [0.0, -0.5, -0.5]], jnp.float32)
    reference = jnp.asarray([[0.0, -1.5, -1.0], [0.0, -3.0, -3.0]], jnp.float32)
    mask = jnp.asarray([[False, True, True], [False, True, True]])
    advantages = jnp.asarray([1.0, 5.0], jnp.float32)
    weights = jnp.asarray([1.0, 0.0], jnp.float32)
    loss, metrics = policy_loss(logp, logp, reference, advantages, mask, weights, 0.2, KLConfig("k2", 0.5))
    log_r = np.array([-0.5, 1.0])
    kl = float(np.mean(0.5 * log_r**2))
    assert float(metrics["rl/kl_penalty"]) == pytest.approx(kl)
    assert float(metrics["rl/kl"]) == pytest.approx(float(np.mean(np.expm1(log_r) - log_r)), rel=1e-5)
    assert float(metrics["rl/pg_loss"]) == pytest.approx(-1.0)
    assert float(loss) == pytest.approx(-1.0 + 0.5 * kl)
    assert float(metrics["rl/clip_fraction"]) == 0.0 and float(metrics["rl/ratio_mean"]) == pytest.approx(1.0)


def test_token_logprobs_align_with_the_next_token() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 4, 5)).astype(np.float32)
    tokens = rng.integers(0, 5, size=(2, 4)).astype(np.int32)
    logp, entropy = token_logprobs(jnp.asarray(logits), jnp.asarray(tokens))
    log_softmax = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    for row in range(2):
        for t in range(1, 4):
            assert float(logp[row, t]) == pytest.approx(log_softmax[row, t - 1, tokens[row, t]], rel=1e-5)
            p = np.exp(log_softmax[row, t - 1])
            assert float(entropy[row, t]) == pytest.approx(-(p * np.log(p)).sum(), rel=1e-5)
    assert np.all(np.asarray(logp[:, 0]) == 0)


def test_gradients_of_the_estimators_as_loss_terms() -> None:
    """k2's expected gradient is that of KL(policy ‖ ref), k1's is zero, k3's is that of KL(ref ‖ policy)."""
    # Samples from the policy, not differentiated: each outcome weighted by its stopped probability.
    reference = jnp.log(jnp.asarray([[0.4, 0.4, 0.2]], jnp.float32))
    theta = jnp.asarray([[1.0, -0.5, 0.2]], jnp.float32)

    def expected(kind: str):
        def loss(logits: jax.Array) -> jax.Array:
            logp = jax.nn.log_softmax(logits)
            return jnp.sum(jax.lax.stop_gradient(jnp.exp(logp)) * kl_estimate(logp, reference, kind))

        return np.asarray(jax.grad(loss)(theta))

    def exact(logits: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(logits)
        return jnp.sum(jnp.exp(logp) * (logp - reference))

    def forward(logits: jax.Array) -> jax.Array:
        return jnp.sum(jnp.exp(reference) * (reference - jax.nn.log_softmax(logits)))

    np.testing.assert_allclose(expected("k2"), np.asarray(jax.grad(exact)(theta)), atol=1e-6)
    np.testing.assert_allclose(expected("k1"), 0.0, atol=1e-6)
    np.testing.assert_allclose(expected("k3"), np.asarray(jax.grad(forward)(theta)), atol=1e-6)
    assert not np.allclose(expected("k3"), expected("k2"), atol=1e-3)
