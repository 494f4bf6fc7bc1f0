"""Causal self-attention within documents: an XLA path (CPU, any device) and cuDNN's fused kernel (GPU).

Both compute `softmax(q·kᵀ/√d + mask)·v` where a position sees itself and the
earlier positions of its own document. They differ in how that mask is said:

- `xla_attention` takes the dense boolean mask `attention_mask(segment_ids)`,
  `[batch, 1, seq, seq]`, and runs two einsums with a float32 softmax between
  them. Grouped-query heads are contracted in groups, never repeated.
- `cudnn_attention` takes cuDNN's packed ("ragged") layout: each row's
  documents as `offsets` (where each starts) and `seqlens` (how long each
  is), padded with -1 to a fixed number of documents per row
  (`PACKED_MAX_DOCUMENTS`), with causal masking inside each document
  (`PADDING_CAUSAL`). JAX's binding keeps softmax statistics of
  `batch × that bound × heads × seq` floats, so the bound must be small: at
  the sequence length itself (one document per token) a 125M step at seq
  4096 asked an H200 for 398 GiB. A batch with a row of more documents takes
  cuDNN with the dense mask instead (`lax.cond`), so no row is ever cut.

`cudnn_segments` turns segment ids into those arguments and `segments_mask`
turns them back into the dense mask cuDNN's masking amounts to, so a CPU test
can check the two paths mask the same positions. Segment ids must be
contiguous runs (a document's positions are adjacent, as the packer lays
them out): cuDNN sees a new document wherever the id changes.

`ATTENTION_IMPLEMENTATIONS` is the registry behind `LlamaConfig.attention`:
`auto` is cuDNN on GPU in bf16/fp16 and XLA otherwise.

`attend_and_logit_max` also gives the step's largest pre-softmax logit, the
attention-logit growth signal of Wortsman et al. (2023) that QK-norm bounds.
On the XLA path it is one more reduction over the logits the softmax already
has in memory; the fused kernel never exposes its scores, so there
`logit_max_from_qk` recomputes `q·kᵀ` block by block of queries, forward only
(no gradient), holding one `[block, seq]` tile per head at a time.
"""

import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from tootsie.configfile import names_literal
from tootsie.errors import TootsieError


def attention_mask(segment_ids: Int[Array, "batch seq"] | None, batch: int, seq: int) -> Bool[Array, "batch 1 seq seq"]:
    """Causal mask `[batch, 1, seq, seq]`, also blocked between different documents."""
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))[None, None]
    if segment_ids is None:
        return jnp.broadcast_to(causal, (batch, 1, seq, seq))
    same_doc = segment_ids[:, None, :, None] == segment_ids[:, None, None, :]
    return causal & same_doc


def xla_attention(
    q: Float[Array, "batch seq heads dim"],
    k: Float[Array, "batch seq kv_heads dim"],
    v: Float[Array, "batch seq kv_heads dim"],
    mask: Bool[Array, "batch 1 seq seq"],
) -> Float[Array, "batch seq heads dim"]:
    """Masked softmax attention as two einsums, logits and softmax in float32 whatever the input dtype.

    Measured on the CPU benchmark shape, the gradient of the whole loss took 1.44
    CPU-s against 1.54 through `jax.nn.dot_product_attention`'s XLA path.
    """
    return _attend_logits(_masked_logits(q, k, mask), v, q.shape)


def xla_attention_and_logit_max(
    q: Float[Array, "batch seq heads dim"],
    k: Float[Array, "batch seq kv_heads dim"],
    v: Float[Array, "batch seq kv_heads dim"],
    mask: Bool[Array, "batch 1 seq seq"],
) -> tuple[Float[Array, "batch seq heads dim"], Float[Array, ""]]:
    """`xla_attention` and the largest logit it fed the softmax (unmasked positions only; no gradient)."""
    logits = _masked_logits(q, k, mask)
    return _attend_logits(logits, v, q.shape), jax.lax.stop_gradient(logits.max())


def _masked_logits(
    q: Float[Array, "batch seq heads dim"],
    k: Float[Array, "batch seq kv_heads dim"],
    mask: Bool[Array, "batch 1 seq seq"],
) -> Float[Array, "batch kv_heads group seq seq"]:
    """`q·kᵀ/√d` per query group in float32, the masked positions at the float32 minimum."""
    batch, seq, heads, dim = q.shape
    kv_heads = k.shape[2]
    grouped = (q * jnp.asarray(1 / math.sqrt(dim), q.dtype)).reshape(batch, seq, kv_heads, heads // kv_heads, dim)
    logits = jnp.einsum("btkgd,bskd->bkgts", grouped, k, preferred_element_type=jnp.float32)
    return jnp.where(mask[:, :, None], logits, jnp.finfo(jnp.float32).min)


def _attend_logits(
    logits: Float[Array, "batch kv_heads group seq seq"], v: Float[Array, "batch seq kv_heads dim"], shape: tuple
) -> Float[Array, "batch seq heads dim"]:
    """The softmax of masked logits applied to the values, back in `[batch, seq, heads, dim]` (`shape`)."""
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bkgts,bskd->btkgd", probs, v).reshape(shape)


LOGIT_MAX_QUERY_BLOCK = 512
"""Queries per block in `logit_max_from_qk`: bounds its logits tile to `batch × heads × 512 × seq` floats."""


def logit_max_from_qk(
    q: Float[Array, "batch seq heads dim"],
    k: Float[Array, "batch seq kv_heads dim"],
    segment_ids: Int[Array, "batch seq"] | None,
) -> Float[Array, ""]:
    """The largest pre-softmax logit of causal attention within documents, from `q` and `k` (no gradient).

    What a fused kernel hides: `q·kᵀ/√d` over the positions its mask keeps,
    one block of `LOGIT_MAX_QUERY_BLOCK` queries at a time (`lax.map`).
    """
    q, k = jax.lax.stop_gradient(q), jax.lax.stop_gradient(k)
    batch, seq, heads, dim = q.shape
    kv_heads = k.shape[2]
    block = min(LOGIT_MAX_QUERY_BLOCK, seq)
    blocks = -(-seq // block)
    pad = blocks * block - seq
    segments = jnp.zeros((batch, seq), jnp.int32) if segment_ids is None else segment_ids
    grouped = (q * jnp.asarray(1 / math.sqrt(dim), q.dtype)).reshape(batch, seq, kv_heads, heads // kv_heads, dim)
    grouped = jnp.pad(grouped, ((0, 0), (0, pad), (0, 0), (0, 0), (0, 0))).reshape(
        batch, blocks, block, kv_heads, heads // kv_heads, dim
    )
    query_segments = jnp.pad(segments, ((0, 0), (0, pad)), constant_values=-1).reshape(batch, blocks, block)
    query_positions = jnp.arange(blocks * block).reshape(blocks, block)
    key_positions = jnp.arange(seq)

    def block_max(inputs: tuple[Array, Array, Array]) -> Float[Array, ""]:
        queries, positions, query_segment = inputs
        logits = jnp.einsum("btkgd,bskd->bkgts", queries, k, preferred_element_type=jnp.float32)
        kept = (positions[:, None] >= key_positions[None, :])[None] & (
            query_segment[:, :, None] == segments[:, None, :]
        )
        return jnp.where(kept[:, None, None], logits, -jnp.inf).max()

    per_block = jax.lax.map(
        block_max, (jnp.moveaxis(grouped, 1, 0), query_positions, jnp.moveaxis(query_segments, 1, 0))
    )
    return per_block.max()


def cudnn_segments(
    segment_ids: Int[Array, "batch seq"], max_segments: int
) -> tuple[Int[Array, "batch segments"], Int[Array, "batch segments_plus_1"]]:
    """`(seqlens, offsets)` of each row's documents in cuDNN's packed layout, -1 past the row's last document.

    A document starts wherever the segment id changes. `max_segments` is the
    static bound on documents per row (the sequence length always suffices); in
    a row with more, the last kept document runs to the row's end, so
    `cudnn_attention` never gives cuDNN such a row.
    """
    batch, seq = segment_ids.shape
    starts = jnp.concatenate([jnp.ones((batch, 1), bool), segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1)
    positions = jnp.where(starts, jnp.arange(seq, dtype=jnp.int32)[None, :], seq)
    first = jnp.sort(positions, axis=1)[:, :max_segments]
    first = jnp.pad(first, ((0, 0), (0, max(0, max_segments - seq))), constant_values=seq)
    ends = jnp.concatenate([first[:, 1:], jnp.full((batch, 1), seq, jnp.int32)], axis=1)
    valid = first < seq
    seqlens = jnp.where(valid, ends - first, -1).astype(jnp.int32)
    offsets = jnp.where(valid, first, -1).astype(jnp.int32)
    return seqlens, jnp.pad(offsets, ((0, 0), (0, 1)), constant_values=-1)


def segments_mask(
    seqlens: Int[Array, "batch segments"], offsets: Int[Array, "batch segments_plus_1"], seq: int
) -> Bool[Array, "batch 1 seq seq"]:
    """The dense mask cuDNN's `PADDING_CAUSAL` masking applies for packed documents: causal inside each document.

    The reference for what `cudnn_attention` is given, evaluated anywhere.
    """
    position = jnp.arange(seq)
    start, length = offsets[:, :-1, None], seqlens[:, :, None]
    member = (length > 0) & (position[None, None, :] >= start) & (position[None, None, :] < start + length)
    same_doc = jnp.einsum("bmt,bms->bts", member.astype(jnp.int32), member.astype(jnp.int32)) > 0
    causal = position[:, None] >= position[None, :]
    return (same_doc & causal[None])[:, None]


PACKED_MAX_DOCUMENTS = 64
"""Documents per row in cuDNN's packed layout: 64 covers rows of 64-token documents at seq 4096; a batch with a
fuller row runs cuDNN with the dense mask (same result, more memory traffic). NOT IN SEEDS: MaxText's
`max_segments_per_seq` plays this part."""


def documents_per_row(segment_ids: Int[Array, "batch seq"]) -> Int[Array, " batch"]:
    """How many documents each row holds: one plus the number of places its segment id changes."""
    return 1 + jnp.sum(segment_ids[:, 1:] != segment_ids[:, :-1], axis=1, dtype=jnp.int32)


def packed_layout_supported() -> bool:
    """Whether the default device takes cuDNN's packed layout: a GPU of compute capability 9.0 (Hopper) or later."""
    capability = getattr(jax.devices()[0], "compute_capability", None)
    return capability is not None and float(capability) >= 9.0


def cudnn_attention(
    q: Float[Array, "batch seq heads dim"],
    k: Float[Array, "batch seq kv_heads dim"],
    v: Float[Array, "batch seq kv_heads dim"],
    segment_ids: Int[Array, "batch seq"] | None,
) -> Float[Array, "batch seq heads dim"]:
    """cuDNN's fused flash attention (GPU, bf16/fp16): causal, and inside each document when segment ids are given.

    Packed documents go through JAX's cuDNN binding directly
    (`jax._src.cudnn.fused_attention_stablehlo`, as AXLearn does), because
    `jax.nn.dot_product_attention` exposes only padding lengths, not document
    offsets. cuDNN's packed layout needs Hopper or later; on older GPUs the
    documents reach cuDNN as the dense mask (which it applies as a bias), and
    so do the batches that hold a row of more than `PACKED_MAX_DOCUMENTS`.
    """
    scale = 1 / math.sqrt(q.shape[-1])
    if segment_ids is None:
        return jax.nn.dot_product_attention(q, k, v, scale=scale, is_causal=True, implementation="cudnn")

    def masked(q: Array, k: Array, v: Array) -> Array:
        mask = attention_mask(segment_ids, q.shape[0], q.shape[1])
        return jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, implementation="cudnn")

    if not packed_layout_supported():
        return masked(q, k, v)
    try:
        from jax._src.cudnn.fused_attention_stablehlo import MaskType
        from jax._src.cudnn.fused_attention_stablehlo import dot_product_attention as fused
    except ImportError as error:
        raise TootsieError(
            f"this JAX ({jax.__version__}) has no cuDNN packed-attention binding ({error});"
            " set the model's attention: xla"
        ) from error
    bound = min(PACKED_MAX_DOCUMENTS, q.shape[1])
    seqlens, offsets = cudnn_segments(segment_ids, bound)

    def packed(q: Array, k: Array, v: Array) -> Array:
        return fused(
            q,
            k,
            v,
            q_seqlen=seqlens,
            kv_seqlen=seqlens,
            q_offsets=offsets,
            kv_offsets=offsets,
            scale=scale,
            mask_type=MaskType.PADDING_CAUSAL,
        )

    return jax.lax.cond(documents_per_row(segment_ids).max() <= bound, packed, masked, q, k, v)


ATTENTION_IMPLEMENTATIONS = {"auto": None, "xla": xla_attention, "cudnn": cudnn_attention}
"""`LlamaConfig.attention` → the attention function; `auto` resolves by platform (`resolve_attention`)."""
AttentionChoice = names_literal(ATTENTION_IMPLEMENTATIONS)
"""The type of `LlamaConfig.attention`: a key of ATTENTION_IMPLEMENTATIONS, checked when a config file is loaded."""


def resolve_attention(name: str, dtype: jnp.dtype) -> str:
    """The implementation `name` stands for: `auto` is `cudnn` on GPU in bf16/fp16 (all cuDNN takes), else `xla`."""
    if name == "auto":
        half = jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
        return "cudnn" if half and jax.default_backend() == "gpu" else "xla"
    return name


def attend(
    name: str,
    q: Float[Array, "batch seq heads dim"],
    k: Float[Array, "batch seq kv_heads dim"],
    v: Float[Array, "batch seq kv_heads dim"],
    segment_ids: Int[Array, "batch seq"] | None,
    mask: Bool[Array, "batch 1 seq seq"] | None,
) -> Float[Array, "batch seq heads dim"]:
    """Attention by the implementation `name` (resolved); `mask` is the XLA path's, built once per forward."""
    if resolve_attention(name, q.dtype) == "cudnn":
        return cudnn_attention(q, k, v, segment_ids)
    return xla_attention(q, k, v, _dense_mask(mask))


def attend_and_logit_max(
    name: str,
    q: Float[Array, "batch seq heads dim"],
    k: Float[Array, "batch seq kv_heads dim"],
    v: Float[Array, "batch seq kv_heads dim"],
    segment_ids: Int[Array, "batch seq"] | None,
    mask: Bool[Array, "batch 1 seq seq"] | None,
) -> tuple[Float[Array, "batch seq heads dim"], Float[Array, ""]]:
    """`attend`, and the largest pre-softmax logit: from the XLA path's own logits, or recomputed beside cuDNN."""
    if resolve_attention(name, q.dtype) == "cudnn":
        return cudnn_attention(q, k, v, segment_ids), logit_max_from_qk(q, k, segment_ids)
    return xla_attention_and_logit_max(q, k, v, _dense_mask(mask))


def _dense_mask(mask: Bool[Array, "batch 1 seq seq"] | None) -> Bool[Array, "batch 1 seq seq"]:
    """The XLA path's mask, or the error that says it was not built."""
    if mask is None:
        raise ValueError("the xla attention path needs the dense mask of attention_mask()")
    return mask
