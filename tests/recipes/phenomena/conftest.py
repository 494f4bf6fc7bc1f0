"""What the phenomena's smoke tests share: token caches a tiny model learns in a few steps, one per tiny kind."""

import numpy as np
import pytest

from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.recipes.tiny.data import KINDS, TinyData


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory: pytest.TempPathFactory) -> TinyData:
    """Token caches of learnable sequences (counting runs with a per-document stride), one per tiny kind."""
    root = tmp_path_factory.mktemp("caches")
    rng = np.random.default_rng(0)
    caches = {}
    for kind in KINDS:
        writer = TokenCacheWriter(root / kind, vocab_size=1024, ledger_extra={})
        for _ in range(200):
            start, stride = rng.integers(0, 1024), rng.integers(1, 8)
            writer.append((start + stride * np.arange(200)) % 1024)
        writer.close()
        caches[kind] = str(root / kind)
    return TinyData(tokenizer="", train=caches, heldout=caches, components={})
