"""The training loop: init, resume or warm-start; jitted steps; metrics; checkpoints.

Design: all state that changes during training is (model, optimizer state,
EMA, step). The data position is the step itself, because `batch(step)` is
stateless, and every rolling statistic of the stability tools lives inside the
optimizer state, so a checkpoint of those four resumes a run to the bit. A run's
output directory holds `checkpoints/step-N/` and `metrics.jsonl`; running the
same config on the same directory again resumes from its newest checkpoint,
and `warm_start` starts a new run (a cooldown, an architecture switch) from
another run's checkpoint.

Example: a pretrain run to step 300, then a cooldown config with
`warm_start=WarmStartConfig("<pretrain dir>")` and `num_steps=400` trains steps
300..399 on the cooldown mixture with the decay of the shared schedule.
"""

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from tootsie.configfile import to_plain
from tootsie.data.mixture import MixtureDataset
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.monitor.metrics_log import MetricsLog
from tootsie.monitor.throughput import mfu
from tootsie.train.checkpoint import fill_matching, latest_checkpoint, load_checkpoint, prune_temporary, read_tensors, save_checkpoint
from tootsie.train.config import TrainConfig
from tootsie.train.loss import cast_floats, next_token_loss
from tootsie.train.stability import accumulate_gradients, adam_moment_norms, per_layer_update_norms, stability_metrics
from tootsie.train.warm_start import warm_start_model

logger = logging.getLogger(__name__)
CHECKPOINTS = "checkpoints"
METRICS_FILE = "metrics.jsonl"


@dataclass
class TrainState:
    """Everything that changes during training."""

    model: LlamaModel
    opt_state: optax.OptState
    ema: Any
    step: int


def init_model(config: TrainConfig) -> LlamaModel:
    """The freshly initialized model for `config.seed`."""
    return LlamaModel(config.model, key=jax.random.PRNGKey(config.seed))


def resolve_checkpoint(path: str) -> Path:
    """A checkpoint directory from either a checkpoint or a training output directory."""
    candidate = Path(path)
    if (candidate / "state.json").is_file():
        return candidate
    latest = latest_checkpoint(candidate / CHECKPOINTS)
    if latest is None:
        raise TootsieError(f"no finished checkpoint in {candidate} or {candidate / CHECKPOINTS}; train that run first")
    return latest


def load_model(model_config: LlamaConfig, checkpoint: str, weights: str = "model") -> LlamaModel:
    """A model with weights from a checkpoint (or a training output directory's newest one); `weights="ema"` for the EMA."""
    params, static = eqx.partition(LlamaModel(model_config, key=jax.random.PRNGKey(0)), eqx.is_array)
    trees, _ = load_checkpoint(resolve_checkpoint(checkpoint), {weights: params})
    return eqx.combine(trees[weights], static)


def build_optimizer(config: TrainConfig) -> optax.GradientTransformationExtraArgs:
    """The configured optimizer wrapped in the configured stability tools."""
    return config.stability.wrap(config.optimizer.build(config.schedule.build().learning_rate))


def make_train_step(config: TrainConfig, optimizer: optax.GradientTransformationExtraArgs):
    """The jitted step `(model, opt_state, ema, step, tokens, segments, mask) -> (model, opt_state, ema, metrics)`."""
    compute_dtype = jnp.dtype(config.compute_dtype)

    def loss_fn(model: LlamaModel, tokens: jax.Array, segment_ids: jax.Array, loss_mask: jax.Array):
        return next_token_loss(cast_floats(model, compute_dtype), tokens, segment_ids, loss_mask, config.z_loss_weight)

    value_and_grad = eqx.filter_value_and_grad(loss_fn, has_aux=True)

    @eqx.filter_jit(donate="all-except-first")
    def train_step(model: LlamaModel, opt_state: optax.OptState, ema: Any, step: jax.Array, tokens: jax.Array, segment_ids: jax.Array, loss_mask: jax.Array):
        if config.microbatches > 1:
            total, (cross_entropy, z_loss), grads = accumulate_gradients(
                value_and_grad, model, (tokens, segment_ids, loss_mask), config.microbatches, weight_fn=lambda t, s, m: m.sum()
            )
        else:
            (total, (cross_entropy, z_loss)), grads = value_and_grad(model, tokens, segment_ids, loss_mask)
        params = eqx.filter(model, eqx.is_array)
        updates, opt_state = optimizer.update(grads, opt_state, params, value=total)
        model = eqx.apply_updates(model, updates)
        stability = stability_metrics(opt_state)
        if ema is not None:
            updated = config.ema.update(ema, eqx.filter(model, eqx.is_array), step)
            skipped = stability.get("skip/skipped", jnp.zeros((), jnp.float32)) > 0
            ema = jax.tree_util.tree_map(lambda old, new: jnp.where(skipped, old, new), ema, updated)
        head = model.embed if model.lm_head is None else model.lm_head
        metrics = {
            "loss": cross_entropy,
            "z_loss": z_loss,
            "grad_norm": optax.tree.norm(grads),
            "update_norm": optax.tree.norm(updates),
            "lm_head_norm": optax.tree.norm(head),
            "layer_update_norms": per_layer_update_norms(updates),
            **stability,
            **adam_moment_norms(opt_state),
        }
        return model, opt_state, ema, metrics

    return train_step


def initial_state(config: TrainConfig, optimizer: optax.GradientTransformation, output: Path) -> TrainState:
    """Resume from this run's newest checkpoint, else warm-start, else initialize."""
    model = init_model(config)
    params, static = eqx.partition(model, eqx.is_array)
    opt_state = _copy(optimizer.init(params))  # init may reuse one zeros array in several leaves
    ema = _copy(params) if config.ema is not None else None
    own = latest_checkpoint(output / CHECKPOINTS)
    if own is not None:
        templates = {"model": params, "opt_state": opt_state} | ({"ema": ema} if ema is not None else {})
        trees, state = load_checkpoint(own, templates)
        logger.info("resuming from %s at step %d", own, state["step"])
        return TrainState(eqx.combine(trees["model"], static), trees["opt_state"], trees.get("ema"), int(state["step"]))
    if config.warm_start is None:
        return TrainState(model, opt_state, ema, 0)
    return warm_started_state(config, model, opt_state)


def warm_started_state(config: TrainConfig, fresh_model: LlamaModel, fresh_opt_state: optax.OptState) -> TrainState:
    """The state a warm start begins from: converted weights, matching optimizer state, EMA, step."""
    warm = config.warm_start
    source = resolve_checkpoint(warm.checkpoint)
    model = warm_start_model(source, fresh_model, add_qk_norm=warm.add_qk_norm)
    params = eqx.filter(model, eqx.is_array)
    opt_state = fresh_opt_state
    saved_opt = read_tensors(source, "opt_state") if warm.load_optimizer else None
    if saved_opt is not None:
        opt_state, fresh, unused = fill_matching(fresh_opt_state, saved_opt)
        if fresh or unused:
            logger.warning("warm start from %s: %d optimizer tensors start fresh (%s...), %d saved ones unused", source, len(fresh), fresh[:2], len(unused))
    ema = None
    if config.ema is not None:
        saved_ema = read_tensors(source, "ema")
        ema = fill_matching(params, saved_ema)[0] if saved_ema is not None and not warm.add_qk_norm else _copy(params)
    step = 0 if warm.reset_step else int(load_checkpoint(source, {})[1]["step"])
    logger.info("warm start from %s at step %d", source, step)
    return TrainState(model, opt_state, ema, step)


def _copy(tree: Any) -> Any:
    """Fresh buffers for every leaf: a buffer donated to the step must not appear twice in its arguments."""
    return jax.tree_util.tree_map(jnp.copy, tree)


def save_state(output: Path, state: TrainState, config: TrainConfig, kind: str) -> Path:
    """Checkpoint params, optimizer state, EMA, step and the model config under `output/checkpoints`."""
    trees = {"model": eqx.filter(state.model, eqx.is_array), "opt_state": state.opt_state} | ({"ema": state.ema} if state.ema is not None else {})
    record = {"tokens": config.tokens_before(state.step), "kind": kind, "model": to_plain(config.model)}
    return save_checkpoint(output / CHECKPOINTS, state.step, trees, record)


def _scalars(metrics: dict[str, jax.Array]) -> dict[str, object]:
    values: dict[str, object] = {}
    for name, value in metrics.items():
        array = np.asarray(value)
        values[name] = float(array) if array.ndim == 0 else [float(v) for v in array]
    return values


StepHook = Callable[[TrainState], dict[str, float]]
"""Called with the state after every step; the metrics it returns join that step's record (in-loop eval, say)."""


def train(config: TrainConfig, output_path: str, hooks: Sequence[StepHook] = ()) -> TrainState:
    """Train to `config.num_steps`, resuming if `output_path` has checkpoints; write metrics and checkpoints."""
    output = Path(output_path)
    data = MixtureDataset(config.data)
    schedule = config.schedule.build()
    optimizer = build_optimizer(config)
    state = initial_state(config, optimizer, output)
    train_step = make_train_step(config, optimizer)
    flops_per_token = config.model.flops_per_token(config.data.seq_len)
    device = jax.devices()[0]
    metrics_log = MetricsLog(output / METRICS_FILE, resume_step=state.step)
    last_save, nonfinite = time.monotonic(), 0
    try:
        while state.step < config.num_steps:
            started = time.perf_counter()
            batch = data.batch(state.step)
            arrays = (jnp.asarray(batch.tokens), jnp.asarray(batch.segment_ids), jnp.asarray(batch.loss_mask))
            model, opt_state, ema, metrics = train_step(state.model, state.opt_state, state.ema, jnp.asarray(state.step, jnp.int32), *arrays)
            values = _scalars(metrics)
            elapsed = time.perf_counter() - started
            tokens_per_s = batch.tokens.size / elapsed
            extra = {name: value for hook in hooks for name, value in hook(TrainState(model, opt_state, ema, state.step + 1)).items()}
            metrics_log.write(
                {
                    "step": state.step,
                    **extra,
                    **values,
                    "lr": float(schedule.learning_rate(state.step)),
                    "phase": schedule.phase(state.step),
                    "batch_size": int(batch.tokens.shape[0]),
                    "tokens": config.tokens_before(state.step + 1),
                    "tokens_per_s": tokens_per_s,
                    "mfu": mfu(flops_per_token, tokens_per_s, device.device_kind, jax.device_count()),
                    "step_seconds": elapsed,
                }
            )
            nonfinite += not np.isfinite(values["loss"])
            if max(nonfinite, int(values.get("skip/nonfinite_steps", 0))) >= config.stability.max_nonfinite_steps:
                raise TootsieError(
                    f"{config.stability.max_nonfinite_steps} steps up to step {state.step} had a NaN/inf loss or gradient: the run is diverging; "
                    "resume from an earlier checkpoint with a lower learning rate or tighter max_grad_norm, and inspect those steps' batches"
                )
            state = TrainState(model, opt_state, ema, state.step + 1)
            if state.step % config.checkpoints.every_steps == 0 and state.step < config.num_steps:
                save_state(output, state, config, "permanent")
                last_save = time.monotonic()
            elif config.checkpoints.every_minutes is not None and time.monotonic() - last_save > 60 * config.checkpoints.every_minutes:
                save_state(output, state, config, "temporary")
                prune_temporary(output / CHECKPOINTS)
                last_save = time.monotonic()
        save_state(output, state, config, "permanent")
        prune_temporary(output / CHECKPOINTS)
    finally:
        metrics_log.close()
    return state
