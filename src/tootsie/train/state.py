"""The training state and where it comes from: resumed, warm-started or freshly initialized; and its checkpoints.

Design: all state that changes during training is (model, optimizer state,
EMA, step), plus the data windows skipped by rewinds (`train.rewind`). The
data position is a function of the step and those windows, because
`batch(step)` is stateless, and every rolling statistic of the stability tools
lives inside the optimizer state, so a checkpoint of those four and
`rewinds.json` resume a run to the bit.

Arrays live on a device mesh (`tootsie.train.sharding`): params, optimizer
state and EMA sharded by logical axis; on one device that is a 1 × 1 × 1 mesh.
Everything here is shared by the training loop, the memory planner, the
benchmarks and the recipes' plans, which import this module, never the loop.

Example: a pretrain run to step 300, then a cooldown config with
`warm_start=WarmStartConfig("<pretrain dir>")` and `num_steps=400`:
`initial_state` of the cooldown converts the pretrain run's newest checkpoint
(weights, Adam moments by parameter, EMA) and starts at step 300.
"""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from tootsie.configfile import to_plain
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
    start_checkpoint,
)
from tootsie.train.config import TrainConfig
from tootsie.train.loading import checkpoint_root, init_model, resolve_checkpoint
from tootsie.train.rewind import DataSkips
from tootsie.train.sharding import Layout, check_batch_sizes, make_layout, place
from tootsie.train.warm_start import carry_optimizer_state, warm_start_model

logger = logging.getLogger(__name__)


@dataclass
class TrainState:
    """Everything that changes during training."""

    model: eqx.Module
    opt_state: optax.OptState
    ema: Any
    step: int

    @property
    def arrays(self) -> tuple[eqx.Module, optax.OptState, Any]:
        """(model, optimizer state, EMA): the train step's first three arguments."""
        return self.model, self.opt_state, self.ema


def build_optimizer(config: TrainConfig) -> optax.GradientTransformationExtraArgs:
    """The configured optimizer wrapped in the configured stability tools."""
    return config.stability.wrap(config.optimizer.build(config.schedule.build().learning_rate))


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


def _init_params(model: Any, seed: int) -> Any:
    """The arrays of `model.build` (a model config); module-level so its jitted, sharded form compiles once."""
    return eqx.filter(model.build(key=jax.random.PRNGKey(seed)), eqx.is_array)


def _init_opt_state(optimizer: optax.GradientTransformation, params: Any, layout: Layout) -> optax.OptState:
    """A fresh optimizer state, created directly in its shardings."""
    return jax.jit(optimizer.init, out_shardings=layout.opt_state)(params)


def initial_state(
    config: TrainConfig,
    optimizer: optax.GradientTransformation,
    output: Path,
    layout: Layout,
    final_output: str | None = None,
) -> TrainState:
    """Resume from this run's newest checkpoint, else warm-start, else initialize; arrays placed as `layout` says.

    `final_output` is where the run's checkpoints live when it is not `output` (`loading.checkpoint_root`).
    """
    params, static, opt_state = abstract_state(config, optimizer)
    own = latest_checkpoint(checkpoint_root(output, final_output))
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
    config: TrainConfig, optimizer: optax.GradientTransformation, layout: Layout, template: eqx.Module
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
    output: Path,
    state: TrainState,
    config: TrainConfig,
    kind: str,
    skips: DataSkips = DataSkips(),
    final_output: str | None = None,
) -> Location:
    """Start checkpointing params, optimizer state, EMA, step, data position and model config; return its directory.

    Every process writes its own shards, in the background; the checkpoint
    counts once committed (`wait_for_checkpoints`, or the next save, waits for
    that), and then process 0 prunes superseded temporary checkpoints.
    """
    trees = {"model": eqx.filter(state.model, eqx.is_array), "opt_state": state.opt_state} | (
        {"ema": state.ema} if state.ema is not None else {}
    )
    root = checkpoint_root(output, final_output)
    record = {
        "tokens": config.tokens_before(state.step, skips),
        "data_step": skips.data_step(state.step),
        "kind": kind,
        "model": to_plain(config.model),
    }
    start_checkpoint(root, state.step, trees, record, on_commit=lambda: prune_temporary(root))
    return checkpoint_dir(root, state.step)
