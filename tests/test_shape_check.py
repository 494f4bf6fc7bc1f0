"""The suite's runtime shape check is on: mismatched named axes fail at the call, plain hints stay unchecked."""

import jax.numpy as jnp
import jax.random as jr
import pytest
from jaxtyping import Float, Int, TypeCheckError

from tests.shape_check import mentions_array
from tootsie.datakit.dedup import DedupConfig
from tootsie.models.llama import LlamaConfig, LlamaModel

CONFIG = LlamaConfig(vocab_size=32, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1)


def test_axes_that_disagree_across_arguments_fail_at_the_call() -> None:
    model = LlamaModel(CONFIG, key=jr.PRNGKey(0))
    tokens = jnp.zeros((2, 6), dtype=jnp.int32)
    assert model.hidden_states(tokens, jnp.zeros((2, 6), dtype=jnp.int32)).shape == (2, 6, 16)
    with pytest.raises(TypeCheckError, match="segment_ids"):
        model.hidden_states(tokens, jnp.zeros((2, 5), dtype=jnp.int32))  # seq 6 against seq 5


def test_plain_hints_are_left_to_the_code() -> None:
    # The executor fills `str` fields with step references before it resolves them; only array hints are checked.
    assert DedupConfig(input=object()).input is not None  # type: ignore[arg-type]
    assert mentions_array(Float[jnp.ndarray, "n"] | None) and mentions_array(list[Int[jnp.ndarray, ""]])
    assert not mentions_array(str | None) and not mentions_array(dict[str, int])
