"""KV-cache generation: greedy decoding matches full recomputation; the on-device decode loop gives the tokens and
stop reasons of a per-step loop; sampling, stopping and bucketing behave."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.models.generate import (
    STOP_STRING_CHUNK,
    Generation,
    SamplingConfig,
    bucket,
    cache_length,
    categorical,
    first_argmax,
    generate,
    sample,
    sort_descending,
)
from tootsie.models.kv_cache import KVCache, cached_decoder, decode_mask, prefill_mask
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


@eqx.filter_jit
def _reference_step(
    model: LlamaModel,
    cache: tuple,
    tokens: jax.Array,
    positions: jax.Array,
    slot: jax.Array,
    mask: jax.Array,
    last: jax.Array,
    settings: tuple,
    key: jax.Array,
) -> tuple[jax.Array, tuple]:
    # The cache travels as (keys, values): filter_jit would rebuild a KVCache around its filter's booleans.
    decoder = cached_decoder(model)
    hidden, updated = decoder.forward_cached(
        model, decoder.blocks(model), KVCache(*cache), tokens, positions, slot, mask
    )
    hidden = jnp.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]
    return sample(hidden @ model.output_head(), *settings, key=key), (updated.keys, updated.values)


def _per_step_reference(
    model: LlamaModel, prompts: list[list[int]], sampling: SamplingConfig, decode: object = None
) -> list[Generation]:
    """The loop generate ran before its decode moved on the device: one jitted step per token, the token read
    back and every row's stop checked on the host after each, token t drawn with fold_in(PRNGKey(seed), t)."""
    batch, prompt_len = bucket(len(prompts), minimum=1), bucket(max(len(p) for p in prompts))
    max_len = cache_length(prompt_len, sampling.max_new_tokens)
    tokens, lengths = np.zeros((batch, prompt_len), np.int32), np.ones(batch, np.int32)
    for row, prompt in enumerate(prompts):
        tokens[row, : len(prompt)], lengths[row] = prompt, len(prompt)
    empty = cached_decoder(model).empty_cache(model, batch, max_len, model.embed.dtype)
    cache = (empty.keys, empty.values)
    settings = (jnp.float32(sampling.temperature), jnp.int32(sampling.top_k), jnp.float32(sampling.top_p))
    root = jax.random.PRNGKey(sampling.seed)
    positions = jnp.broadcast_to(jnp.arange(prompt_len)[None, :], (batch, prompt_len))
    mask, last = prefill_mask(batch, prompt_len, max_len), jnp.asarray(lengths - 1)
    ids, cache = _reference_step(
        model, cache, jnp.asarray(tokens), positions, jnp.int32(0), mask, last, settings, jax.random.fold_in(root, 0)
    )
    outputs: list[list[int]] = [[] for _ in prompts]
    reasons: list[str | None] = [None] * len(prompts)
    for step in range(sampling.max_new_tokens):
        for row, output in enumerate(outputs):
            if reasons[row] is None:
                output.append(int(ids[row]))
                if output[-1] in sampling.stop_tokens:
                    reasons[row] = "eos"
                elif any(stop in decode(output) for stop in sampling.stop_strings):  # type: ignore[operator]
                    reasons[row] = "stop_string"
                elif len(output) == sampling.max_new_tokens:
                    reasons[row] = "max_new_tokens"
        if all(reasons):
            break
        mask = decode_mask(jnp.asarray(lengths), prompt_len, jnp.int32(step), max_len)
        ids, cache = _reference_step(
            model,
            cache,
            ids[:, None],
            jnp.asarray(lengths + step)[:, None],
            jnp.int32(prompt_len + step),
            mask,
            jnp.zeros(batch, jnp.int32),
            settings,
            jax.random.fold_in(root, step + 1),
        )
    return [Generation(tuple(output), reason) for output, reason in zip(outputs, reasons)]


def _as_text(ids: list[int]) -> str:
    return ",".join(map(str, ids))


@pytest.mark.parametrize(
    ("temperature", "top_p", "top_k"), [(0.0, 1.0, 0), (1.0, 1.0, 0), (1.0, 0.8, 0), (0.7, 0.9, 5)]
)
def test_device_loop_matches_the_per_step_loop(temperature: float, top_p: float, top_k: int) -> None:
    # Rows of 3, 18 and 2 prompt tokens (a padding row makes the batch 4). Stop tokens and a stop string are
    # taken from a free run, so the rows stop at different steps: row 1 on the stop string after more than one
    # STOP_STRING_CHUNK (the stop token, from row 0, is not among its tokens before that); the free runs stop by
    # budget.
    model, budget = _model(2, True), 2 * STOP_STRING_CHUNK + 8
    seen = set()
    for seed in (0, 1, 2):
        settings = SamplingConfig(max_new_tokens=budget, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
        free = generate(model, PROMPTS, settings)
        assert free == _per_step_reference(model, PROMPTS, settings)
        marker = free[1].tokens[STOP_STRING_CHUNK + 4 : STOP_STRING_CHUNK + 7]
        stop_token = next(t for t in free[0].tokens[3:] if t not in free[1].tokens[: STOP_STRING_CHUNK + 7])
        stopping = SamplingConfig(
            max_new_tokens=budget,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            stop_tokens=(stop_token,),
            stop_strings=(_as_text(list(marker)),),
        )
        stopped = generate(model, PROMPTS, stopping, _as_text)
        assert stopped == _per_step_reference(model, PROMPTS, stopping, _as_text)
        for full, cut in zip(free, stopped):
            assert cut.tokens == full.tokens[: len(cut.tokens)]
        seen |= {g.stop_reason for g in stopped}
    assert {"eos", "stop_string"} <= seen


def test_fast_sort_argmax_and_draw_equal_jax() -> None:
    values = jax.random.normal(jax.random.PRNGKey(5), (8, 256)) * 3
    values = values.at[0, :10].set(0.0).at[0, 10:20].set(-0.0).at[1, :5].set(-jnp.inf).at[2, :5].set(jnp.inf)
    values = values.at[3, 50:90].set(1.5).at[4, 7].set(jnp.nan).at[4, 9].set(jnp.nan).at[5, :].set(-jnp.inf)
    np.testing.assert_array_equal(np.asarray(sort_descending(values)), np.asarray(jnp.sort(values, axis=-1)[:, ::-1]))
    np.testing.assert_array_equal(np.asarray(first_argmax(values)), np.asarray(jnp.argmax(values, axis=-1)))
    for seed in range(4):
        key = jax.random.PRNGKey(seed)
        expected = jax.random.categorical(key, values, axis=-1)
        np.testing.assert_array_equal(np.asarray(categorical(values, key=key)), np.asarray(expected))
