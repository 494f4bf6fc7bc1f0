"""RL code runs under strict dtype promotion, as the model tests do: no silent float64 or int→float upcasts.

A module that trains through the whole loop (optax's bias correction promotes a Python float with an int
step) sets `STRICT_DTYPES = False`, as the train tests run.
"""

import jax
import pytest


@pytest.fixture(autouse=True)
def strict_dtypes(request: pytest.FixtureRequest):
    """Every RL test runs with `jax_numpy_dtype_promotion=strict`, unless its module opts out."""
    if not getattr(request.module, "STRICT_DTYPES", True):
        yield
        return
    with jax.numpy_dtype_promotion("strict"):
        yield
