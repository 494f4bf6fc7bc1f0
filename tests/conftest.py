"""Suite-wide settings: JAX on CPU with rank promotion off, so shape slips fail loudly.

Strict dtype promotion is switched on per test package (tests/models) rather than
here: optax's Adam bias correction raises an int32 step count to a Python float,
which strict mode rejects inside optax itself.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402 - the platform must be chosen before JAX initializes

jax.config.update("jax_numpy_rank_promotion", "raise")


import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tootsie.datakit.token_cache import TokenCacheWriter  # noqa: E402


@pytest.fixture
def make_cache(tmp_path):
    """Write a token cache of the given documents (lists of ids) and return its directory."""

    def make(name: str, documents: list[list[int]], vocab_size: int = 64) -> str:
        writer = TokenCacheWriter(tmp_path / name, vocab_size=vocab_size, ledger_extra={"tokenizer_sha256": "test"})
        for document in documents:
            writer.append(np.asarray(document))
        writer.close()
        return str(tmp_path / name)

    return make
