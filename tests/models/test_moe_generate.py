"""KV-cache generation of an MoE model (leading dense blocks, then experts) equals full-forward argmax decoding."""

import jax
import jax.numpy as jnp

from tests.models.test_generate import PROMPTS, _greedy_by_recompute
from tests.release.conftest import random_params
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.moe import MoeConfig


def test_cached_moe_greedy_matches_full_recompute() -> None:
    # One dense block then two MoE blocks with a shared expert: the cache's layers are offset past the dense
    # stack. Random weights of std 0.2 (drawn with NumPy: building the model's init traces dozens of small
    # programs) spread the logits, so the argmax has no near-ties that rounding could flip.
    config = MoeConfig(
        vocab_size=48,
        hidden_dim=32,
        intermediate_dim=16,
        num_layers=3,
        num_heads=4,
        num_kv_heads=2,
        qk_norm=True,
        attention="xla",
        num_experts=4,
        experts_per_token=2,
        num_shared_experts=1,
        dense_layers=1,
        capacity_factor=1.0,
        expert_backend="padded",
    )
    model = jax.tree_util.tree_map(jnp.asarray, random_params(config, seed=3))
    generations = generate(model, PROMPTS, SamplingConfig(max_new_tokens=12))
    assert [list(g.tokens) for g in generations] == _greedy_by_recompute(model, PROMPTS, 12)
