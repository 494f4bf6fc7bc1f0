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

The learning rate is a function of the global step alone: before every update
the step sets the optimizer's schedule counts to it (the optimizer config's
`at_global_step`), so a warm start into another optimizer chain, or a skipped
step, cannot make the applied LR drift from the logged one. The loss is the
configured objective's (`tootsie.train.objectives`). Arrays live on a device mesh
(`tootsie.train.sharding`): params, optimizer state and EMA sharded by logical
axis, each batch split by rows; on one device that is a 1 × 1 × 1 mesh.

Example: a pretrain run to step 300, then a cooldown config with
`warm_start=WarmStartConfig("<pretrain dir>")` and `num_steps=400` trains steps
300..399 on the cooldown mixture with the decay of the shared schedule, from
the pretrain run's Adam moments even if the cooldown switches to AdamC.
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
from jax.sharding import NamedSharding, PartitionSpec

from tootsie.configfile import to_plain
from tootsie.data.mixture import MixtureDataset
from tootsie.errors import Preempted, TootsieError
from tootsie.models.activation_sharding import activation_sharding
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.monitor.throughput import mfu
from tootsie.monitor.trackers import Trackers, open_trackers
from tootsie.train.checkpoint import (
    Location,
    checkpoint_dir,
    fill_matching,
    is_tensor,
    latest_checkpoint,
    load_checkpoint,
    prune_temporary,
    read_checkpoint_state,
    read_tensors,
    remove_uncommitted,
    start_checkpoint,
    wait_for_checkpoints,
)
from tootsie.train.config import TrainConfig
from tootsie.train.loading import checkpoint_root, init_model, resolve_checkpoint
from tootsie.train.loss import cast_floats
from tootsie.train.preemption import StopSignal
from tootsie.train.rewind import (
    DataSkips,
    PlateauWatch,
    read_rewinds,
    record_rewind,
    rewind_event,
    rewind_fields,
    rewind_target,
    skips_of,
)
from tootsie.train.sharding import (
    Layout,
    agree,
    barrier,
    check_batch_sizes,
    global_batch,
    initialize_distributed,
    is_main_process,
    make_layout,
    place,
)
from tootsie.train.stability import accumulate_gradients, adam_moment_norms, per_layer_update_norms, stability_metrics
from tootsie.train.warm_start import carry_optimizer_state, warm_start_model

logger = logging.getLogger(__name__)
PROFILE_DIR = "profile"


@dataclass
class TrainState:
    """Everything that changes during training."""

    model: LlamaModel
    opt_state: optax.OptState
    ema: Any
    step: int


def _init_params(model: LlamaConfig, seed: int) -> LlamaModel:
    """`init_model`'s arrays; a module-level function so its jitted, sharded form is compiled once per process."""
    return eqx.filter(LlamaModel(model, key=jax.random.PRNGKey(seed)), eqx.is_array)


def build_optimizer(config: TrainConfig) -> optax.GradientTransformationExtraArgs:
    """The configured optimizer wrapped in the configured stability tools."""
    return config.stability.wrap(config.optimizer.build(config.schedule.build().learning_rate))


def make_train_step(config: TrainConfig, optimizer: optax.GradientTransformationExtraArgs, layout: Layout):
    """The jitted train step, keeping `layout`'s shardings.

    `(model, opt_state, ema, step, tokens, segments, mask) -> (model, opt_state, ema, metrics)`.
    """
    compute_dtype = jnp.dtype(config.compute_dtype)
    replicated = NamedSharding(layout.mesh, PartitionSpec())

    objective = config.objective

    def loss_fn(model: LlamaModel, tokens: jax.Array, segment_ids: jax.Array, loss_mask: jax.Array):
        with activation_sharding(layout.batch):  # batch rows stay split under FSDP (models.activation_sharding)
            return objective.loss(
                cast_floats(model, compute_dtype), tokens, segment_ids, loss_mask, config.z_loss_weight
            )

    value_and_grad = eqx.filter_value_and_grad(loss_fn, has_aux=True)

    @eqx.filter_jit(donate="all-except-first")
    def train_step(
        model: LlamaModel,
        opt_state: optax.OptState,
        ema: Any,
        step: jax.Array,
        tokens: jax.Array,
        segment_ids: jax.Array,
        loss_mask: jax.Array,
    ):
        if config.microbatches > 1:
            total, objective_metrics, grads = accumulate_gradients(
                value_and_grad,
                model,
                (tokens, segment_ids, loss_mask),
                config.microbatches,
                weight_fn=objective.batch_weight,
            )
        else:
            (total, objective_metrics), grads = value_and_grad(model, tokens, segment_ids, loss_mask)
        grads = jax.lax.with_sharding_constraint(grads, layout.params)
        params = eqx.filter(model, eqx.is_array)
        updates, opt_state = optimizer.update(
            grads, config.optimizer.at_global_step(opt_state, step), params, value=total
        )
        model = eqx.filter_shard(eqx.apply_updates(model, updates), layout.params)
        opt_state = jax.lax.with_sharding_constraint(opt_state, layout.opt_state)
        stability = stability_metrics(opt_state)
        if ema is not None:
            updated = config.ema.update(ema, eqx.filter(model, eqx.is_array), step)
            skipped = stability.get("skip/skipped", jnp.zeros((), jnp.float32)) > 0
            ema = jax.lax.with_sharding_constraint(
                jax.tree_util.tree_map(lambda old, new: jnp.where(skipped, old, new), ema, updated), layout.params
            )
        head = model.embed if model.lm_head is None else model.lm_head
        metrics = {
            **objective_metrics,
            "grad_norm": optax.tree.norm(grads),
            "update_norm": optax.tree.norm(updates),
            "lm_head_norm": optax.tree.norm(head),
            "layer_update_norms": per_layer_update_norms(updates),
            **stability,
            **adam_moment_norms(opt_state),
        }
        return model, opt_state, ema, jax.lax.with_sharding_constraint(metrics, replicated)

    return train_step


def abstract_state(config: TrainConfig, optimizer: optax.GradientTransformation) -> tuple[Any, Any, Any]:
    """(params, static part of the model, optimizer state) as shapes only: templates for layouts and restores.

    Nothing is allocated.
    """
    params, static = eqx.partition(eqx.filter_eval_shape(init_model, config), is_tensor)
    return params, static, jax.eval_shape(optimizer.init, params)


def build_layout(config: TrainConfig, optimizer: optax.GradientTransformation) -> Layout:
    """The mesh of `config.mesh` over every device and the shardings of this run's arrays on it."""
    mesh = config.mesh.build()
    check_batch_sizes(config.data.batch_schedule, mesh)
    params, _, opt_state = abstract_state(config, optimizer)
    return make_layout(mesh, params, opt_state)


def _init_opt_state(optimizer: optax.GradientTransformation, params: Any, layout: Layout) -> optax.OptState:
    """A fresh optimizer state, created directly in its shardings."""
    return jax.jit(optimizer.init, out_shardings=layout.opt_state)(params)


def initial_state(
    config: TrainConfig, optimizer: optax.GradientTransformation, output: Path, layout: Layout
) -> TrainState:
    """Resume from this run's newest checkpoint, else warm-start, else initialize; arrays placed as `layout` says."""
    params, static, opt_state = abstract_state(config, optimizer)
    own = latest_checkpoint(checkpoint_root(output))
    if own is not None:
        templates = {"model": params, "opt_state": opt_state} | ({"ema": params} if config.ema is not None else {})
        shardings = {"model": layout.params, "opt_state": layout.opt_state, "ema": layout.params}
        trees, state = load_checkpoint(own, templates, {name: shardings[name] for name in templates})
        logger.info("resuming from %s at step %d", own, state["step"])
        return TrainState(eqx.combine(trees["model"], static), trees["opt_state"], trees.get("ema"), int(state["step"]))
    if config.warm_start is not None:
        return warm_started_state(config, optimizer, layout, eqx.combine(params, static))
    params = jax.jit(_init_params, static_argnums=(0, 1), out_shardings=layout.params)(config.model, config.seed)
    ema = _copy(params) if config.ema is not None else None
    return TrainState(eqx.combine(params, static), _init_opt_state(optimizer, params, layout), ema, 0)


def warm_started_state(
    config: TrainConfig, optimizer: optax.GradientTransformation, layout: Layout, template: LlamaModel
) -> TrainState:
    """The state a warm start begins from: converted weights, the optimizer state, EMA, step.

    The optimizer state is matched by identity (moments by parameter).
    """
    warm = config.warm_start
    source = resolve_checkpoint(warm.checkpoint)
    model = warm_start_model(source, template, add_qk_norm=warm.add_qk_norm)
    params = place(eqx.filter(model, eqx.is_array), layout.params)
    opt_state = _init_opt_state(optimizer, params, layout)
    saved_opt = read_tensors(source, "opt_state") if warm.load_optimizer else None
    if saved_opt is not None:
        carried, fresh, unused = carry_optimizer_state(opt_state, saved_opt)
        opt_state = place(carried, layout.opt_state)
        logger.info(
            "warm start from %s: carried %d optimizer tensors",
            source,
            len(jax.tree_util.tree_leaves(opt_state)) - len(fresh),
        )
        if fresh or unused:
            logger.warning(
                "warm start from %s: %d optimizer tensors start fresh %s; %d saved ones unused %s",
                source,
                len(fresh),
                fresh,
                len(unused),
                unused[:4],
            )
    ema = None
    if config.ema is not None:
        saved_ema = None if warm.add_qk_norm else read_tensors(source, "ema")
        ema = _copy(params) if saved_ema is None else place(fill_matching(_copy(params), saved_ema)[0], layout.params)
    step = 0 if warm.reset_step else int(read_checkpoint_state(source)["step"])
    logger.info("warm start from %s at step %d", source, step)
    return TrainState(eqx.combine(params, template), opt_state, ema, step)


def _copy(tree: Any) -> Any:
    """Fresh buffers for every leaf (same shardings).

    A buffer donated to the step must not appear twice in its arguments.
    """
    return jax.tree_util.tree_map(jnp.copy, tree)


def save_state(
    output: Path, state: TrainState, config: TrainConfig, kind: str, skips: DataSkips = DataSkips()
) -> Location:
    """Start checkpointing params, optimizer state, EMA, step, data position and model config; return its directory.

    Every process writes its own shards, in the background; the checkpoint
    counts once committed (`wait_for_checkpoints`, or the next save, waits for
    that), and then process 0 prunes superseded temporary checkpoints.
    """
    trees = {"model": eqx.filter(state.model, eqx.is_array), "opt_state": state.opt_state} | (
        {"ema": state.ema} if state.ema is not None else {}
    )
    root = checkpoint_root(output)
    record = {
        "tokens": config.tokens_before(state.step, skips),
        "data_step": skips.data_step(state.step),
        "kind": kind,
        "model": to_plain(config.model),
    }
    start_checkpoint(root, state.step, trees, record, on_commit=lambda: prune_temporary(root))
    return checkpoint_dir(root, state.step)


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


def _try_rewind(
    config: TrainConfig,
    optimizer: optax.GradientTransformation,
    layout: Layout,
    output: Path,
    spike: dict[str, object],
    step: int,
    events: list[dict[str, object]],
    skips: DataSkips,
) -> tuple[TrainState, list[dict[str, object]]] | None:
    """Go back to the newest checkpoint before a plateau spike found at `step`, recording the data it skips.

    None if it cannot.
    """
    if len(events) >= config.rewind.max_rewinds:
        logger.warning(
            "loss plateau from step %d (found at step %d), but the "
            "run already rewound max_rewinds=%d times; training on",
            spike["step"],
            step,
            config.rewind.max_rewinds,
        )
        return None
    wait_for_checkpoints()
    target = rewind_target(checkpoint_root(output), int(spike["step"]))
    if target is None:
        logger.warning(
            "loss plateau from step %d (found at step %d), but no checkpoint precedes it; training on "
            "(checkpoints.every_steps should be well below the spike horizon)",
            spike["step"],
            step,
        )
        return None
    event = rewind_event(spike, step, target, skips)
    if is_main_process():
        record_rewind(output, checkpoint_root(output), events, event)
    barrier(f"rewind-{step}")
    start, end = event["skipped_data_steps"]
    logger.warning(
        "loss plateau from step %d (%.4g above %.4g), final at step %d: "
        "rewound to the checkpoint at step %d, skipping data steps [%d, %d)",
        spike["step"],
        spike["height"],
        spike["baseline"],
        step,
        target,
        start,
        end,
    )
    return initial_state(config, optimizer, output, layout), [*events, event]


def train_loop(
    config: TrainConfig, output_path: str, evaluation: StepHook | None = None, hooks: Sequence[StepHook] = ()
) -> TrainState:
    """Train to `config.num_steps`, resuming if `output_path` has checkpoints; write metrics and checkpoints.

    The loop of the train layer, which knows no evaluation: `evaluation` is the
    step hook that carries out `config.eval`, built by the one training entry
    point `tootsie.eval.training.run_training` (use that). A config with `eval`
    and no `evaluation`, or the reverse, is refused rather than half run.
    On several hosts every process calls this with the same arguments; process 0 writes the files.
    """
    if (config.eval is None) != (evaluation is None):
        mismatch = (
            "config.eval is set but no evaluation hook was given"
            if evaluation is None
            else "an evaluation hook was given but config.eval is None"
        )
        raise TootsieError(
            f"{mismatch}: train through tootsie.eval.training.run_training, "
            "which builds the evaluation from config.eval"
        )
    hooks = (evaluation, *hooks) if evaluation is not None else tuple(hooks)
    initialize_distributed(config.distributed)
    output = Path(output_path)
    data = MixtureDataset(config.data)
    schedule = config.schedule.build()
    optimizer = build_optimizer(config)
    if is_main_process():
        remove_uncommitted(checkpoint_root(output))
    barrier("checkpoints-cleaned")
    resuming = latest_checkpoint(checkpoint_root(output)) is not None
    layout = build_layout(config, optimizer)
    state = initial_state(config, optimizer, output, layout)
    events = read_rewinds(output) if resuming else []
    skips = skips_of(events)
    pending = rewind_fields(events[-1], len(events)) if events and events[-1]["to_step"] == state.step else {}
    train_step = make_train_step(config, optimizer, layout)
    flops_per_token = config.model.flops_per_token(config.data.seq_len)
    device = jax.devices()[0]
    trackers = (
        open_trackers(output, config.trackers, to_plain(config), state.step) if is_main_process() else Trackers(())
    )
    watch = PlateauWatch(config.rewind, _logged_records(output)) if config.rewind is not None else None
    profiler = ProfileWindow(config.profile_steps, output / PROFILE_DIR)
    last_save, nonfinite = time.monotonic(), 0
    stop = StopSignal()
    stop.install()
    try:
        while state.step < config.num_steps:
            profiler.before(state.step)
            started = time.perf_counter()
            data_step = skips.data_step(state.step)
            arrays = global_batch(data, data_step, layout.batch)
            with jax.profiler.StepTraceAnnotation("train", step_num=state.step):
                model, opt_state, ema, metrics = train_step(
                    state.model, state.opt_state, state.ema, jnp.asarray(state.step, jnp.int32), *arrays
                )
                values = _scalars(metrics)
            elapsed = time.perf_counter() - started
            tokens_per_s = arrays[0].size / elapsed
            extra = {
                name: value
                for hook in hooks
                for name, value in hook(TrainState(model, opt_state, ema, state.step + 1)).items()
            }
            record = {
                **pending,
                **extra,
                **values,
                "lr": float(schedule.learning_rate(state.step)),
                "phase": schedule.phase(state.step),
                "batch_size": int(arrays[0].shape[0]),
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
                    f"{config.stability.max_nonfinite_steps} steps up to step {state.step} had a NaN/inf "
                    "loss or gradient: the run is diverging; resume from an earlier checkpoint with a "
                    "lower learning rate or tighter max_grad_norm, and inspect those steps' batches"
                )
            spike = watch.observe(state.step, values["loss"]) if watch is not None else None
            rewound = (
                _try_rewind(config, optimizer, layout, output, spike, state.step, events, skips)
                if spike is not None
                else None
            )
            if rewound is not None:
                state, events = rewound
                skips, pending = skips_of(events), rewind_fields(events[-1], len(events))
                trackers.rewind(state.step)
                watch = PlateauWatch(config.rewind, _logged_records(output))
                continue
            state = TrainState(model, opt_state, ema, state.step + 1)
            saved = None
            if state.step % config.checkpoints.every_steps == 0 and state.step < config.num_steps:
                saved = save_state(output, state, config, "permanent", skips)
                last_save = time.monotonic()
            elif config.checkpoints.every_minutes is not None and agree(
                time.monotonic() - last_save > 60 * config.checkpoints.every_minutes
            ):
                saved = save_state(output, state, config, "temporary", skips)
                last_save = time.monotonic()
            if state.step < config.num_steps and stop.requested():
                saved = saved or save_state(output, state, config, "temporary", skips)
                raise Preempted(state.step, str(saved))
        save_state(output, state, config, "permanent", skips)
    finally:
        wait_for_checkpoints()
        stop.restore()
        profiler.stop()
        trackers.close()
    return state
