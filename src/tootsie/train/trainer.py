"""The training loop: init or resume, `batch(step)`, jitted step, metrics, checkpoints.

Design: all state that changes during training is (model, optimizer state,
step). The data position is the step itself, because `batch(step)` is
stateless, so a checkpoint of those three resumes a run exactly. A run's output
directory holds `checkpoints/step-N/` and `metrics.jsonl`; running the same
config on the same directory again resumes from the newest checkpoint, and
`init_from` warm-starts a new run (a cooldown, say) from another run's newest
checkpoint, continuing its step count and schedule.

Example: a pretrain run to step 300 and a cooldown config with
`init_from=<pretrain dir>, num_steps=400` trains steps 300..399 on the
cooldown mixture, with the WSD decay of the shared schedule.
"""

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from tootsie.errors import TootsieError
from tootsie.data.mixture import Batch, MixtureDataset
from tootsie.models.llama import LlamaModel
from tootsie.monitor.metrics_log import MetricsLog
from tootsie.train.checkpoint import latest_checkpoint, load_checkpoint, prune_checkpoints, save_checkpoint
from tootsie.train.config import TrainConfig
from tootsie.train.loss import cast_floats, next_token_loss

logger = logging.getLogger(__name__)
CHECKPOINTS = "checkpoints"
METRICS_FILE = "metrics.jsonl"


@dataclass
class TrainState:
    """Everything that changes during training."""

    model: LlamaModel
    opt_state: optax.OptState
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


def load_model(config: TrainConfig, checkpoint: str) -> LlamaModel:
    """A model with weights from a checkpoint (or a training output directory's newest one)."""
    template = init_model(config)
    params, static = eqx.partition(template, eqx.is_array)
    trees, _ = load_checkpoint(resolve_checkpoint(checkpoint), {"model": params})
    return eqx.combine(trees["model"], static)


def make_train_step(config: TrainConfig, optimizer: optax.GradientTransformation):
    """The jitted step `(model, opt_state, batch arrays) -> (model, opt_state, metrics)`."""
    compute_dtype = jnp.dtype(config.compute_dtype)

    def loss_fn(model: LlamaModel, tokens: jax.Array, segment_ids: jax.Array, loss_mask: jax.Array):
        return next_token_loss(cast_floats(model, compute_dtype), tokens, segment_ids, loss_mask, config.z_loss_weight)

    @eqx.filter_jit(donate="all-except-first")
    def train_step(model: LlamaModel, opt_state: optax.OptState, tokens: jax.Array, segment_ids: jax.Array, loss_mask: jax.Array):
        (_, (cross_entropy, z_loss)), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(model, tokens, segment_ids, loss_mask)
        params = eqx.filter(model, eqx.is_array)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        model = eqx.apply_updates(model, updates)
        metrics = {"loss": cross_entropy, "z_loss": z_loss, "grad_norm": optax.tree.norm(grads), "update_norm": optax.tree.norm(updates)}
        return model, opt_state, metrics

    return train_step


def initial_state(config: TrainConfig, optimizer: optax.GradientTransformation, output: Path) -> TrainState:
    """Resume from this run's newest checkpoint, else warm-start from `init_from`, else initialize."""
    model = init_model(config)
    params, static = eqx.partition(model, eqx.is_array)
    opt_state = optimizer.init(params)
    source = latest_checkpoint(output / CHECKPOINTS)
    if source is None and config.init_from is not None:
        source = resolve_checkpoint(config.init_from)
    if source is None:
        return TrainState(model=model, opt_state=opt_state, step=0)
    trees, state = load_checkpoint(source, {"model": params, "opt_state": opt_state})
    logger.info("resuming from %s at step %d", source, state["step"])
    return TrainState(model=eqx.combine(trees["model"], static), opt_state=trees["opt_state"], step=int(state["step"]))


def save_state(output: Path, state: TrainState, config: TrainConfig) -> Path:
    """Checkpoint params, optimizer state and step under `output/checkpoints`."""
    trees = {"model": eqx.filter(state.model, eqx.is_array), "opt_state": state.opt_state}
    return save_checkpoint(output / CHECKPOINTS, state.step, trees, {"tokens": config.tokens_before(state.step)})


def _device_batch(batch: Batch) -> tuple[jax.Array, jax.Array, jax.Array]:
    return jnp.asarray(batch.tokens), jnp.asarray(batch.segment_ids), jnp.asarray(batch.loss_mask)


def train(config: TrainConfig, output_path: str) -> TrainState:
    """Train to `config.num_steps`, resuming if `output_path` has checkpoints; write metrics and checkpoints."""
    output = Path(output_path)
    data = MixtureDataset(config.data)
    schedule = config.schedule.build()
    optimizer = config.optimizer.build(schedule.learning_rate)
    state = initial_state(config, optimizer, output)
    train_step = make_train_step(config, optimizer)
    metrics_log = MetricsLog(output / METRICS_FILE, resume_step=state.step)
    try:
        while state.step < config.num_steps:
            started = time.perf_counter()
            batch = data.batch(state.step)
            model, opt_state, metrics = train_step(state.model, state.opt_state, *_device_batch(batch))
            values = {name: float(value) for name, value in metrics.items()}
            elapsed = time.perf_counter() - started
            metrics_log.write(
                {
                    "step": state.step,
                    **values,
                    "lr": float(schedule.learning_rate(state.step)),
                    "phase": schedule.phase(state.step),
                    "batch_size": int(batch.tokens.shape[0]),
                    "tokens": config.tokens_before(state.step + 1),
                    "tokens_per_s": batch.tokens.size / elapsed,
                    "step_seconds": elapsed,
                }
            )
            state = TrainState(model=model, opt_state=opt_state, step=state.step + 1)
            if not np.isfinite(values["loss"]):
                logger.warning("non-finite loss at step %d", state.step - 1)
            if state.step % config.checkpoint_every == 0 and state.step < config.num_steps:
                save_state(output, state, config)
                prune_checkpoints(output / CHECKPOINTS, keep_last=config.keep_checkpoints)
        save_state(output, state, config)
    finally:
        metrics_log.close()
    return state
