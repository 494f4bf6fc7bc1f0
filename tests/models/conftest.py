"""Model code runs under strict dtype promotion: no silent float64 or int→float upcasts."""

import jax
import pytest


@pytest.fixture(autouse=True)
def strict_dtypes():
    """Every model test runs with `jax_numpy_dtype_promotion=strict`."""
    with jax.numpy_dtype_promotion("strict"):
        yield
