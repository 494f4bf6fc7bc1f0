"""The RL objectives as the train step sees them: RLOO/GRPO's clipped policy loss and on-policy distillation."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.configfile import from_plain, to_plain
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import save_checkpoint
from tootsie.train.objectives import ObjectiveChoice
from tootsie.train.policy_loss import KLConfig, policy_loss, token_logprobs
from tootsie.train.rl_objectives import DistillObjective, GRPOObjective, RLOOObjective
from tootsie.train.stability import accumulate_gradients

CONFIG = LlamaConfig(vocab_size=32, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=2)
ROWS, SEQ = 4, 8


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return eqx.filter_jit(lambda key: LlamaModel(CONFIG, key=key))(jax.random.PRNGKey(0))


def _batch(model: LlamaModel) -> dict[str, jax.Array]:
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(3, 32, (ROWS, SEQ)), jnp.int32)
    mask = np.zeros((ROWS, SEQ), np.float32)
    mask[:, 5:] = 1.0
    mask[3] = 0.0  # an excluded completion (e.g. truncated): no gradient, no weight
    logp, _ = token_logprobs(model(tokens), tokens)
    return {
        "tokens": tokens,
        "segment_ids": jnp.zeros((ROWS, SEQ), jnp.int32),
        "loss_mask": jnp.asarray(mask),
        "rollout_logprobs": logp,
        "reference_logprobs": logp - 0.1,
        "advantages": jnp.asarray(np.repeat([[1.0], [-1.0], [0.5], [2.0]], SEQ, axis=1), jnp.float32),
    }


def test_policy_gradient_objective_is_policy_loss_on_its_fields(model) -> None:
    objective = RLOOObjective(clip_eps=0.2, kl=KLConfig("k2", 0.1))
    batch = _batch(model)
    total, metrics = objective.loss(model, z_loss_weight=0.0, **batch)
    logp, _ = token_logprobs(model(batch["tokens"]), batch["tokens"])
    expected, _ = policy_loss(
        logp,
        batch["rollout_logprobs"],
        batch["reference_logprobs"],
        batch["advantages"][:, 0],
        batch["loss_mask"] > 0,
        jnp.asarray([1.0, 1.0, 1.0, 0.0]),
        0.2,
        KLConfig("k2", 0.1),
    )
    assert float(total) == pytest.approx(float(expected), rel=1e-5)
    assert float(metrics["rl/ratio_mean"]) == pytest.approx(1.0, abs=1e-5)  # fresh rollouts: ratio 1
    assert float(metrics["rl/kl"]) > 0  # reference log-probs differ by 0.1 per token
    assert float(objective.batch_weight(**{k: batch[k] for k in ("tokens", "segment_ids", "loss_mask")})) == 3.0


def test_the_excluded_row_carries_no_gradient(model) -> None:
    objective = RLOOObjective()
    batch = _batch(model)
    bumped = dict(batch, advantages=batch["advantages"].at[3].set(100.0))
    grad = eqx.filter_grad(lambda m, b: objective.loss(m, z_loss_weight=0.0, **b)[0])
    for a, b in zip(jax.tree.leaves(grad(model, batch)), jax.tree.leaves(grad(model, bumped))):
        assert np.allclose(a, b)


def test_microbatched_rl_loss_equals_the_full_batch(model) -> None:
    objective = GRPOObjective(kl=KLConfig("k3", 0.05))
    batch = _batch(model)
    fields = ("tokens", "segment_ids", "loss_mask", *objective.fields)
    arrays = tuple(batch[name] for name in fields)

    def loss(m, *a):
        return objective.loss(m, a[0], a[1], a[2], 0.0, **dict(zip(objective.fields, a[3:])))

    def weight(*a):
        return objective.batch_weight(*a[:3], **dict(zip(objective.fields, a[3:])))

    value_and_grad = eqx.filter_value_and_grad(loss, has_aux=True)
    (full, _), _ = value_and_grad(model, *arrays)
    accumulated, _, _ = accumulate_gradients(value_and_grad, model, arrays, 2, weight_fn=weight)
    assert float(accumulated) == pytest.approx(float(full), rel=1e-5)


def test_advantages_follow_the_estimator() -> None:
    rewards = np.asarray([[1.0, 0.0, 0.0, 1.0]], np.float32)
    mask = np.asarray([[True, True, True, False]])
    rloo = RLOOObjective().advantages(rewards, mask)
    np.testing.assert_allclose(rloo, [[1.0, -0.5, -0.5, 0.0]], atol=1e-6)
    grpo = GRPOObjective().advantages(rewards, mask)
    assert grpo[0, 0] > 0 > grpo[0, 1] and grpo[0, 3] == 0.0


def test_rl_objectives_round_trip_as_registry_kinds() -> None:
    for objective in (RLOOObjective(clip_eps=0.1, kl=KLConfig("k1", 0.2)), GRPOObjective(), DistillObjective("t")):
        plain = to_plain(objective)
        assert from_plain(ObjectiveChoice, plain, "objective") == objective
    assert to_plain(RLOOObjective())["kind"] == "rloo"
    with pytest.raises(ValueError, match="clip_eps"):
        RLOOObjective(clip_eps=1.5)


def test_distillation_is_zero_against_itself_and_falls_when_trained(model, tmp_path) -> None:
    other_model = eqx.filter_jit(lambda key: LlamaModel(CONFIG, key=key))(jax.random.PRNGKey(7))
    state = {"step": 1, "model": to_plain(CONFIG)}
    itself, other = (
        DistillObjective(str(save_checkpoint(tmp_path / name, 1, {"model": eqx.filter(m, eqx.is_array)}, state)))
        for name, m in (("self", model), ("other", other_model))
    )
    base = {k: v for k, v in _batch(model).items() if k in ("tokens", "segment_ids", "loss_mask")}
    assert float(itself.loss(model, z_loss_weight=0.0, **base)[0]) == pytest.approx(0.0, abs=1e-6)
    loss = eqx.filter_jit(lambda m: other.loss(m, z_loss_weight=0.0, **base)[0])
    grad = eqx.filter_jit(eqx.filter_grad(lambda m: other.loss(m, z_loss_weight=0.0, **base)[0]))
    student = model
    for _ in range(20):
        student = eqx.apply_updates(student, jax.tree.map(lambda g: -0.5 * g, grad(student)))
    before, after = float(loss(model)), float(loss(student))
    assert before > 0 and after < 0.5 * before
