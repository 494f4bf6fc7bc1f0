"""The jitted train step: loss and gradients, optimizer update, EMA, and the step's metrics.

The learning rate is a function of the global step alone: before every update
the step sets the optimizer's schedule counts to it (the optimizer config's
`at_global_step`), so a warm start into another optimizer chain, or a skipped
step, cannot make the applied LR drift from the logged one. The loss is the
configured objective's (`tootsie.train.objectives`).

Metrics leave the step as one replicated dict of arrays, read on the host
once per step (`host_metrics`), so values computed inside the jitted step
reach the record without host callbacks: the objective's own metrics dict
(`loss`, `z_loss`, and auxiliary values under `aux/`, e.g. `aux/log_z` and the
attention- and output-logit maxima, and MoE router loads) joins the norms
(`grad_norm`, `update_norm`, `lm_head_norm`, `embed_norm`) and stability
signals computed here.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from tootsie.models.activation_sharding import activation_sharding
from tootsie.train.config import TrainConfig
from tootsie.train.loss import cast_floats
from tootsie.train.sharding import Layout
from tootsie.train.stability import accumulate_gradients, adam_moment_norms, per_layer_update_norms, stability_metrics


def make_train_step(config: TrainConfig, optimizer: optax.GradientTransformationExtraArgs, layout: Layout):
    """The jitted train step, keeping `layout`'s shardings.

    `(model, opt_state, ema, step, tokens, segments, mask, *extra) -> (model, opt_state, ema, metrics)`, where
    `extra` are the batch's arrays of the objective's `fields`, passed to its loss by name.
    """
    compute_dtype = jnp.dtype(config.compute_dtype)
    replicated = NamedSharding(layout.mesh, PartitionSpec())

    objective = config.objective

    def loss_fn(model: eqx.Module, tokens: jax.Array, segment_ids: jax.Array, loss_mask: jax.Array, *extra: jax.Array):
        with activation_sharding(layout.batch):  # batch rows stay split under FSDP (models.activation_sharding)
            return objective.loss(
                cast_floats(model, compute_dtype),
                tokens,
                segment_ids,
                loss_mask,
                config.z_loss_weight,
                **dict(zip(objective.fields, extra)),
            )

    def batch_weight(tokens: jax.Array, segment_ids: jax.Array, loss_mask: jax.Array, *extra: jax.Array):
        return objective.batch_weight(tokens, segment_ids, loss_mask, **dict(zip(objective.fields, extra)))

    value_and_grad = eqx.filter_value_and_grad(loss_fn, has_aux=True)

    @eqx.filter_jit(donate="all-except-first")
    def train_step(
        model: eqx.Module,
        opt_state: optax.OptState,
        ema: Any,
        step: jax.Array,
        tokens: jax.Array,
        segment_ids: jax.Array,
        loss_mask: jax.Array,
        *extra: jax.Array,
    ):
        batch = (tokens, segment_ids, loss_mask, *extra)
        if config.microbatches > 1:
            total, objective_metrics, grads = accumulate_gradients(
                value_and_grad, model, batch, config.microbatches, weight_fn=batch_weight
            )
        else:
            (total, objective_metrics), grads = value_and_grad(model, *batch)
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
            "embed_norm": optax.tree.norm(model.embed),
            "layer_update_norms": per_layer_update_norms(updates),
            **stability,
            **adam_moment_norms(opt_state),
        }
        return model, opt_state, ema, jax.lax.with_sharding_constraint(metrics, replicated)

    return train_step


def host_metrics(metrics: dict[str, jax.Array]) -> dict[str, object]:
    """The step's metrics on the host: a float per scalar, nested lists per array (`[layers][experts]` loads)."""
    return {name: np.asarray(value, dtype=np.float64).tolist() for name, value in metrics.items()}
