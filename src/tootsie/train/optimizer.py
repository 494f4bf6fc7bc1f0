"""Optimizers as Optax transforms: AdamW with a weight-decay mask, after global-norm clipping.

Weight decay applies to weight matrices only: embeddings and every norm scale
are left undecayed (decaying a norm's scale toward 0 fights the normalization;
decaying embeddings shrinks rare tokens). The mask is computed from parameter
paths, so it follows the model's field names (`embed`, `*_norm`).
"""

from collections.abc import Callable
from dataclasses import dataclass

import jax
import optax

NO_DECAY_NAMES = ("embed", "norm")


@dataclass(frozen=True)
class AdamWConfig:
    """AdamW hyperparameters and the gradient clipping in front of it."""

    weight_decay: float = 0.1
    """Decoupled weight decay on weight matrices."""
    beta1: float = 0.9
    """First-moment decay."""
    beta2: float = 0.95
    """Second-moment decay."""
    epsilon: float = 1e-8
    """Adam denominator epsilon."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; None turns clipping off."""

    def __post_init__(self) -> None:
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError(f"betas must be in [0, 1), got {self.beta1=}, {self.beta2=}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be positive or None, got {self.max_grad_norm}")

    def build(self, learning_rate: Callable[[jax.Array], jax.Array]) -> optax.GradientTransformation:
        """The optimizer for a learning-rate schedule."""
        clip = [optax.clip_by_global_norm(self.max_grad_norm)] if self.max_grad_norm is not None else []
        adamw = optax.adamw(learning_rate, b1=self.beta1, b2=self.beta2, eps=self.epsilon, weight_decay=self.weight_decay, mask=decay_mask)
        return optax.chain(*clip, adamw)


def decay_mask(params: object) -> object:
    """True for leaves that get weight decay: everything but embeddings and norm scales."""

    def decays(path: tuple[object, ...], _leaf: object) -> bool:
        names = jax.tree_util.keystr(path).lower()
        return not any(name in names for name in NO_DECAY_NAMES)

    return jax.tree_util.tree_map_with_path(decays, params)


OPTIMIZERS: dict[str, type[AdamWConfig]] = {"adamw": AdamWConfig}
