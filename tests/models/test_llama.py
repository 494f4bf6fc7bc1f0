"""The Llama decoder: causal, blocked across documents, GQA shapes, correct parameter count."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.models.llama import LlamaConfig, LlamaModel

SMALL = LlamaConfig(vocab_size=97, hidden_dim=32, intermediate_dim=48, num_layers=2, num_heads=4, num_kv_heads=2)


@pytest.mark.parametrize("config", [SMALL, LlamaConfig(**{**SMALL.__dict__, "qk_norm": True, "tie_embeddings": True})])
def test_parameter_count_matches_the_arrays(config: LlamaConfig) -> None:
    model = LlamaModel(config, key=jax.random.PRNGKey(0))
    assert sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))) == config.num_parameters()


def test_future_tokens_do_not_change_past_logits() -> None:
    model = LlamaModel(SMALL, key=jax.random.PRNGKey(1))
    tokens = jax.random.randint(jax.random.PRNGKey(2), (2, 12), 0, SMALL.vocab_size)
    changed = tokens.at[:, 8:].set((tokens[:, 8:] + 1) % SMALL.vocab_size)
    assert np.allclose(model(tokens)[:, :8], model(changed)[:, :8], atol=1e-5)
    assert not np.allclose(model(tokens)[:, 8:], model(changed)[:, 8:], atol=1e-5)


def test_segments_block_attention_between_documents() -> None:
    model = LlamaModel(SMALL, key=jax.random.PRNGKey(3))
    tokens = jax.random.randint(jax.random.PRNGKey(4), (1, 10), 0, SMALL.vocab_size)
    segments = jnp.array([[0] * 4 + [1] * 6], dtype=jnp.int32)
    other_first_doc = tokens.at[:, :4].set((tokens[:, :4] + 5) % SMALL.vocab_size)
    second_doc_alone = model(tokens[:, 4:], jnp.zeros((1, 6), jnp.int32))
    # RoPE is relative, so document 2 sees the same thing wherever it starts once document 1 is masked out.
    assert np.allclose(model(tokens, segments)[:, 4:], model(other_first_doc, segments)[:, 4:], atol=1e-5)
    assert np.allclose(model(tokens, segments)[:, 4:], second_doc_alone, atol=1e-4)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"num_heads": 4, "num_kv_heads": 3}, "num_kv_heads"),
        ({"hidden_dim": 30, "num_heads": 4}, "num_heads"),
        ({"num_layers": 0}, "num_layers"),
    ],
)
def test_inconsistent_shapes_name_the_field(overrides: dict[str, int], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        LlamaConfig(**{**SMALL.__dict__, **overrides})


def test_marin_8b_preset_has_llama3_8b_parameter_count() -> None:
    from tootsie.models.presets import PRESETS

    assert abs(PRESETS["marin-8b"].num_parameters() - 8.03e9) < 0.01e9  # Llama 3 8B: 8.03 B parameters
    assert PRESETS["tiny"].num_parameters() == pytest.approx(8.4e6, rel=0.01)  # issue 5's CPU benchmark shape
    assert PRESETS["marin-32b-qk-norm"].num_parameters() - PRESETS["marin-32b"].num_parameters() == 64 * 2 * 128


def test_name_choices_are_their_registries_and_checked_at_load() -> None:
    import typing

    from tootsie.configfile import from_plain
    from tootsie.errors import TootsieError
    from tootsie.models.llama import REMAT_POLICIES, RematPolicy
    from tootsie.models.presets import PRESETS, PresetName

    assert typing.get_args(RematPolicy) == tuple(REMAT_POLICIES) and typing.get_args(PresetName) == tuple(PRESETS)
    assert from_plain(LlamaConfig, {"remat": "dots"}, "model").remat == "dots"
    with pytest.raises(
        TootsieError, match=r"model.remat: unknown name 'dot'; choose one of \['dots', 'full', 'none'\]"
    ):
        from_plain(LlamaConfig, {"remat": "dot"}, "model")
    with pytest.raises(TootsieError, match=r"phase.model: unknown name 'marin-7b'; choose one of \[.*'marin-8b'.*\]"):
        from_plain(PresetName, "marin-7b", "phase.model")
    with pytest.raises(ValueError, match="remat must be one of"):
        LlamaConfig(remat="dot")


def test_llama3_rope_scaling_matches_the_reference_rule() -> None:
    """Frequencies: high ones kept, low ones divided by 8, the band between blended (HF rope_type='llama3')."""
    import math

    from tootsie.models.llama import Llama3RopeScaling

    inv_freq = 1.0 / (500_000.0 ** (np.arange(0, 128, 2) / 128))
    scaled = np.asarray(Llama3RopeScaling().scale(jnp.asarray(inv_freq, jnp.float32)))
    wavelength = 2 * math.pi / inv_freq
    assert np.allclose(scaled[wavelength < 8192 / 4], inv_freq[wavelength < 8192 / 4], rtol=1e-6)
    assert np.allclose(scaled[wavelength > 8192], inv_freq[wavelength > 8192] / 8, rtol=1e-6)
    band = (wavelength >= 2048) & (wavelength <= 8192)
    smooth = (8192 / wavelength[band] - 1) / 3
    assert np.allclose(scaled[band], (1 - smooth) * inv_freq[band] / 8 + smooth * inv_freq[band], rtol=1e-5)
