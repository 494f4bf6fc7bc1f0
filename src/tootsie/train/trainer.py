"""The training loop: init, resume or warm-start; jitted steps; metrics; checkpoints.

Design: all state that changes during training is (model, optimizer state,
EMA, step), plus the data windows skipped by rewinds. The data position is a
function of the step and those windows (`DataSkips.data_step`; the step
itself when nothing was skipped), because `batch(step)` is stateless, and
every rolling statistic of the stability tools lives inside the optimizer
state, so a checkpoint of those four and `rewinds.json` resume a run to the
bit. A run's output directory holds `checkpoints/step-N/`, `metrics.jsonl`
(plus any configured trackers' files), `rewinds.json` after a rewind and
`profile/` when `profile_steps` is set; running the same config on the same
directory again resumes from its newest checkpoint, and `warm_start` starts a
new run (a cooldown, an architecture switch) from another run's checkpoint.

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
from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.throughput import mfu
from tootsie.monitor.trackers import METRICS_FILE, open_trackers
from tootsie.train.checkpoint import fill_matching, latest_checkpoint, load_checkpoint, prune_temporary, read_tensors, save_checkpoint
from tootsie.train.config import TrainConfig
from tootsie.train.loss import cast_floats, next_token_loss
from tootsie.train.rewind import DataSkips, PlateauWatch, read_rewinds, record_rewind, rewind_event, rewind_fields, rewind_target, skips_of
from tootsie.train.stability import accumulate_gradients, adam_moment_norms, per_layer_update_norms, stability_metrics
from tootsie.train.warm_start import warm_start_model

logger = logging.getLogger(__name__)
CHECKPOINTS = "checkpoints"
PROFILE_DIR = "profile"


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


def save_state(output: Path, state: TrainState, config: TrainConfig, kind: str, skips: DataSkips = DataSkips()) -> Path:
    """Checkpoint params, optimizer state, EMA, step, data position and the model config under `output/checkpoints`."""
    trees = {"model": eqx.filter(state.model, eqx.is_array), "opt_state": state.opt_state} | ({"ema": state.ema} if state.ema is not None else {})
    record = {"tokens": config.tokens_before(state.step, skips), "data_step": skips.data_step(state.step), "kind": kind, "model": to_plain(config.model)}
    return save_checkpoint(output / CHECKPOINTS, state.step, trees, record)


def _scalars(metrics: dict[str, jax.Array]) -> dict[str, object]:
    values: dict[str, object] = {}
    for name, value in metrics.items():
        array = np.asarray(value)
        values[name] = float(array) if array.ndim == 0 else [float(v) for v in array]
    return values


StepHook = Callable[[TrainState], dict[str, float]]
"""Called with the state after every step; the metrics it returns join that step's record (in-loop eval, say)."""


class ProfileWindow:
    """A JAX profiler trace of the steps [a, b), written under `directory` in a form Perfetto opens."""

    def __init__(self, steps: tuple[int, int] | None, directory: Path) -> None:
        self.steps, self.directory = steps, directory
        self.active = self.done = False

    def before(self, step: int) -> None:
        """Start tracing if `step` is the first step inside the window (once per process)."""
        if self.steps is not None and not (self.active or self.done) and self.steps[0] <= step < self.steps[1]:
            jax.profiler.start_trace(str(self.directory), create_perfetto_trace=True)
            self.active = True

    def after(self, step: int) -> None:
        """Stop once the window's last step has finished (its metrics are on the host)."""
        if self.active and step + 1 >= self.steps[1]:
            self.stop()

    def stop(self) -> None:
        """Stop an active trace and write it (also when training fails inside the window)."""
        if self.active:
            jax.profiler.stop_trace()
            self.active, self.done = False, True
            logger.info("profiler trace of steps %s written under %s", self.steps, self.directory)


def _logged_records(output: Path) -> list[dict[str, object]]:
    """The logged records of this run (for the plateau watch), read back as a resume would."""
    return read_metrics(output / METRICS_FILE).records


def _try_rewind(config: TrainConfig, optimizer: optax.GradientTransformation, output: Path, spike: dict[str, object], step: int,
                events: list[dict[str, object]], skips: DataSkips) -> tuple[TrainState, list[dict[str, object]]] | None:
    """Go back to the newest checkpoint before a plateau spike found at `step`, recording the data it skips; None if it cannot."""
    if len(events) >= config.rewind.max_rewinds:
        logger.warning("loss plateau from step %d (found at step %d), but the run already rewound max_rewinds=%d times; training on",
                       spike["step"], step, config.rewind.max_rewinds)
        return None
    target = rewind_target(output / CHECKPOINTS, int(spike["step"]))
    if target is None:
        logger.warning("loss plateau from step %d (found at step %d), but no checkpoint precedes it; training on "
                       "(checkpoints.every_steps should be well below the spike horizon)", spike["step"], step)
        return None
    event = rewind_event(spike, step, target, skips)
    record_rewind(output, output / CHECKPOINTS, events, event)
    start, end = event["skipped_data_steps"]
    logger.warning("loss plateau from step %d (%.4g above %.4g), final at step %d: rewound to the checkpoint at step %d, skipping data steps [%d, %d)",
                   spike["step"], spike["height"], spike["baseline"], step, target, start, end)
    return initial_state(config, optimizer, output), [*events, event]


def train(config: TrainConfig, output_path: str, hooks: Sequence[StepHook] = ()) -> TrainState:
    """Train to `config.num_steps`, resuming if `output_path` has checkpoints; write metrics and checkpoints."""
    output = Path(output_path)
    data = MixtureDataset(config.data)
    schedule = config.schedule.build()
    optimizer = build_optimizer(config)
    resuming = latest_checkpoint(output / CHECKPOINTS) is not None
    state = initial_state(config, optimizer, output)
    events = read_rewinds(output) if resuming else []
    skips = skips_of(events)
    pending = rewind_fields(events[-1], len(events)) if events and events[-1]["to_step"] == state.step else {}
    train_step = make_train_step(config, optimizer)
    flops_per_token = config.model.flops_per_token(config.data.seq_len)
    device = jax.devices()[0]
    trackers = open_trackers(output, config.trackers, to_plain(config), state.step)
    watch = PlateauWatch(config.rewind, _logged_records(output)) if config.rewind is not None else None
    profiler = ProfileWindow(config.profile_steps, output / PROFILE_DIR)
    last_save, nonfinite = time.monotonic(), 0
    try:
        while state.step < config.num_steps:
            profiler.before(state.step)
            started = time.perf_counter()
            data_step = skips.data_step(state.step)
            batch = data.batch(data_step)
            arrays = (jnp.asarray(batch.tokens), jnp.asarray(batch.segment_ids), jnp.asarray(batch.loss_mask))
            with jax.profiler.StepTraceAnnotation("train", step_num=state.step):
                model, opt_state, ema, metrics = train_step(state.model, state.opt_state, state.ema, jnp.asarray(state.step, jnp.int32), *arrays)
                values = _scalars(metrics)
            elapsed = time.perf_counter() - started
            tokens_per_s = batch.tokens.size / elapsed
            extra = {name: value for hook in hooks for name, value in hook(TrainState(model, opt_state, ema, state.step + 1)).items()}
            record = {
                **pending,
                **extra,
                **values,
                "lr": float(schedule.learning_rate(state.step)),
                "phase": schedule.phase(state.step),
                "batch_size": int(batch.tokens.shape[0]),
                "data_step": data_step,
                "tokens": config.tokens_before(state.step + 1, skips),
                "tokens_per_s": tokens_per_s,
                "mfu": mfu(flops_per_token, tokens_per_s, device.device_kind, jax.device_count()),
                "step_seconds": elapsed,
            }
            trackers.log(record, state.step)
            profiler.after(state.step)
            pending = {}
            nonfinite += not np.isfinite(values["loss"])
            if max(nonfinite, int(values.get("skip/nonfinite_steps", 0))) >= config.stability.max_nonfinite_steps:
                raise TootsieError(
                    f"{config.stability.max_nonfinite_steps} steps up to step {state.step} had a NaN/inf loss or gradient: the run is diverging; "
                    "resume from an earlier checkpoint with a lower learning rate or tighter max_grad_norm, and inspect those steps' batches"
                )
            spike = watch.observe(state.step, values["loss"]) if watch is not None else None
            rewound = _try_rewind(config, optimizer, output, spike, state.step, events, skips) if spike is not None else None
            if rewound is not None:
                state, events = rewound
                skips, pending = skips_of(events), rewind_fields(events[-1], len(events))
                trackers.rewind(state.step)
                watch = PlateauWatch(config.rewind, _logged_records(output))
                continue
            state = TrainState(model, opt_state, ema, state.step + 1)
            if state.step % config.checkpoints.every_steps == 0 and state.step < config.num_steps:
                save_state(output, state, config, "permanent", skips)
                last_save = time.monotonic()
            elif config.checkpoints.every_minutes is not None and time.monotonic() - last_save > 60 * config.checkpoints.every_minutes:
                save_state(output, state, config, "temporary", skips)
                prune_temporary(output / CHECKPOINTS)
                last_save = time.monotonic()
        save_state(output, state, config, "permanent", skips)
        prune_temporary(output / CHECKPOINTS)
    finally:
        profiler.stop()
        trackers.close()
    return state
