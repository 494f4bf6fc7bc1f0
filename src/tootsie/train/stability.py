"""Stability tools for long runs: update-norm clipping, bad-step skipping, and the numbers to log.

These are the optimizer-level mitigations of the Marin 32B run (clip-update-norm
with σ=2 over a rolling 128 steps, skip bad steps), written as Optax transforms
with NamedTuple state so they compose with any optimizer of the registry and
run inside a jitted train step. Each records what it did in its state;
`stability_metrics(opt_state)` reads those records from any optimizer-state
tree, so the trainer logs them without knowing which tools are on.

Design note: the order is `skip_bad_steps(chain(optimizer, clip_update_norm))`.
Gradient clipping (in the optimizer) bounds Adam's input, update clipping
bounds the step actually taken, and skipping drops the step entirely while
leaving every inner state (moments, schedule counts, the update-norm history)
as it was. Histories use masked mean/σ over a ring buffer and only start
acting after `min_history` entries (window // 2, Levanter's choice).

Worked example: with `window=4, k_sigma=2, min_history=4` and past update norms
1.0, 1.2, 0.8, 1.0 (mean 1.0, σ ≈ 0.141), the threshold is 1.283; an update of
norm 3.0 is scaled by 1.283 / 3.0, its state says `clipped=True`, and 3.0
(the pre-clip norm) enters the history, as in Levanter.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int

from tootsie.errors import TootsieError

STD_FLOOR = 1e-6
"""Smallest σ used in a threshold, so a flat history does not clip everything (Levanter's floor)."""


def _history_threshold(history: Float[Array, " window"], count: Int[Array, ""], k_sigma: float) -> Float[Array, ""]:
    """mean + k·σ over the first `count` entries of a ring buffer (0 when it is empty)."""
    valid = jnp.arange(history.shape[0]) < count
    n = jnp.maximum(count, 1).astype(jnp.float32)
    mean = jnp.sum(jnp.where(valid, history, 0.0)) / n
    var = jnp.sum(jnp.where(valid, jnp.square(history - mean), 0.0)) / n
    return mean + k_sigma * jnp.maximum(jnp.sqrt(var), STD_FLOOR)


def _push(
    history: Float[Array, " window"],
    count: Int[Array, ""],
    index: Int[Array, ""],
    value: Float[Array, ""],
    keep: Bool[Array, ""],
):
    """Write `value` at `index` when `keep`; returns (history, count, index)."""
    window = history.shape[0]
    history = jnp.where(keep, history.at[index].set(value), history)
    count = jnp.where(keep, jnp.minimum(count + 1, window), count)
    index = jnp.where(keep, (index + 1) % window, index)
    return history, count, index


def _check_window(window: int, k_sigma: float, min_history: int | None) -> int:
    if window < 2:
        raise ValueError(f"window must be >= 2, got {window}")
    if k_sigma <= 0:
        raise ValueError(f"k_sigma must be positive, got {k_sigma}")
    resolved = max(2, window // 2) if min_history is None else min_history
    if not 2 <= resolved <= window:
        raise ValueError(f"min_history must be in [2, window={window}], got {resolved}")
    return resolved


class ClipUpdateNormState(NamedTuple):
    """Ring buffer of past pre-clip update norms, and what the last step did."""

    history: Float[Array, " window"]
    count: Int[Array, ""]
    index: Int[Array, ""]
    last_norm: Float[Array, ""]
    """Global norm of the last update before clipping."""
    threshold: Float[Array, ""]
    """mean + k·σ of the history the last update was held to (inf while the history is short)."""
    clipped: Bool[Array, ""]
    """Whether the last update was scaled down."""


def clip_update_norm(
    window: int = 128, k_sigma: float = 2.0, min_history: int | None = None
) -> optax.GradientTransformation:
    """Scale an update down to mean + k·σ of the last `window` update norms when it exceeds that.

    The history holds every finite PRE-clip norm, clipped steps included —
    Levanter's rule ("use the unclipped global norm as the history to prevent
    collapse"), which the 32B run used: recording clipped norms would let the
    threshold ratchet down; the cost is that an outlier loosens the threshold
    for the next `window` steps. Non-finite norms never enter the history.
    No clipping until the history holds `min_history` norms (default window // 2).
    """
    min_count = _check_window(window, k_sigma, min_history)

    def init_fn(params: optax.Params) -> ClipUpdateNormState:
        del params
        zero = jnp.zeros([], jnp.float32)
        return ClipUpdateNormState(
            jnp.zeros([window], jnp.float32),
            jnp.zeros([], jnp.int32),
            jnp.zeros([], jnp.int32),
            zero,
            jnp.full([], jnp.inf, jnp.float32),
            jnp.zeros([], bool),
        )

    def update_fn(
        updates: optax.Updates, state: ClipUpdateNormState, params: optax.Params | None = None
    ) -> tuple[optax.Updates, ClipUpdateNormState]:
        del params
        norm = optax.tree.norm(updates).astype(jnp.float32)
        threshold = jnp.where(
            state.count >= min_count, _history_threshold(state.history, state.count, k_sigma), jnp.inf
        )
        clipped = norm > threshold
        scale = jnp.where(clipped, threshold / jnp.where(clipped, norm, 1.0), 1.0)
        updates = jax.tree.map(lambda u: u * scale.astype(u.dtype), updates)
        history, count, index = _push(state.history, state.count, state.index, norm, jnp.isfinite(norm))
        return updates, ClipUpdateNormState(history, count, index, norm, threshold, clipped)

    return optax.GradientTransformation(init_fn, update_fn)


class SkipBadStepsState(NamedTuple):
    """The wrapped optimizer's state, histories of good steps, and skip counts."""

    inner_state: optax.OptState
    losses: Float[Array, " window"]
    grad_norms: Float[Array, " window"]
    count: Int[Array, ""]
    index: Int[Array, ""]
    consecutive_skips: Int[Array, ""]
    """Outlier skips in a row (non-finite steps excluded); reaching the limit resets the history."""
    skipped: Bool[Array, ""]
    """Whether the last step was skipped (zero update, inner state kept)."""
    skipped_steps: Int[Array, ""]
    """Steps skipped so far, for any reason."""
    nonfinite_steps: Int[Array, ""]
    """Steps skipped because the loss, gradient norm or update norm was NaN or inf."""
    loss_threshold: Float[Array, ""]
    grad_norm_threshold: Float[Array, ""]


def skip_bad_steps(
    inner: optax.GradientTransformation,
    window: int = 128,
    k_sigma: float = 6.0,
    min_history: int | None = None,
    max_consecutive_skips: int = 16,
) -> optax.GradientTransformationExtraArgs:
    """Wrap `inner` so an outlier or non-finite step returns zero updates and leaves `inner`'s state untouched.

    `update(grads, state, params, value=loss)`: the step is skipped when the
    loss or the gradient norm exceeds mean + k·σ of the last `window` GOOD
    steps (once `min_history` are recorded), or when the loss, gradient norm
    or inner update norm is non-finite. Skipped steps do not enter the
    history. `max_consecutive_skips` finite outliers in a row are read as a
    level shift (a new data mix, a warm start), not a bad batch: the history
    is cleared and rebuilt, so the run cannot lock itself out (Levanter instead
    records skipped values too). Defaults are Levanter's SkipStepConfig
    (window 128, 6σ, history of window // 2 before acting). Skipping freezes
    the inner schedule count too, so the optimizer's learning rate lags the
    global step by `skipped_steps` unless the caller realigns the counts (the
    trainer does, the optimizer config's `at_global_step`).
    """
    min_count = _check_window(window, k_sigma, min_history)
    if max_consecutive_skips < 1:
        raise ValueError(f"max_consecutive_skips must be >= 1, got {max_consecutive_skips}")
    inner = optax.with_extra_args_support(inner)

    def init_fn(params: optax.Params) -> SkipBadStepsState:
        zeros, int0 = jnp.zeros([window], jnp.float32), jnp.zeros([], jnp.int32)
        inf = jnp.full([], jnp.inf, jnp.float32)
        return SkipBadStepsState(
            inner.init(params), zeros, zeros, int0, int0, int0, jnp.zeros([], bool), int0, int0, inf, inf
        )

    def update_fn(
        updates: optax.Updates,
        state: SkipBadStepsState,
        params: optax.Params | None = None,
        *,
        value: Float[Array, ""] | None = None,
        **extra_args: Any,
    ):
        if value is None:
            raise ValueError(
                "skip_bad_steps needs the loss: call optimizer.update(grads, opt_state, params, value=loss)"
            )
        loss, grad_norm = jnp.asarray(value, jnp.float32), optax.tree.norm(updates).astype(jnp.float32)
        new_updates, new_inner = inner.update(updates, state.inner_state, params, value=value, **extra_args)
        nonfinite = ~(jnp.isfinite(loss) & jnp.isfinite(grad_norm) & jnp.isfinite(optax.tree.norm(new_updates)))
        ready = state.count >= min_count
        loss_threshold = jnp.where(ready, _history_threshold(state.losses, state.count, k_sigma), jnp.inf)
        grad_threshold = jnp.where(ready, _history_threshold(state.grad_norms, state.count, k_sigma), jnp.inf)
        outlier = ~nonfinite & ((loss > loss_threshold) | (grad_norm > grad_threshold))
        consecutive = jnp.where(outlier, state.consecutive_skips + 1, jnp.where(nonfinite, state.consecutive_skips, 0))
        level_shift = consecutive >= max_consecutive_skips
        skip = nonfinite | (outlier & ~level_shift)
        # A level shift restarts the histories from this step.
        count, index = jnp.where(level_shift, 0, state.count), jnp.where(level_shift, 0, state.index)
        losses, _, _ = _push(state.losses, count, index, loss, ~skip)
        grad_norms, count, index = _push(state.grad_norms, count, index, grad_norm, ~skip)
        out_updates = jax.tree.map(lambda u: jnp.where(skip, jnp.zeros_like(u), u), new_updates)
        out_inner = optax.tree.where(skip, state.inner_state, new_inner)
        return out_updates, SkipBadStepsState(
            inner_state=out_inner,
            losses=losses,
            grad_norms=grad_norms,
            count=count,
            index=index,
            consecutive_skips=jnp.where(level_shift, 0, consecutive),
            skipped=skip,
            skipped_steps=state.skipped_steps + skip.astype(jnp.int32),
            nonfinite_steps=state.nonfinite_steps + nonfinite.astype(jnp.int32),
            loss_threshold=loss_threshold,
            grad_norm_threshold=grad_threshold,
        )

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


@dataclass(frozen=True)
class StabilityConfig:
    """Which stability tools wrap the optimizer: by default none, a plain run.

    Switched on, each tool's settings default to where they come from: update
    clipping to the 32B run's (rolling 128, 2σ), skipping to Levanter's
    SkipStepConfig (128, 6σ). The 32B run's own settings, which tightened the
    skip to 2σ and changed over its phases, are the constants of
    `tootsie.recipes.marin.tables_32b`, used by experiments/marin_32b.py.
    """

    clip_update_window: int | None = None
    """Steps of update-norm history; None (the default) turns update clipping off (128 in the 32B run)."""
    clip_update_sigma: float = 2.0
    """Clip updates above mean + this many σ (2.0 — 32B run)."""
    skip_bad_steps: bool = False
    """Skip steps whose loss or gradient norm is an outlier, or non-finite.

    Off by default; on in the 32B run from step 72,233.
    """
    skip_window: int = 128
    """Steps of loss / gradient-norm history (128 — Levanter's SkipStepConfig default, also the 32B run's)."""
    skip_sigma: float = 6.0
    """Skip above mean + this many σ (6.0 — Levanter's SkipStepConfig default; the 32B run used 2.0)."""
    max_consecutive_skips: int = 16
    """Outlier skips in a row read as a level shift, which resets the skip history.

    16 — our choice: bad batches come alone.
    """
    max_nonfinite_steps: int = 8
    """`check_nonfinite_steps` raises once this many steps had NaN/inf loss, gradients or updates (8 — our choice)."""

    def __post_init__(self) -> None:
        if self.clip_update_window is not None:
            _check_window(self.clip_update_window, self.clip_update_sigma, None)
        _check_window(self.skip_window, self.skip_sigma, None)
        if self.max_consecutive_skips < 1:
            raise ValueError(f"max_consecutive_skips must be >= 1, got {self.max_consecutive_skips}")
        if self.max_nonfinite_steps < 1:
            raise ValueError(f"max_nonfinite_steps must be >= 1, got {self.max_nonfinite_steps}")

    def wrap(self, optimizer: optax.GradientTransformation) -> optax.GradientTransformationExtraArgs:
        """`skip_bad_steps(chain(optimizer, clip_update_norm))`, each part only when switched on."""
        wrapped = optimizer
        if self.clip_update_window is not None:
            wrapped = optax.chain(wrapped, clip_update_norm(self.clip_update_window, self.clip_update_sigma))
        if self.skip_bad_steps:
            return skip_bad_steps(
                wrapped, self.skip_window, self.skip_sigma, max_consecutive_skips=self.max_consecutive_skips
            )
        return optax.with_extra_args_support(wrapped)


def _find(tree: object, kind: type) -> list[Any]:
    """Every node of type `kind` in a pytree, outermost first (nested ones included)."""
    found = []
    for node in jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, kind)):
        if isinstance(node, kind):
            found.append(node)
    return found


def stability_metrics(opt_state: optax.OptState) -> dict[str, Float[Array, ""]]:
    """What the stability transforms in `opt_state` did on the last step (empty when none are on)."""
    metrics: dict[str, Float[Array, ""]] = {}
    for state in _find(opt_state, ClipUpdateNormState)[:1]:
        metrics["clip_update/clipped"] = state.clipped.astype(jnp.float32)
        metrics["clip_update/pre_clip_norm"] = state.last_norm
        metrics["clip_update/threshold"] = state.threshold
    for state in _find(opt_state, SkipBadStepsState)[:1]:
        metrics["skip/skipped"] = state.skipped.astype(jnp.float32)
        metrics["skip/skipped_steps"] = state.skipped_steps.astype(jnp.float32)
        metrics["skip/nonfinite_steps"] = state.nonfinite_steps.astype(jnp.float32)
        metrics["skip/loss_threshold"] = state.loss_threshold
        metrics["skip/grad_norm_threshold"] = state.grad_norm_threshold
    return metrics


def nonfinite_steps(opt_state: optax.OptState) -> int:
    """Steps skipped as non-finite so far (0 without `skip_bad_steps`); reads device values, call outside jit."""
    return sum(int(state.nonfinite_steps) for state in _find(opt_state, SkipBadStepsState))


def check_nonfinite_steps(opt_state: optax.OptState, max_nonfinite_steps: int, step: int) -> None:
    """Raise once `max_nonfinite_steps` steps have been non-finite: the run is diverging, not unlucky."""
    seen = nonfinite_steps(opt_state)
    if seen >= max_nonfinite_steps:
        raise TootsieError(
            f"{seen} steps up to step {step} had a NaN/inf loss, gradient or update ({max_nonfinite_steps=}); "
            "they were skipped, but the run is diverging: resume from an earlier checkpoint with a lower "
            "learning rate or tighter max_grad_norm, and check the batches of those steps"
        )


def adam_moment_norms(opt_state: optax.OptState) -> dict[str, Float[Array, ""]]:
    """Global L2 norms of Adam's first (`mu`) and second (`nu`) moments over every Adam state in `opt_state`.

    Marin issue #1368: before the 32B spikes the first moment's norm doubled while the second's stayed flat.
    Muon's momentum, when present, is reported as `muon/momentum_norm`.
    """
    metrics: dict[str, Float[Array, ""]] = {}
    adam = _find(opt_state, optax.ScaleByAdamState)
    if adam:
        metrics["adam/mu_norm"] = optax.tree.norm([s.mu for s in adam])
        metrics["adam/nu_norm"] = optax.tree.norm([s.nu for s in adam])
    muon = _find(opt_state, optax.contrib.MuonState)
    if muon:
        metrics["muon/momentum_norm"] = optax.tree.norm([s.mu for s in muon])
    return metrics


def per_layer_update_norms(updates: object, stacked_name: str = "layers") -> Float[Array, " num_layers"]:
    """L2 norm of each layer's update: leaves under `stacked_name` carry a leading num_layers axis."""
    leaves = [
        leaf
        for path, leaf in jax.tree_util.tree_flatten_with_path(updates)[0]
        if stacked_name in jax.tree_util.keystr(path)
    ]
    if not leaves:
        raise ValueError(
            f"no leaves under {stacked_name!r} in the updates; pass the stacked-layer field's name as stacked_name"
        )
    num_layers = {leaf.shape[0] for leaf in leaves}
    if len(num_layers) != 1:
        raise ValueError(f"leaves under {stacked_name!r} disagree on the leading (layer) axis: {sorted(num_layers)}")
    squares = sum(jnp.sum(jnp.square(leaf.astype(jnp.float32)).reshape(leaf.shape[0], -1), axis=1) for leaf in leaves)
    return jnp.sqrt(squares)


def accumulate_gradients(
    loss_and_grad_fn: Callable[..., tuple[tuple[Float[Array, ""], Any], Any]],
    model: Any,
    batch_arrays: tuple[Array, ...],
    microbatches: int,
    *,
    weight_fn: Callable[..., Float[Array, ""]] | None = None,
) -> tuple[Float[Array, ""], Any, Any]:
    """(loss, aux, grads) of the whole batch, computed `microbatches` rows-slices at a time with `lax.scan`.

    `loss_and_grad_fn(model, *arrays)` returns `((loss, aux), grads)`, as from
    `eqx.filter_value_and_grad(f, has_aux=True)`. Losses, aux leaves and grads
    are averaged over microbatches, weighted by `weight_fn(*arrays)` when given
    (for a masked-mean loss pass the mask's sum, so the result equals the
    full-batch mean); unweighted, the result equals the full batch for losses
    that are plain means over rows. An aux dict's entries named `*_max`
    (`MAX_SUFFIX`) are maxima: they take the largest microbatch's value.
    Memory is one microbatch's activations.
    """
    rows = batch_arrays[0].shape[0]
    if microbatches < 1 or any(a.shape[0] != rows for a in batch_arrays) or rows % microbatches:
        raise ValueError(
            "every batch array needs the same leading size divisible by "
            f"microbatches; got {[a.shape for a in batch_arrays]}, {microbatches=}"
        )
    split = tuple(a.reshape(microbatches, rows // microbatches, *a.shape[1:]) for a in batch_arrays)
    weights = (
        jnp.ones([microbatches], jnp.float32)
        if weight_fn is None
        else jax.vmap(lambda *a: jnp.asarray(weight_fn(*a), jnp.float32))(*split)
    )
    weights = weights / jnp.maximum(jnp.sum(weights), jnp.finfo(jnp.float32).tiny)

    def weighted(tree: Any, w: Float[Array, ""]) -> Any:
        return jax.tree.map(lambda x: x * w.astype(x.dtype), tree)

    def body(carry: Any, inputs: tuple[Float[Array, ""], tuple[Array, ...]]) -> tuple[Any, None]:
        w, arrays = inputs
        (loss, aux), grads = loss_and_grad_fn(model, *arrays)
        mean_aux, max_aux = _split_maxima(aux)
        summed = jax.tree.map(jnp.add, carry[:3], weighted((loss, mean_aux, grads), w))
        return (*summed, jax.tree.map(jnp.maximum, carry[3], max_aux)), None

    first = tuple(a[0] for a in split)
    shapes = jax.eval_shape(lambda *a: loss_and_grad_fn(model, *a), *first)
    (loss_shape, aux_shape), grads_shape = shapes
    mean_shape, max_shape = _split_maxima(aux_shape)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), (loss_shape, mean_shape, grads_shape))
    lowest = jax.tree.map(lambda s: jnp.full(s.shape, -jnp.inf, s.dtype), max_shape)
    (loss, mean_aux, grads, max_aux), _ = jax.lax.scan(body, (*zeros, lowest), (weights, split))
    return loss, ({**mean_aux, **max_aux} if isinstance(aux_shape, dict) else mean_aux), grads


MAX_SUFFIX = "_max"
"""An aux metric whose name ends so is a maximum: microbatches combine by `max`, not by a weighted mean."""


def _split_maxima(aux: Any) -> tuple[Any, dict[str, Any]]:
    """`(the rest, the maxima)` of an aux dict (`MAX_SUFFIX` names); any other aux is all rest."""
    if not isinstance(aux, dict):
        return aux, {}
    maxima = {name: value for name, value in aux.items() if name.endswith(MAX_SUFFIX)}
    return {name: value for name, value in aux.items() if name not in maxima}, maxima
