"""Optimizers as Optax transforms: a registry of AdamW, AdamC, NAdamW and Muon.

Every member is a frozen config whose `build(learning_rate)` returns an
`optax.GradientTransformationExtraArgs` (so the train step may pass
`value=loss` to any of them): global-norm gradient clipping first, then the
optimizer, with decoupled weight decay masked by parameter path.

Weight decay applies to weight matrices only: embeddings, every norm scale and
biases are left undecayed (decaying a norm's scale toward 0 fights the
normalization; decaying embeddings shrinks rare tokens). The mask is computed
from parameter paths, so it follows the model's field names (`embed`, `*_norm`).

Design note (Muon and stacked layers): the Llama model stores every block's
weights with a leading `num_layers` axis (`layers.attn.wq` is
`[num_layers, hidden, qdim]`). Muon must orthogonalize each layer's matrix,
not the `[num_layers * hidden, qdim]` flattening, so `muon_dimension_numbers`
gives leaves under `layers` the spec `MuonDimensionNumbers(reduction_axis=1,
output_axis=2)`; `optax.contrib.muon` treats every axis not named there as a
batch axis and vmaps the Newton-Schulz iteration over it. Embeddings, norms and
the lm_head go to a separately masked AdamW through `optax.partition`: the
AdamW fallback built into optax's Muon decays every leaf it gets (no mask), so
it is left with none.

Example: `OPTIMIZERS["adamc"](weight_decay=0.05).build(schedule.learning_rate)`
is the Bison cooldown's AdamC; at a step where the schedule is at half its peak
(the peak read off the schedule's `learning_rate.peak_lr`) the decay term is
`lr * 0.05 * 0.5 * p` instead of AdamW's `lr * 0.05 * p`. `OptimizerChoice`,
the type of `TrainConfig.optimizer`, is the union derived from `OPTIMIZERS`.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, Int

from tootsie.configfile import registry_union
from tootsie.train.schedule import LearningRate as ScheduleLearningRate

NO_DECAY_NAMES = ("embed", "norm", "bias")
"""Parameter-path substrings that get no weight decay."""
ADAM_ONLY_NAMES = (*NO_DECAY_NAMES, "lm_head", "router")
"""Parameter-path substrings Muon leaves to AdamW (vectors, lookups, the output head and MoE routers)."""
STACKED_NAMES = ("layers", "dense")
"""Parameter-path substrings whose leaves carry a leading num_layers axis."""

LearningRate = Callable[[Int[Array, ""]], Float[Array, ""]]


def _path_name(path: tuple[object, ...]) -> str:
    return jax.tree_util.keystr(path).lower()


def decay_mask(params: object) -> object:
    """True for leaves that get weight decay: everything but embeddings, norm scales and biases."""

    def decays(path: tuple[object, ...], _leaf: object) -> bool:
        names = _path_name(path)
        return not any(name in names for name in NO_DECAY_NAMES)

    return jax.tree_util.tree_map_with_path(decays, params)


def muon_dimension_numbers(params: object) -> object:
    """Muon's spec per leaf: per-layer matrix axes for weight matrices, None (→ AdamW) for the rest.

    A leaf under `layers` (or an MoE's leading `dense` blocks) is a matrix when
    it is 3-D (`[num_layers, in, out]`), or a stack of matrices when 4-D (an
    MoE's experts, `[num_layers, experts, in, out]`: one orthogonalisation per
    expert); any other leaf when it is 2-D (`[in, out]`). Embeddings, norms,
    biases, the lm_head and MoE routers are never Muon's, whatever their shape.
    """

    def spec(path: tuple[object, ...], leaf: jax.Array) -> optax.contrib.MuonDimensionNumbers | None:
        names = _path_name(path)
        if any(name in names for name in ADAM_ONLY_NAMES):
            return None
        stacked = any(name in names for name in STACKED_NAMES)
        if leaf.ndim not in ((3, 4) if stacked else (2,)):
            return None
        batch_axes = leaf.ndim - 2
        return optax.contrib.MuonDimensionNumbers(reduction_axis=batch_axes, output_axis=batch_axes + 1)

    return jax.tree_util.tree_map_with_path(spec, params)


def _clip(max_grad_norm: float | None) -> list[optax.GradientTransformation]:
    return [] if max_grad_norm is None else [optax.clip_by_global_norm(max_grad_norm)]


def _check_adam_fields(config: "AdamWConfig | MuonConfig") -> None:
    """Validation shared by the Adam-family configs (fields weight_decay, beta1, beta2, epsilon, max_grad_norm)."""
    weight_decay, beta1, beta2 = config.weight_decay, config.beta1, config.beta2
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
        raise ValueError(f"betas must be in [0, 1), got {beta1=}, {beta2=}")
    if config.epsilon <= 0:
        raise ValueError(f"epsilon must be positive, got {config.epsilon}")
    if config.max_grad_norm is not None and config.max_grad_norm <= 0:
        raise ValueError(f"max_grad_norm must be positive or None, got {config.max_grad_norm}")


def _masked_adam_args(config: "AdamWConfig | MuonConfig") -> dict[str, Any]:
    """optax.adamw/nadamw keyword arguments from a config's Adam fields, decay masked by `decay_mask`."""
    return {
        "b1": config.beta1,
        "b2": config.beta2,
        "eps": config.epsilon,
        "weight_decay": config.weight_decay,
        "mask": decay_mask,
    }


class ScheduledByGlobalStep:
    """Base of every optimizer config: which of its states count the steps an LR schedule reads, and how to set them.

    The train step calls `at_global_step` before every update, so the LR applied
    is always `schedule(global step)`: without it the schedule would read the
    optimizer's own update count, which restarts at 0 when a warm start changes
    the optimizer chain and stands still on skipped steps, while the logged `lr`
    follows the global step. Each optimizer lists its own schedule-reading states.
    """

    schedule_states: ClassVar[tuple[type, ...]] = (optax.ScaleByScheduleState,)

    def at_global_step(self, opt_state: optax.OptState, step: Int[Array, ""]) -> optax.OptState:
        """`opt_state` with the `count` of every state in `schedule_states` set to the global `step`."""
        states = self.schedule_states

        def align(node: Any) -> Any:
            return node._replace(count=jnp.asarray(step, node.count.dtype)) if isinstance(node, states) else node

        return jax.tree_util.tree_map(align, opt_state, is_leaf=lambda node: isinstance(node, states))


@dataclass(frozen=True)
class AdamWConfig(ScheduledByGlobalStep):
    """AdamW hyperparameters and the gradient clipping in front of it."""

    weight_decay: float = 0.1
    """Decoupled weight decay on weight matrices (0.05 in the 32B run); the step applies `lr * weight_decay * p`."""
    beta1: float = 0.9
    """First-moment decay."""
    beta2: float = 0.95
    """Second-moment decay."""
    epsilon: float = 1e-8
    """Adam denominator epsilon."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this (0.2 in the 32B run from step ~56.4k); None turns clipping off."""

    def __post_init__(self) -> None:
        _check_adam_fields(self)

    def build(self, learning_rate: LearningRate) -> optax.GradientTransformationExtraArgs:
        """The optimizer for a learning-rate schedule."""
        return optax.chain(*_clip(self.max_grad_norm), optax.adamw(learning_rate, **_masked_adam_args(self)))


class LRScaledDecayState(NamedTuple):
    """Step count (aligned with the schedule's) and the largest learning rate seen so far."""

    count: Int[Array, ""]
    peak_lr: Float[Array, ""]


def add_lr_scaled_decay(
    weight_decay: float, learning_rate: LearningRate, mask: object = None
) -> optax.GradientTransformation:
    """Add `weight_decay * lr(t) / peak_lr * p` to the updates (AdamC's corrected decay, before the lr scaling).

    `peak_lr` is the schedule's own (`learning_rate.peak_lr` of a built
    schedule), so the decay also shrinks during warmup, as in AdamC. A bare
    function carries no peak; then it is the running maximum of `lr(t)` kept
    in the state, so the factor is 1 through warmup and the stable phase and
    follows the decay down.
    """
    peak_lr = learning_rate.peak_lr if isinstance(learning_rate, ScheduleLearningRate) else None

    def init_fn(params: object) -> LRScaledDecayState:
        del params
        return LRScaledDecayState(count=jnp.zeros([], jnp.int32), peak_lr=jnp.zeros([], jnp.float32))

    def update_fn(
        updates: optax.Updates, state: LRScaledDecayState, params: optax.Params | None = None
    ) -> tuple[optax.Updates, LRScaledDecayState]:
        if params is None:
            raise ValueError(
                "AdamC's weight decay needs the parameters: call optimizer.update(grads, opt_state, params)"
            )
        lr = jnp.asarray(learning_rate(state.count), jnp.float32)
        peak = jnp.maximum(state.peak_lr, lr) if peak_lr is None else jnp.asarray(peak_lr, jnp.float32)
        factor = jnp.where(peak > 0, lr / jnp.where(peak > 0, peak, 1.0), 0.0)
        scale = weight_decay * factor
        updates = jax.tree.map(lambda g, p: g + (scale * p).astype(g.dtype), updates, params)
        return updates, LRScaledDecayState(
            count=optax.safe_increment(state.count), peak_lr=jnp.maximum(state.peak_lr, lr)
        )

    decay = optax.GradientTransformation(init_fn, update_fn)
    return decay if mask is None else optax.masked(decay, mask)


@dataclass(frozen=True)
class AdamCConfig(AdamWConfig):
    """AdamW with corrected weight decay `weight_decay * lr(t) / peak_lr` (AdamC, Defazio 2025, arXiv:2506.02285).

    Under a decaying learning rate, AdamW's equilibrium weight norm drifts
    (and gradient norms grow near the end of training); scaling the decay by
    `lr(t) / peak_lr` keeps it steady. The 32B Bison/Mantis cooldowns used it.
    Fields (and their order) as AdamW's.
    """

    schedule_states: ClassVar[tuple[type, ...]] = (optax.ScaleByScheduleState, LRScaledDecayState)
    """AdamC's decay factor `lr(t) / peak_lr` also reads the schedule at its own count."""

    weight_decay: float = 0.1
    """Decay at the peak LR; the step applies `lr * weight_decay * lr / peak_lr * p`, peak_lr the schedule's."""

    def build(self, learning_rate: LearningRate) -> optax.GradientTransformationExtraArgs:
        """The optimizer for a learning-rate schedule."""
        return optax.chain(
            *_clip(self.max_grad_norm),
            optax.scale_by_adam(b1=self.beta1, b2=self.beta2, eps=self.epsilon),
            add_lr_scaled_decay(self.weight_decay, learning_rate, mask=decay_mask),
            optax.scale_by_learning_rate(learning_rate),
        )


@dataclass(frozen=True)
class NAdamWConfig(AdamWConfig):
    """AdamW with Nesterov momentum (`optax.nadamw`), the 32B exp1388 restart; fields as AdamW's."""

    beta1: float = 0.95
    """First-moment decay (0.95 — exp1388_nadamw32b)."""

    def build(self, learning_rate: LearningRate) -> optax.GradientTransformationExtraArgs:
        """The optimizer for a learning-rate schedule."""
        return optax.chain(*_clip(self.max_grad_norm), optax.nadamw(learning_rate, **_masked_adam_args(self)))


@dataclass(frozen=True)
class MuonConfig(ScheduledByGlobalStep):
    """Muon (`optax.contrib.muon`) on per-layer weight matrices, masked AdamW on everything else."""

    muon_lr_ratio: float = 1.0
    """Muon's learning rate as a multiple of the schedule (exp1380 ran Muon at 2e-3 against AdamW's 7e-4 peak)."""
    momentum: float = 0.95
    """Muon's momentum (0.95 — Keller Jordan's default, also optax's)."""
    ns_steps: int = 5
    """Newton-Schulz iterations per orthogonalization."""
    consistent_rms: float | None = 0.2
    """Scale Muon updates to this RMS (0.2 matches AdamW's, Liu et al. 2025), so AdamW's schedule transfers.

    None: width scaling.
    """
    weight_decay: float = 0.1
    """Decoupled weight decay on weight matrices, both branches."""
    beta1: float = 0.9
    """AdamW first-moment decay (embeddings, norms, lm_head)."""
    beta2: float = 0.95
    """AdamW second-moment decay."""
    epsilon: float = 1e-8
    """AdamW epsilon (and Muon's normalization epsilon)."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; None turns clipping off."""

    def __post_init__(self) -> None:
        _check_adam_fields(self)
        if self.muon_lr_ratio <= 0:
            raise ValueError(f"muon_lr_ratio must be positive, got {self.muon_lr_ratio}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.ns_steps < 1:
            raise ValueError(f"ns_steps must be >= 1, got {self.ns_steps}")
        if self.consistent_rms is not None and self.consistent_rms <= 0:
            raise ValueError(f"consistent_rms must be positive or None, got {self.consistent_rms}")

    def build(self, learning_rate: LearningRate) -> optax.GradientTransformationExtraArgs:
        """The optimizer for a learning-rate schedule."""
        ratio = self.muon_lr_ratio

        def muon_lr(count: Int[ArrayLike, ""]) -> Float[ArrayLike, ""]:
            return ratio * learning_rate(count)

        # Inside the partition every unmasked leaf is a Muon matrix, so optax's Muon
        # sends nothing to its own (unmasked-decay) AdamW branch.
        muon = optax.contrib.muon(
            muon_lr,
            ns_steps=self.ns_steps,
            beta=self.momentum,
            eps=self.epsilon,
            weight_decay=self.weight_decay,
            muon_weight_dimension_numbers=muon_dimension_numbers,
            consistent_rms=self.consistent_rms,
        )
        adamw = optax.adamw(learning_rate, **_masked_adam_args(self))

        def labels(params: object) -> object:
            return jax.tree.map(
                lambda spec: "adamw" if spec is None else "muon",
                muon_dimension_numbers(params),
                is_leaf=lambda x: x is None or isinstance(x, optax.contrib.MuonDimensionNumbers),
            )

        return optax.chain(*_clip(self.max_grad_norm), optax.partition({"muon": muon, "adamw": adamw}, labels))


OPTIMIZERS: dict[str, type] = {"adamw": AdamWConfig, "adamc": AdamCConfig, "nadamw": NAdamWConfig, "muon": MuonConfig}
OptimizerChoice = registry_union(OPTIMIZERS)
"""Any registered optimizer config (the union of `OPTIMIZERS`' classes), written `{kind: NAME, ...}` in config files."""
