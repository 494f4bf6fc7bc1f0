"""KV-cache generation: greedy decoding matches full recomputation; sampling, stopping and bucketing behave."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.models.generate import SamplingConfig, bucket, cache_length, generate, sample
from tootsie.models.llama import LlamaConfig, LlamaModel

PROMPTS = [[1, 5, 9], [1, 7, 3, 2, 8, 11, 4, 6, 10, 12, 13, 14, 15, 3, 2, 9, 8, 7], [1, 2]]


def _model(num_kv_heads: int, qk_norm: bool) -> LlamaModel:
    # A large init std spreads the logits, so the argmax has no near-ties that rounding could flip.
    config = LlamaConfig(
        vocab_size=48,
        hidden_dim=32,
        intermediate_dim=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=num_kv_heads,
        qk_norm=qk_norm,
        initializer_std=0.3,
        attention="xla",
    )
    return LlamaModel(config, key=jax.random.PRNGKey(3))


@eqx.filter_jit
def _argmax_after(model: LlamaModel, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
    logits = model(tokens)
    return jnp.argmax(jnp.take_along_axis(logits, (lengths - 1)[:, None, None], axis=1)[:, 0], axis=-1)


def _greedy_by_recompute(model: LlamaModel, prompts: list[list[int]], steps: int) -> list[list[int]]:
    """Greedy decoding that runs the whole forward pass over each sequence at every step (right padding is
    invisible to the causal positions read)."""
    tokens = np.zeros((len(prompts), 64), np.int32)
    lengths = np.array([len(p) for p in prompts], np.int32)
    for row, prompt in enumerate(prompts):
        tokens[row, : len(prompt)] = prompt
    for _ in range(steps):
        next_ids = np.asarray(_argmax_after(model, jnp.asarray(tokens), jnp.asarray(lengths)))
        tokens[np.arange(len(prompts)), lengths] = next_ids
        lengths += 1
    return [tokens[row, len(p) : len(p) + steps].tolist() for row, p in enumerate(prompts)]


@pytest.mark.parametrize(("num_kv_heads", "qk_norm"), [(4, False), (2, True), (1, False)])
def test_cached_greedy_matches_full_recompute(num_kv_heads: int, qk_norm: bool) -> None:
    model = _model(num_kv_heads, qk_norm)
    generations = generate(model, PROMPTS, SamplingConfig(max_new_tokens=20))
    for expected, generation in zip(_greedy_by_recompute(model, PROMPTS, 20), generations):
        assert list(generation.tokens) == expected
        assert generation.stop_reason == "max_new_tokens"


def test_stop_tokens_and_strings_end_each_row_on_its_own() -> None:
    model = _model(2, False)
    free = generate(model, PROMPTS, SamplingConfig(max_new_tokens=12))
    stop_at = free[0].tokens[4]
    first_stop = free[0].tokens.index(stop_at)
    stopped = generate(model, PROMPTS, SamplingConfig(max_new_tokens=12, stop_tokens=(stop_at,)))
    assert stopped[0].tokens == free[0].tokens[: first_stop + 1] and stopped[0].stop_reason == "eos"
    for full, cut in zip(free[1:], stopped[1:]):
        assert cut.tokens == full.tokens[: len(cut.tokens)]
    marker = ",".join(map(str, free[1].tokens[2:4]))

    def decode(ids: list[int]) -> str:
        return ",".join(map(str, ids))

    by_string = generate(model, PROMPTS[1:2], SamplingConfig(max_new_tokens=12, stop_strings=(marker,)), decode)
    assert by_string[0].stop_reason == "stop_string" and marker in decode(list(by_string[0].tokens))
    assert by_string[0].tokens == free[1].tokens[: len(by_string[0].tokens)]


def test_sampling_is_seeded_and_filters() -> None:
    model = _model(2, True)
    config = SamplingConfig(max_new_tokens=16, temperature=1.0, seed=7)
    assert generate(model, PROMPTS, config) == generate(model, PROMPTS, config)
    other = generate(model, PROMPTS, SamplingConfig(max_new_tokens=16, temperature=1.0, seed=8))
    assert other != generate(model, PROMPTS, config)
    logits = jnp.asarray([[0.0, 3.0, 1.0, 2.0]] * 64, jnp.float32)
    key = jax.random.PRNGKey(0)
    top1 = sample(logits, jnp.float32(1.0), jnp.int32(1), jnp.float32(1.0), key=key)
    assert set(np.asarray(top1).tolist()) == {1}
    top2 = sample(logits, jnp.float32(5.0), jnp.int32(2), jnp.float32(1.0), key=key)
    assert set(np.asarray(top2).tolist()) == {1, 3}
    nucleus = sample(
        jnp.asarray([[0.0, 10.0, 9.0, -5.0]] * 64), jnp.float32(1.0), jnp.int32(0), jnp.float32(0.9), key=key
    )
    assert set(np.asarray(nucleus).tolist()) == {1, 2}
    greedy = sample(logits, jnp.float32(0.0), jnp.int32(0), jnp.float32(1.0), key=key)
    assert set(np.asarray(greedy).tolist()) == {1}


def test_buckets_are_powers_of_two() -> None:
    assert [bucket(n) for n in (1, 16, 17, 100)] == [16, 16, 32, 128]
    assert bucket(3, minimum=1) == 4
    assert cache_length(32, 256) == 512
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0.0)
