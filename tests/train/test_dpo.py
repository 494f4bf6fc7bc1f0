"""DPO: the loss on hand-computed numbers, pair rows split into two segments, accumulation weights by pairs."""

import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.configfile import to_plain
from tootsie.datakit.parquet_io import write_npy_atomic
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import save_checkpoint
from tootsie.train.dpo import (
    CHOSEN_LENGTHS_FILE,
    REFERENCE_LOGPROBS_FILE,
    REFERENCE_RECORD_FILE,
    dpo_loss,
    pair_logprobs,
    split_segments,
)
from tootsie.train.loss import token_nll
from tootsie.train.objectives import OBJECTIVES, DPOObjective
from tootsie.train.rl_objectives import DistillObjective
from tootsie.train.stability import accumulate_gradients

MODEL = LlamaConfig(vocab_size=64, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=1)


def test_dpo_loss_matches_hand_computed_numbers() -> None:
    # pair 0: policy − reference = +2 on chosen, −1 on rejected → β·margin = 0.1·3 = 0.3
    # pair 1: −1 on chosen, +1 on rejected → −0.2; pair 2 has weight 0 (padding) and must not count
    loss, metrics = dpo_loss(
        jnp.array([-10.0, -13.0, 5.0]),
        jnp.array([-20.0, -18.0, 5.0]),
        jnp.array([-12.0, -12.0, 0.0]),
        jnp.array([-19.0, -19.0, 0.0]),
        beta=0.1,
        weights=jnp.array([1.0, 1.0, 0.0]),
    )
    expected = (math.log1p(math.exp(-0.3)) + math.log1p(math.exp(0.2))) / 2  # −log σ(x) = log(1 + e^−x)
    assert float(loss) == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx((0.554355 + 0.798139) / 2, abs=1e-5)
    assert float(metrics["loss"]) == pytest.approx(expected, abs=1e-6)
    assert float(metrics["reward_margin"]) == pytest.approx((0.3 - 0.2) / 2, abs=1e-6)
    assert float(metrics["preference_accuracy"]) == pytest.approx(0.5)
    assert float(metrics["chosen_reward"]) == pytest.approx((0.2 - 0.1) / 2, abs=1e-6)
    assert float(metrics["rejected_reward"]) == pytest.approx((-0.1 + 0.1) / 2, abs=1e-6)
    # β scales the margin inside the sigmoid: β = 1 on pair 0 alone gives −log σ(3)
    alone, _ = dpo_loss(*(jnp.array([v]) for v in (-10.0, -20.0, -12.0, -19.0)), beta=1.0, weights=jnp.ones(1))
    assert float(alone) == pytest.approx(math.log1p(math.exp(-3.0)), abs=1e-6)


def test_split_segments_separates_chosen_and_rejected_and_keeps_padding() -> None:
    segments = jnp.array([[7, 7, 7, 7, 7, -1], [3, 3, 3, 3, 3, 3]], jnp.int32)
    split = np.asarray(split_segments(segments, jnp.array([2, 4], jnp.int32)))
    assert split.tolist() == [[14, 14, 15, 15, 15, -1], [6, 6, 6, 6, 7, 7]]


def _masked_logprob(model: LlamaModel, tokens: np.ndarray, mask: np.ndarray) -> float:
    """Summed log-prob of the tokens `mask` marks as targets, the sequence scored alone from position 0."""
    nll, _ = eqx.filter_jit(token_nll)(model, jnp.asarray(tokens[None]), jnp.zeros((1, len(tokens)), jnp.int32))
    return float(-(np.asarray(nll)[0, :-1] * mask[1:]).sum())


def test_pair_logprobs_equal_each_half_scored_alone() -> None:
    model = LlamaModel(MODEL, key=jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)
    chosen, rejected = rng.integers(1, 64, 7), rng.integers(1, 64, 9)
    chosen_mask = np.array([0, 0, 0, 1, 1, 1, 1], np.float32)
    rejected_mask = np.array([0, 0, 0, 1, 1, 1, 1, 1, 0], np.float32)
    seq_len = 20
    tokens = np.zeros((1, seq_len), np.int32)
    tokens[0, :16] = np.concatenate([chosen, rejected])
    segments = np.full((1, seq_len), -1, np.int32)
    segments[0, :16] = 5
    target_mask = np.zeros((1, seq_len), np.float32)
    target_mask[0, :16] = np.concatenate([chosen_mask, rejected_mask])
    # position t predicts t+1 of the same document and counts when the target is a reply token (as the data does)
    loss_mask = np.zeros((1, seq_len), np.float32)
    loss_mask[0, :-1] = (segments[0, 1:] == segments[0, :-1]) * target_mask[0, 1:]
    policy_chosen, policy_rejected = eqx.filter_jit(pair_logprobs)(
        model, jnp.asarray(tokens), jnp.asarray(segments), jnp.asarray(loss_mask), jnp.array([7], jnp.int32)
    )
    assert float(policy_chosen[0]) == pytest.approx(_masked_logprob(model, chosen, chosen_mask), abs=1e-4)
    # the rejected half sits at positions 7..15 in the row; RoPE is relative, so it scores as at 0..8
    assert float(policy_rejected[0]) == pytest.approx(_masked_logprob(model, rejected, rejected_mask), abs=1e-4)


def _reference_dir(root: Path, logprobs: np.ndarray, lengths: np.ndarray) -> str:
    root.mkdir(parents=True, exist_ok=True)
    write_npy_atomic(logprobs.astype(np.float32), root / REFERENCE_LOGPROBS_FILE)
    write_npy_atomic(lengths.astype(np.int32), root / CHOSEN_LENGTHS_FILE)
    write_json_atomic(root / REFERENCE_RECORD_FILE, {"pairs": len(lengths)})
    return str(root)


def _pair_batch(rows: int, seq_len: int, pad_rows: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    rng = np.random.default_rng(1)
    tokens = rng.integers(1, 64, (rows, seq_len)).astype(np.int32)
    segments = np.repeat(np.arange(rows, dtype=np.int32)[:, None], seq_len, axis=1)
    segments[rows - pad_rows :] = -1
    mask = (rng.random((rows, seq_len)) < 0.6).astype(np.float32) * (segments >= 0)
    return jnp.asarray(tokens), jnp.asarray(segments), jnp.asarray(mask)


def test_dpo_objective_accumulates_to_the_full_batch_mean_over_pairs(tmp_path: Path) -> None:
    model = LlamaModel(MODEL, key=jax.random.PRNGKey(2))
    reference = _reference_dir(tmp_path / "ref", np.random.default_rng(3).normal(-30, 5, (8, 2)), np.full(8, 6))
    objective = DPOObjective(reference=reference, beta=0.5)
    # 4 rows, the last one padding: microbatches of 2 hold 2 and 1 pairs, so an unweighted mean would be wrong
    tokens, segments, mask = _pair_batch(4, 16, pad_rows=1)
    value_and_grad = eqx.filter_value_and_grad(lambda m, t, s, k: objective.loss(m, t, s, k, 0.0), has_aux=True)
    (full, full_metrics), _ = eqx.filter_jit(value_and_grad)(model, tokens, segments, mask)
    accumulated, metrics, _ = eqx.filter_jit(
        lambda m: accumulate_gradients(value_and_grad, m, (tokens, segments, mask), 2, weight_fn=objective.batch_weight)
    )(model)
    assert float(objective.batch_weight(tokens, segments, mask)) == 3.0
    assert float(accumulated) == pytest.approx(float(full), rel=1e-5)
    for name in ("reward_margin", "preference_accuracy", "chosen_reward", "rejected_reward"):
        assert float(metrics[name]) == pytest.approx(float(full_metrics[name]), rel=1e-4, abs=1e-6)


def _objective(kind: str, tmp_path: Path, model: LlamaModel) -> object:
    """A working instance of every registered objective (the RL ones' teacher is `model` itself)."""
    if kind == "dpo":
        return DPOObjective(reference=_reference_dir(tmp_path, np.full((4, 2), -20.0), np.full(4, 8)))
    if kind == "distill":
        state = {"step": 1, "model": to_plain(MODEL)}
        return DistillObjective(str(save_checkpoint(tmp_path, 1, {"model": eqx.filter(model, eqx.is_array)}, state)))
    return OBJECTIVES[kind]()


@pytest.mark.parametrize("kind", sorted(OBJECTIVES))
def test_every_objective_jits_and_stays_finite(kind: str, tmp_path: Path) -> None:
    model = LlamaModel(MODEL, key=jax.random.PRNGKey(0))
    objective = _objective(kind, tmp_path, model)
    assert isinstance(objective, OBJECTIVES[kind])
    tokens, segments, mask = _pair_batch(4, 16, pad_rows=0)
    fields = {name: jnp.full(tokens.shape, -1.0, jnp.float32) for name in objective.fields}  # log-probs, advantages
    loss, metrics = eqx.filter_jit(lambda m: objective.loss(m, tokens, segments, mask, 1e-4, **fields))(model)
    assert loss.shape == () and np.isfinite(float(loss)) and "loss" in metrics
    assert all(np.isfinite(np.asarray(value)).all() for value in metrics.values())  # scalars, or one per layer
