"""Warm starts carry Adam's moments by what they are; the applied LR follows the global step over optimizer changes."""

import json
import logging

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureDataset, MixtureStage
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.checkpoint import checkpoint_dir, load_checkpoint
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.loading import load_model
from tootsie.train.loss import next_token_loss
from tootsie.train.optimizer import AdamCConfig, AdamWConfig, LRScaledDecayState, MuonConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.stability import StabilityConfig
from tootsie.train.state import abstract_state, build_layout, build_optimizer, initial_state
from tootsie.train.warm_start import carry_optimizer_state, state_identities

MODEL = LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)
SCHEDULE = WSDConfig(peak_lr=1e-2, warmup_steps=4, decay_steps=2, total_steps=8)  # step 0 at 2.5e-3, step 4 at 1e-2
NO_GUARDS = StabilityConfig(clip_update_window=None, skip_bad_steps=False)
GUARDS = StabilityConfig(clip_update_window=8, skip_bad_steps=True, skip_window=8)
PARAMS = {"embed": jnp.zeros((3, 2)), "w": jnp.zeros((2, 2))}


@pytest.fixture
def source(make_cache, tmp_path) -> TrainConfig:
    """An AdamW run without stability tools, trained to step 4 under tmp_path/adamw."""
    caches = {"a": make_cache("a", [[(3 * i + k) % 37 + 2 for i in range(30)] for k in range(30)], 40)}
    data = MixtureConfig(
        caches=caches, stages=(MixtureStage(0, {"a": 1.0}),), seq_len=16, batch_schedule=BatchSchedule.constant(4)
    )
    config = TrainConfig(
        model=MODEL,
        data=data,
        num_steps=4,
        schedule=SCHEDULE,
        stability=NO_GUARDS,
        checkpoints=CheckpointConfig(every_steps=100),
    )
    run_training(config, str(tmp_path / "adamw"))
    return config


def _is_schedule(node: object) -> bool:
    return isinstance(node, (optax.ScaleByScheduleState, LRScaledDecayState))


def _adam_states(opt_state: optax.OptState) -> list[optax.ScaleByAdamState]:
    return [
        node
        for node in jax.tree_util.tree_leaves(opt_state, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
        if isinstance(node, optax.ScaleByAdamState)
    ]


def _saved_adam_state(config: TrainConfig, checkpoint) -> optax.ScaleByAdamState:
    _, _, template = abstract_state(config, build_optimizer(config))
    (adam,) = _adam_states(load_checkpoint(checkpoint, {"opt_state": template})[0]["opt_state"])
    return adam


def test_adamw_to_adamc_with_guards_carries_moments_and_applies_the_global_step_lr(
    source: TrainConfig, tmp_path, caplog
) -> None:
    adamc = AdamCConfig()  # its peak is the schedule's (SCHEDULE.peak_lr)
    target = TrainConfig(
        **{
            **source.__dict__,
            "num_steps": 5,
            "optimizer": adamc,
            "stability": GUARDS,
            "warm_start": WarmStartConfig(str(tmp_path / "adamw")),
        }
    )
    saved = _saved_adam_state(source, checkpoint_dir(tmp_path / "adamw" / "checkpoints", 4))

    # The state the warm start begins from: Adam's moments and count are the source's, found under a new tree position.
    optimizer = build_optimizer(target)
    with caplog.at_level(logging.INFO, logger="tootsie.train.trainer"):
        state = initial_state(target, optimizer, tmp_path / "adamc", build_layout(target, optimizer))
    (carried,) = _adam_states(state.opt_state)
    assert state.step == 4 and int(carried.count) == int(saved.count) == 4
    for name in ("mu", "nu"):
        for new, old in zip(
            jax.tree_util.tree_leaves(getattr(carried, name)),
            jax.tree_util.tree_leaves(getattr(saved, name)),
            strict=True,
        ):
            assert np.array_equal(np.asarray(new), np.asarray(old)) and np.any(np.asarray(old) != 0)
    fresh_log = " ".join(record.getMessage() for record in caplog.records if "start fresh" in record.getMessage())
    assert ".inner_state[1].history" in fresh_log and ".losses" in fresh_log and ".peak_lr" in fresh_log
    assert ".mu." not in fresh_log and ".nu." not in fresh_log

    # The first step's update is -schedule(4) times
    # (Adam's direction from the carried moments + AdamC's decay at lr(4) / peak).
    run_training(target, str(tmp_path / "adamc"))
    before, after = load_model(MODEL, str(tmp_path / "adamw")), load_model(MODEL, str(tmp_path / "adamc"))
    batch = MixtureDataset(source.data).batch(4)

    def loss(model):
        return next_token_loss(
            model, jnp.asarray(batch.tokens), jnp.asarray(batch.segment_ids), jnp.asarray(batch.loss_mask), 0.0
        )[0]

    grads = eqx.filter_grad(loss)(before)
    scale = min(1.0, adamc.max_grad_norm / float(optax.tree.norm(grads)))
    lr = SCHEDULE.build().learning_rate
    count = int(saved.count) + 1
    for pick, decays in ((lambda t: t.embed, False), (lambda t: t.layers.attn.wq, True)):
        grad = scale * pick(grads)
        mu = adamc.beta1 * pick(saved.mu) + (1 - adamc.beta1) * grad
        nu = adamc.beta2 * pick(saved.nu) + (1 - adamc.beta2) * grad**2
        direction = (mu / (1 - adamc.beta1**count)) / (jnp.sqrt(nu / (1 - adamc.beta2**count)) + adamc.epsilon)
        decay = adamc.weight_decay * float(lr(4)) / lr.peak_lr * pick(before) if decays else 0.0
        np.testing.assert_allclose(
            pick(after) - pick(before), -float(lr(4)) * (direction + decay), rtol=2e-4, atol=1e-9
        )
    assert float(lr(0)) < 0.3 * float(lr(4))  # what a fresh schedule count would have applied is far off
    final = load_checkpoint(
        checkpoint_dir(tmp_path / "adamc" / "checkpoints", 5), {"opt_state": abstract_state(target, optimizer)[2]}
    )[0]["opt_state"]
    counts = [int(n.count) for n in jax.tree_util.tree_leaves(final, is_leaf=_is_schedule) if _is_schedule(n)]
    assert len(counts) == 2 and set(counts) == {5}
    record = json.loads((tmp_path / "adamc" / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["step"] == 4 and record["lr"] == pytest.approx(float(lr(4)))


@pytest.mark.parametrize(
    ("parent", "child"),
    [
        ((AdamWConfig(), NO_GUARDS), (AdamCConfig(), GUARDS)),
        ((AdamCConfig(), GUARDS), (AdamWConfig(), NO_GUARDS)),
        ((AdamWConfig(), StabilityConfig(clip_update_window=8, skip_bad_steps=False)), (AdamWConfig(), GUARDS)),
        ((MuonConfig(), NO_GUARDS), (MuonConfig(), GUARDS)),
    ],
)
def test_moments_and_shared_statistics_carry_by_identity(parent: tuple, child: tuple) -> None:
    lr = SCHEDULE.build().learning_rate
    old = parent[1].wrap(parent[0].build(lr)).init(PARAMS)
    old = jax.tree_util.tree_map(lambda x: jnp.full_like(x, 7), old)  # mark every saved tensor
    saved = {
        jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(old)[0]
    }
    new, fresh, _ = carry_optimizer_state(child[1].wrap(child[0].build(lr)).init(PARAMS), saved)
    identities = state_identities(
        jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(new)[0]
    )[0]
    for path, leaf in jax.tree_util.tree_flatten_with_path(new)[0]:
        name = jax.tree_util.keystr(path)
        moment = ".mu[" in name or ".nu[" in name
        shared_history = ".history" in name and parent[1].clip_update_window is not None
        if moment or shared_history:
            assert np.all(np.asarray(leaf) == 7) and name not in fresh, (name, identities.get(name))
    assert all(".mu[" not in name and ".nu[" not in name for name in fresh)


def test_identical_identities_are_ambiguous_and_start_fresh() -> None:
    identities, ambiguous = state_identities(["[0].count", "[1].count", "[2].count", "[2].mu['w']", "[2].nu['w']"])
    assert ambiguous == ["[0].count", "[1].count"]
    assert identities == {
        "[2].count": "count+mu+nu:count",
        "[2].mu['w']": "count+mu+nu:mu['w']",
        "[2].nu['w']": "count+mu+nu:nu['w']",
    }


def test_schedule_counts_follow_the_global_step_also_after_a_skipped_step() -> None:
    lr = SCHEDULE.build().learning_rate
    adamc = AdamCConfig()
    optimizer = GUARDS.wrap(adamc.build(lr))
    ones = jax.tree_util.tree_map(jnp.ones_like, PARAMS)
    _, state = optimizer.update(
        ones, adamc.at_global_step(optimizer.init(PARAMS), jnp.asarray(0)), PARAMS, value=jnp.asarray(jnp.nan)
    )
    assert bool(state.skipped)  # the inner state, schedule counts included, stayed at step 0
    state = adamc.at_global_step(state, jnp.asarray(1, jnp.int32))
    schedules = [n for n in jax.tree_util.tree_leaves(state, is_leaf=_is_schedule) if _is_schedule(n)]
    assert {type(n) for n in schedules} == {optax.ScaleByScheduleState, LRScaledDecayState} and all(
        int(n.count) == 1 for n in schedules
    )
    assert (
        int(_adam_states(state)[0].count) == 0
    )  # Adam's bias-correction count belongs to its moments, not to the schedule
    updates, _ = optimizer.update(ones, state, PARAMS, value=jnp.asarray(1.0))
    # A first Adam step moves by ±1, so the update is -lr(1) (AdamC's decay is zero on zero weights).
    np.testing.assert_allclose(updates["w"], -float(lr(1)), rtol=1e-5)
    assert float(lr(0)) < 0.6 * float(lr(1))
