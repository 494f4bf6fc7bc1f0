"""Attention paths: the XLA einsums match JAX's reference, and cuDNN's packed-document masking is the XLA mask."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tootsie.models import attention
from tootsie.models.attention import (
    attend,
    attention_mask,
    cudnn_segments,
    resolve_attention,
    segments_mask,
    xla_attention,
)
from tootsie.models.llama import LlamaConfig


def packed_segment_ids(seq: int, rows: int, seed: int) -> jax.Array:
    """Rows of contiguous documents as the packer lays them out: one document, one per token, random runs."""
    rng = np.random.default_rng(seed)
    random_runs = [np.cumsum(rng.random(seq) < p) for p in rng.uniform(0.05, 0.5, size=rows - 2)]
    return jnp.asarray(np.stack([np.zeros(seq), np.arange(seq), *random_runs]), jnp.int32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cudnn_packed_masking_is_the_xla_mask(seed: int) -> None:
    segments = packed_segment_ids(seq=24, rows=6, seed=seed)
    seqlens, offsets = cudnn_segments(segments, max_segments=24)
    assert seqlens.shape == (6, 24) and offsets.shape == (6, 25)
    assert int(seqlens[0, 0]) == 24 and int(seqlens[0, 1]) == -1  # one document: the rest padded with -1
    assert np.all(np.asarray(seqlens[1]) == 1)  # a document per token
    assert np.all(np.where(seqlens >= 0, seqlens, 0).sum(axis=1) == 24)  # every position in one document
    np.testing.assert_array_equal(segments_mask(seqlens, offsets, 24), attention_mask(segments, 6, 24))


def test_segments_mask_differs_when_a_boundary_moves() -> None:
    """The reference is not vacuous: one document boundary moved changes the mask."""
    segments = jnp.array([[0, 0, 0, 1, 1, 1]], jnp.int32)
    moved = jnp.array([[0, 0, 1, 1, 1, 1]], jnp.int32)
    assert not np.array_equal(segments_mask(*cudnn_segments(moved, 6), 6), attention_mask(segments, 1, 6))


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (6, 1)])
def test_xla_attention_matches_jax_reference_under_the_cudnn_mask(heads: int, kv_heads: int) -> None:
    keys = jax.random.split(jax.random.PRNGKey(heads * 10 + kv_heads), 3)
    batch, seq, dim = 3, 16, 8
    q = jax.random.normal(keys[0], (batch, seq, heads, dim))
    k = jax.random.normal(keys[1], (batch, seq, kv_heads, dim))
    v = jax.random.normal(keys[2], (batch, seq, kv_heads, dim))
    segments = packed_segment_ids(seq, batch, seed=heads)
    cudnn_mask = segments_mask(*cudnn_segments(segments, seq), seq)
    reference = jax.nn.dot_product_attention(q, k, v, mask=cudnn_mask, implementation="xla")
    np.testing.assert_allclose(xla_attention(q, k, v, attention_mask(segments, batch, seq)), reference, atol=1e-5)
    unmasked = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
    assert not np.allclose(reference, unmasked, atol=1e-3)  # the documents do change the result


def test_auto_is_xla_off_gpu_and_attend_needs_the_mask_there() -> None:
    assert resolve_attention("auto", jnp.bfloat16) == ("cudnn" if jax.default_backend() == "gpu" else "xla")
    assert resolve_attention("auto", jnp.float32) == "xla"
    q = jnp.zeros((1, 4, 2, 8))
    with pytest.raises(ValueError, match="dense mask"):
        attend("xla", q, q, q, None, None)


def test_unknown_attention_is_refused() -> None:
    with pytest.raises(ValueError, match="attention must be one of"):
        LlamaConfig(attention="flash")  # type: ignore[arg-type]


def test_cudnn_call_passes_jax_shape_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Abstract evaluation on a CPU, with cuDNN's version and Hopper capability faked.

    JAX's own layout checks of the packed arguments (and of the backward), and of the
    pre-Hopper dense-mask call, accept what `cudnn_attention` passes.
    """
    from jax._src.cudnn import fused_attention_stablehlo as binding

    monkeypatch.setattr(binding, "check_cudnn_version", lambda: 91000)
    monkeypatch.setattr(binding, "check_compute_capability", lambda capability: True)
    monkeypatch.setattr(attention, "packed_layout_supported", lambda: True)
    q = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((2, 128, 2, 64), jnp.bfloat16)
    segments = jax.ShapeDtypeStruct((2, 128), jnp.int32)
    for segment_ids in (segments, None):
        assert jax.eval_shape(attention.cudnn_attention, q, kv, kv, segment_ids).shape == (2, 128, 4, 64)

    def loss(q, k, v, s):
        return attention.cudnn_attention(q, k, v, s).astype(jnp.float32).sum()

    grads = jax.eval_shape(jax.grad(loss, argnums=(0, 1, 2)), q, kv, kv, segments)
    assert [g.shape for g in grads] == [(2, 128, 4, 64), (2, 128, 2, 64), (2, 128, 2, 64)]
    monkeypatch.setattr(attention, "packed_layout_supported", lambda: False)  # pre-Hopper: the dense mask
    assert jax.eval_shape(attention.cudnn_attention, q, kv, kv, segments).shape == (2, 128, 4, 64)


def test_documents_per_row_counts_runs() -> None:
    segments = packed_segment_ids(seq=24, rows=6, seed=3)
    expected = [len(np.unique(np.asarray(row))) for row in segments]
    assert np.asarray(attention.documents_per_row(segments)).tolist() == expected


@pytest.mark.parametrize("bound", [4, 9])
def test_cudnn_takes_the_packed_layout_within_the_bound_and_the_dense_mask_past_it(
    monkeypatch: pytest.MonkeyPatch, bound: int
) -> None:
    """With both cuDNN calls replaced by the XLA path under the mask each is given: the packed call masks what
    the XLA path masks, and a batch with a row of more than `PACKED_MAX_DOCUMENTS` documents takes the dense
    mask (so no row is cut short). The fakes tag their output to tell which branch ran."""
    from jax._src.cudnn import fused_attention_stablehlo as binding

    def fake_packed(q, k, v, *, q_seqlen, kv_seqlen, q_offsets, kv_offsets, scale, mask_type):
        return xla_attention(q, k, v, segments_mask(q_seqlen, q_offsets, q.shape[1]))

    def fake_masked(q, k, v, *, mask, scale, implementation):
        return xla_attention(q, k, v, mask) + 1000.0

    monkeypatch.setattr(binding, "dot_product_attention", fake_packed)
    monkeypatch.setattr(attention.jax.nn, "dot_product_attention", fake_masked)
    monkeypatch.setattr(attention, "packed_layout_supported", lambda: True)
    monkeypatch.setattr(attention, "PACKED_MAX_DOCUMENTS", bound)
    keys = jax.random.split(jax.random.key(bound), 3)
    q = jax.random.normal(keys[0], (3, 24, 4, 8))
    k, v = (jax.random.normal(key, (3, 24, 2, 8)) for key in keys[1:])
    few = jnp.asarray(np.repeat(np.arange(4), 6)[None].repeat(3, axis=0), jnp.int32)  # 4 documents in every row
    many = few.at[2].set(jnp.arange(24) // 2)  # the last row holds 12
    for segments, tag in ((few, 0.0), (many, 1000.0 if bound < 12 else 0.0)):
        reference = xla_attention(q, k, v, attention_mask(segments, 3, 24))
        out = jax.jit(attention.cudnn_attention)(q, k, v, segments)
        np.testing.assert_allclose(np.asarray(out), np.asarray(reference) + tag, rtol=1e-5, atol=1e-4)
