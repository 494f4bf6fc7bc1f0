"""RL code runs under strict dtype promotion, as the model tests do: no silent float64 or int→float upcasts."""

import jax
import pytest


@pytest.fixture(autouse=True)
def strict_dtypes():
    """Every RL test runs with `jax_numpy_dtype_promotion=strict`."""
    with jax.numpy_dtype_promotion("strict"):
        yield
