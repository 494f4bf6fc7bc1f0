"""Where a model's activations live on a mesh: the batch rows split like the input batch, set while tracing a step.

Under FSDP the weights are split over the `fsdp` mesh axis and the batch rows
too. Left alone, XLA's partitioner may resolve that conflict by keeping whole
activations on every device: measured on 8 fake devices (hidden 256, 4 layers,
64 × 256 tokens), the step's temporaries were 472 MB per device on
`fsdp=8` against 144 MB on `data=8`, for the same 8 rows per device. Pinning
the hidden states to the batch's sharding at every block boundary makes it
gather the weights instead (what FSDP means).

The trainer sets the sharding around its loss (`with activation_sharding(s):`);
the model calls `constrain(x)`, a no-op when none is set (one device, eval).
An MoE layer reads the sharding's mesh (`current_mesh`) to run its experts
split over the `expert` axis (`tootsie.models.expert_parallel`).
"""

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import jax
from jax.sharding import Mesh, NamedSharding, Sharding

BATCH_AXES = ("data", "expert", "fsdp")
"""Mesh axes that batch rows are split over (an expert-parallel group holds different rows on each device)."""
_SHARDING: ContextVar[Sharding | None] = ContextVar("activation_sharding", default=None)


@contextlib.contextmanager
def activation_sharding(sharding: Sharding | None) -> Iterator[None]:
    """Trace the model inside this block with its `[batch, ...]` activations placed by `sharding`."""
    token = _SHARDING.set(sharding)
    try:
        yield
    finally:
        _SHARDING.reset(token)


def constrain(x: jax.Array) -> jax.Array:
    """`x` pinned to the current activation sharding (its leading axis is the batch); unchanged when none is set."""
    sharding = _SHARDING.get()
    return x if sharding is None else jax.lax.with_sharding_constraint(x, sharding)


def current_mesh() -> Mesh | None:
    """The mesh of the current activation sharding; None when none is set or it is not a `NamedSharding`."""
    sharding = _SHARDING.get()
    return sharding.mesh if isinstance(sharding, NamedSharding) else None
