"""A Llama-style decoder: RMSNorm, RoPE, grouped-query attention, SwiGLU.

Layers are stacked (every block's weights carry a leading `num_layers` axis) and
run with `jax.lax.scan`, so compile time does not grow with depth. Attention is
causal and blocked across documents when segment ids are given, through cuDNN's
fused kernel on GPU and two einsums elsewhere (`tootsie.models.attention`).
`qk_norm=True` adds Qwen3's per-head RMSNorm on queries and keys.

The training forward (`hidden_states_and_aux(..., signals=True)`) also returns
each layer's largest pre-softmax attention logit, `aux/attn_logit_max`: the
logit softmax sees, after QK-norm when the model has it, so a QK-norm model
shows what the norm bounds and a plain one shows the growth it would stop.

Weights are plain arrays (not `eqx.nn.Linear`) so the matmuls and the Hugging
Face layout mapping are explicit: `wq` is `[hidden, heads * head_dim]`. Every
weight matmul runs on `[batch * seq, features]` matrices: with the batch and
sequence as two axes, XLA's CPU backend transposed activations for the weight
gradients, which cost about a third of the step (measured on the CPU benchmark
shape, docs/training.md).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from tootsie.configfile import names_literal, unhashed
from tootsie.models.activation_sharding import constrain
from tootsie.models.attention import (
    ATTENTION_IMPLEMENTATIONS,
    AttentionChoice,
    attend,
    attend_and_logit_max,
    attention_mask,
    resolve_attention,
)


@dataclass(frozen=True)
class Llama3RopeScaling:
    """Llama 3's RoPE frequency scaling (long wavelengths stretched, short kept, a smooth band between)."""

    factor: float = 8.0
    """How much the lowest frequencies are slowed down."""
    low_freq_factor: float = 1.0
    """Wavelengths above original_max_position / low_freq_factor are scaled by `factor`."""
    high_freq_factor: float = 4.0
    """Wavelengths below original_max_position / high_freq_factor are left alone."""
    original_max_position: int = 8192
    """Context length the unscaled frequencies were trained for."""

    def __post_init__(self) -> None:
        if self.factor <= 0 or self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                "need factor > 0 and high_freq_factor > low_freq_factor,"
                f" got {self.factor=}, {self.low_freq_factor=}, {self.high_freq_factor=}"
            )

    def scale(self, inv_freq: Float[Array, " half"]) -> Float[Array, " half"]:
        """Scaled inverse frequencies (the Hugging Face `rope_type="llama3"` rule)."""
        wavelength = 2 * math.pi / inv_freq
        low_wavelength = self.original_max_position / self.low_freq_factor
        high_wavelength = self.original_max_position / self.high_freq_factor
        scaled = jnp.where(wavelength > low_wavelength, inv_freq / self.factor, inv_freq)
        smooth = (self.original_max_position / wavelength - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        blended = (1 - smooth) * scaled / self.factor + smooth * scaled
        medium = (wavelength >= high_wavelength) & (wavelength <= low_wavelength)
        return jnp.where(medium, blended, scaled)


REMAT_POLICIES = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "none": None,
}
"""`LlamaConfig.remat` → what a block keeps for the backward pass (None: everything)."""
RematPolicy = names_literal(REMAT_POLICIES)
"""The type of `LlamaConfig.remat`: a key of REMAT_POLICIES, checked when a config file is loaded.

A name with no options, so a `Literal`, not a `kind:` registry.
"""


@dataclass(frozen=True)
class LlamaConfig:
    """Shape and numerics of a Llama-style decoder."""

    vocab_size: int = 4096
    """Number of token ids."""
    hidden_dim: int = 256
    """Width of the residual stream."""
    intermediate_dim: int = 1024
    """Width of the SwiGLU MLP."""
    num_layers: int = 4
    """Number of transformer blocks."""
    num_heads: int = 4
    """Query heads."""
    num_kv_heads: int = 4
    """Key/value heads (grouped-query attention when fewer than num_heads)."""
    head_dim: int | None = None
    """Per-head width; hidden_dim // num_heads when None."""
    rope_theta: float = 10_000.0
    """RoPE base frequency (Llama 2: 1e4; Llama 3: 5e5)."""
    rope_scaling: Llama3RopeScaling | None = None
    """Llama 3 frequency scaling; None for plain (Llama 2) RoPE."""
    norm_eps: float = 1e-5
    """RMSNorm epsilon."""
    tie_embeddings: bool = False
    """Use the input embedding as the output projection."""
    qk_norm: bool = False
    """Qwen3-style RMSNorm on each head's queries and keys."""
    initializer_std: float = 0.02
    """Standard deviation of the normal initialization of every matrix."""
    remat: RematPolicy = "full"
    """Activation recomputation in the backward pass.

    `full` keeps only each block's input (least memory, and the fastest on CPU, where the step is
    memory-bound), `dots` keeps the weight matmuls' outputs, `none` keeps everything.
    """
    attention: AttentionChoice = unhashed("auto")
    """Attention kernel: `xla`, `cudnn` (GPU, bf16/fp16), or `auto` (cuDNN where it runs, else XLA).

    Unhashed, as the mesh: it changes how the same function is computed, not what.
    """

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_dim", "intermediate_dim", "num_layers", "num_heads", "num_kv_heads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.head_dim is None and self.hidden_dim % self.num_heads:
            raise ValueError(
                f"hidden_dim={self.hidden_dim} is not divisible by num_heads={self.num_heads}; set head_dim explicitly"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads}")
        if self.resolved_head_dim % 2:
            raise ValueError(f"head_dim={self.resolved_head_dim} must be even for RoPE")
        if self.remat not in REMAT_POLICIES:
            raise ValueError(f"remat must be one of {sorted(REMAT_POLICIES)}, got {self.remat!r}")
        if self.attention not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"attention must be one of {sorted(ATTENTION_IMPLEMENTATIONS)}, got {self.attention!r}")

    @property
    def resolved_head_dim(self) -> int:
        """The per-head width actually used."""
        return self.head_dim if self.head_dim is not None else self.hidden_dim // self.num_heads

    def build(self, *, key: PRNGKeyArray) -> "LlamaModel":
        """A freshly initialized model of this shape (the model registry's constructor)."""
        return LlamaModel(self, key=key)

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Parameter count, computed from the shapes."""
        d, h = self.resolved_head_dim, self.hidden_dim
        attention = h * d * (2 * self.num_heads + 2 * self.num_kv_heads)
        mlp = 3 * h * self.intermediate_dim
        norms = 2 * h + (2 * d if self.qk_norm else 0)
        blocks = self.num_layers * (attention + mlp + norms)
        embeddings = self.vocab_size * h * (1 if self.tie_embeddings else 2)
        return blocks + h + (embeddings if include_embeddings else 0)

    def active_parameters(self, include_embeddings: bool = True) -> int:
        """Parameters a token passes through: all of them in a dense decoder (an MoE counts only its chosen experts)."""
        return self.num_parameters(include_embeddings)

    def block_matmul_parameters(self) -> int:
        """Weights of every block's matmuls that a token multiplies (attention projections and the MLP)."""
        d, h = self.resolved_head_dim, self.hidden_dim
        return self.num_layers * h * (d * (2 * self.num_heads + 2 * self.num_kv_heads) + 3 * self.intermediate_dim)

    def flops_per_token(self, seq_len: int, *, recompute: bool = False, dense_attention: bool = False) -> float:
        """Training FLOPs per token (forward + backward = 3x forward), attention included, on active parameters.

        The default is the model FLOPs MFU counts. `recompute=True` adds the
        forward work the `remat` policy redoes in the backward (`full`: each
        block's forward; `dots`: attention's two batched products, which it does
        not save), and `dense_attention=True` counts attention's masked upper
        half, which the XLA path computes and cuDNN skips: together, what the
        compiled step executes.
        """
        matmul_params = self.active_parameters(include_embeddings=False) + self.vocab_size * self.hidden_dim
        # QK^T and AV: 2 FLOPs x seq x head_dim x heads each per token, half of it under the causal mask.
        attention = (4 if dense_attention else 2) * self.num_layers * seq_len * self.num_heads * self.resolved_head_dim
        recomputed = {"none": 0.0, "dots": attention, "full": 2 * self.block_matmul_parameters() + attention}[
            self.remat
        ]
        return 3 * (2 * matmul_params + attention) + (recomputed if recompute else 0.0)


class RMSNorm(eqx.Module):
    """Root-mean-square normalization with a learned scale, computed in float32."""

    weight: Float[Array, " dim"]
    eps: float = eqx.field(static=True)

    def __init__(self, dim: int, eps: float) -> None:
        self.weight = jnp.ones((dim,), jnp.float32)
        self.eps = eps

    def __call__(self, x: Float[Array, "... dim"]) -> Float[Array, "... dim"]:
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        scale = self.weight.astype(jnp.float32).reshape((1,) * (x.ndim - 1) + (-1,))
        return (normed * scale).astype(x.dtype)


def rope_tables(
    seq_len: int, head_dim: int, theta: float, scaling: Llama3RopeScaling | None = None
) -> tuple[Float[Array, "seq half"], Float[Array, "seq half"]]:
    """Cosine and sine tables of rotary position embeddings for positions 0..seq_len-1."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    if scaling is not None:
        inv_freq = scaling.scale(inv_freq)
    angles = jnp.arange(seq_len, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    return jnp.cos(angles), jnp.sin(angles)


def apply_rope(
    x: Float[Array, "batch seq heads dim"], cos: Float[Array, "*rows seq half"], sin: Float[Array, "*rows seq half"]
) -> Float[Array, "batch seq heads dim"]:
    """Rotate query/key channel pairs (first half, second half), the Hugging Face Llama layout.

    Tables are `[seq, half]` (every row at positions 0..seq-1) or `[batch, seq, half]`
    (each row at its own positions, as in cached decoding of prompts of different lengths).
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    cos, sin = (cos[None], sin[None]) if cos.ndim == 2 else (cos, sin)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def normal_init(key: PRNGKeyArray, shape: tuple[int, ...], std: float) -> Float[Array, "..."]:
    """A float32 weight drawn from N(0, std²): every matrix's initialization."""
    return std * jax.random.normal(key, shape, jnp.float32)


class Attention(eqx.Module):
    """Grouped-query self-attention with RoPE and optional QK-norm."""

    wq: Float[Array, "hidden qdim"]
    wk: Float[Array, "hidden kvdim"]
    wv: Float[Array, "hidden kvdim"]
    wo: Float[Array, "qdim hidden"]
    q_norm: RMSNorm | None
    k_norm: RMSNorm | None
    num_heads: int = eqx.field(static=True)
    num_kv_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    implementation: str = eqx.field(static=True)

    def __init__(self, config: LlamaConfig, *, key: PRNGKeyArray) -> None:
        kq, kk, kv, ko = jax.random.split(key, 4)
        h, d, std = config.hidden_dim, config.resolved_head_dim, config.initializer_std
        self.wq = normal_init(kq, (h, config.num_heads * d), std)
        self.wk = normal_init(kk, (h, config.num_kv_heads * d), std)
        self.wv = normal_init(kv, (h, config.num_kv_heads * d), std)
        self.wo = normal_init(ko, (config.num_heads * d, h), std)
        self.q_norm = RMSNorm(d, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(d, config.norm_eps) if config.qk_norm else None
        self.num_heads, self.num_kv_heads, self.head_dim = config.num_heads, config.num_kv_heads, d
        self.implementation = config.attention

    def __call__(
        self,
        x: Float[Array, "batch seq hidden"],
        cos: Float[Array, "seq half"],
        sin: Float[Array, "seq half"],
        segment_ids: Int[Array, "batch seq"] | None,
        mask: Array | None,
    ) -> Float[Array, "batch seq hidden"]:
        q, k, v = self.project(x, cos, sin)
        return self.merge(attend(self.implementation, q, k, v, segment_ids, mask), x.dtype)

    def with_logit_max(
        self,
        x: Float[Array, "batch seq hidden"],
        cos: Float[Array, "seq half"],
        sin: Float[Array, "seq half"],
        segment_ids: Int[Array, "batch seq"] | None,
        mask: Array | None,
    ) -> tuple[Float[Array, "batch seq hidden"], Float[Array, ""]]:
        """The attention output and the largest pre-softmax logit over every head and kept position."""
        q, k, v = self.project(x, cos, sin)
        out, logit_max = attend_and_logit_max(self.implementation, q, k, v, segment_ids, mask)
        return self.merge(out, x.dtype), logit_max

    def project(
        self,
        x: Float[Array, "batch seq hidden"],
        cos: Float[Array, "*rows seq half"],
        sin: Float[Array, "*rows seq half"],
    ) -> tuple[
        Float[Array, "batch seq heads dim"],
        Float[Array, "batch seq kv_heads dim"],
        Float[Array, "batch seq kv_heads dim"],
    ]:
        """Queries, keys and values per head, QK-normed and rotated (shared by training and cached decoding)."""
        batch, seq, hidden = x.shape
        rows = x.reshape(batch * seq, hidden)
        q = (rows @ self.wq.astype(x.dtype)).reshape(batch, seq, self.num_heads, self.head_dim)
        k = (rows @ self.wk.astype(x.dtype)).reshape(batch, seq, self.num_kv_heads, self.head_dim)
        v = (rows @ self.wv.astype(x.dtype)).reshape(batch, seq, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def merge(self, out: Float[Array, "batch seq heads dim"], dtype: jnp.dtype) -> Float[Array, "batch seq hidden"]:
        """The output projection of every head's attention output back to the residual stream."""
        batch, seq = out.shape[:2]
        rows = out.reshape(batch * seq, self.num_heads * self.head_dim) @ self.wo.astype(dtype)
        return rows.reshape(batch, seq, -1)


class SwiGLU(eqx.Module):
    """The gated MLP `down(silu(gate(x)) * up(x))`."""

    w_gate: Float[Array, "hidden inter"]
    w_up: Float[Array, "hidden inter"]
    w_down: Float[Array, "inter hidden"]

    def __init__(self, config: LlamaConfig, *, key: PRNGKeyArray) -> None:
        kg, ku, kd = jax.random.split(key, 3)
        h, i, std = config.hidden_dim, config.intermediate_dim, config.initializer_std
        self.w_gate, self.w_up, self.w_down = (
            normal_init(kg, (h, i), std),
            normal_init(ku, (h, i), std),
            normal_init(kd, (i, h), std),
        )

    def __call__(self, x: Float[Array, "batch seq hidden"]) -> Float[Array, "batch seq hidden"]:
        rows = x.reshape(-1, x.shape[-1])
        gate = jax.nn.silu(rows @ self.w_gate.astype(x.dtype))
        return ((gate * (rows @ self.w_up.astype(x.dtype))) @ self.w_down.astype(x.dtype)).reshape(x.shape)


class Block(eqx.Module):
    """One pre-norm transformer block."""

    attn_norm: RMSNorm
    attn: Attention
    mlp_norm: RMSNorm
    mlp: SwiGLU

    def __init__(self, config: LlamaConfig, *, key: PRNGKeyArray) -> None:
        ka, km = jax.random.split(key)
        self.attn_norm, self.mlp_norm = (
            RMSNorm(config.hidden_dim, config.norm_eps),
            RMSNorm(config.hidden_dim, config.norm_eps),
        )
        self.attn, self.mlp = Attention(config, key=ka), SwiGLU(config, key=km)

    def __call__(
        self,
        x: Float[Array, "batch seq hidden"],
        cos: Array,
        sin: Array,
        segment_ids: Int[Array, "batch seq"] | None,
        mask: Array | None,
    ) -> Float[Array, "batch seq hidden"]:
        x = x + self.attn(self.attn_norm(x), cos, sin, segment_ids, mask)
        return x + self.mlp(self.mlp_norm(x))

    def with_logit_max(
        self,
        x: Float[Array, "batch seq hidden"],
        cos: Array,
        sin: Array,
        segment_ids: Int[Array, "batch seq"] | None,
        mask: Array | None,
    ) -> tuple[Float[Array, "batch seq hidden"], Float[Array, ""]]:
        """The block's output and its attention's largest pre-softmax logit (the training forward's signal)."""
        attended, logit_max = self.attn.with_logit_max(self.attn_norm(x), cos, sin, segment_ids, mask)
        x = x + attended
        return x + self.mlp(self.mlp_norm(x)), logit_max


class LlamaModel(eqx.Module):
    """Token embedding, stacked blocks run by `scan`, final norm, output projection."""

    embed: Float[Array, "vocab hidden"]
    layers: Block
    final_norm: RMSNorm
    lm_head: Float[Array, "hidden vocab"] | None
    config: LlamaConfig = eqx.field(static=True)

    def __init__(self, config: LlamaConfig, *, key: PRNGKeyArray) -> None:
        k_embed, k_layers, k_head = jax.random.split(key, 3)
        self.config = config
        self.embed, self.final_norm, self.lm_head = decoder_ends(config, k_embed, k_head)
        self.layers = stack_blocks(lambda k: Block(config, key=k), config.num_layers, k_layers)

    def __call__(
        self, tokens: Int[Array, "batch seq"], segment_ids: Int[Array, "batch seq"] | None = None
    ) -> Float[Array, "batch seq vocab"]:
        """Next-token logits for every position."""
        hidden = self.hidden_states(tokens, segment_ids)
        return hidden @ self.output_head().astype(hidden.dtype)

    def output_head(self) -> Float[Array, "hidden vocab"]:
        """The output projection: the untied head, or the transposed embedding when tied."""
        return self.embed.T if self.lm_head is None else self.lm_head

    def hidden_states(
        self, tokens: Int[Array, "batch seq"], segment_ids: Int[Array, "batch seq"] | None = None
    ) -> Float[Array, "batch seq hidden"]:
        """The final-normed hidden state of every position (the training loss projects it chunk by chunk)."""
        x, inputs = block_inputs(self.config, self.embed, tokens, segment_ids)
        x, _ = scan_blocks(self.layers, x, self.config.remat, lambda block, h: (block(h, *inputs), None))
        return self.final_norm(x)

    def hidden_states_and_aux(
        self,
        tokens: Int[Array, "batch seq"],
        segment_ids: Int[Array, "batch seq"] | None = None,
        *,
        signals: bool = False,
    ) -> tuple[Float[Array, "batch seq hidden"], Float[Array, ""], dict[str, Array]]:
        """The training forward: hidden states, the model's own auxiliary loss (none for a Llama) and its metrics.

        With `signals`, the metrics hold `aux/attn_logit_max` (`[layers]`); without, they are empty.
        """
        if not signals:
            return self.hidden_states(tokens, segment_ids), jnp.zeros((), jnp.float32), {}
        x, inputs = block_inputs(self.config, self.embed, tokens, segment_ids)
        x, logit_max = scan_blocks(self.layers, x, self.config.remat, lambda block, h: block.with_logit_max(h, *inputs))
        return self.final_norm(x), jnp.zeros((), jnp.float32), {ATTN_LOGIT_MAX: logit_max}

    def logical_axes(self) -> dict[str, tuple[str, ...]]:
        """Logical axis names of every weight, keyed by its path (see `logical_axes`)."""
        return logical_axes(self, PARAM_AXES)


def decoder_ends(
    config: LlamaConfig, k_embed: PRNGKeyArray, k_head: PRNGKeyArray
) -> tuple[Float[Array, "vocab hidden"], RMSNorm, Float[Array, "hidden vocab"] | None]:
    """A decoder's token embedding, final norm and output head (None when tied to the embedding), initialized."""
    embed = normal_init(k_embed, (config.vocab_size, config.hidden_dim), config.initializer_std)
    head = (
        None
        if config.tie_embeddings
        else normal_init(k_head, (config.hidden_dim, config.vocab_size), config.initializer_std)
    )
    return embed, RMSNorm(config.hidden_dim, config.norm_eps), head


def stack_blocks(make_block: Callable[[PRNGKeyArray], eqx.Module], count: int, key: PRNGKeyArray) -> eqx.Module:
    """`count` blocks of `make_block(key)` with their weights stacked on a leading layer axis (for `scan_blocks`)."""
    return eqx.filter_vmap(make_block)(jax.random.split(key, count))


ATTN_LOGIT_MAX = "aux/attn_logit_max"
"""Metric name of each layer's largest pre-softmax attention logit in a step (`[layers]`, dense layers first)."""
BlockInputs = tuple[Array, Array, Int[Array, "batch seq"] | None, Array | None]
"""What every block of a forward pass takes besides the hidden states: (cos, sin, segment_ids, mask)."""


def block_inputs(
    config: LlamaConfig,
    embed: Float[Array, "vocab hidden"],
    tokens: Int[Array, "batch seq"],
    segment_ids: Int[Array, "batch seq"] | None,
) -> tuple[Float[Array, "batch seq hidden"], BlockInputs]:
    """The embedded tokens and the inputs every block shares: RoPE tables and the XLA path's attention mask."""
    batch, seq = tokens.shape
    x = constrain(embed[tokens])
    cos, sin = rope_tables(seq, config.resolved_head_dim, config.rope_theta, config.rope_scaling)
    cudnn = resolve_attention(config.attention, x.dtype) == "cudnn"
    mask = None if cudnn else attention_mask(segment_ids, batch, seq)
    return x, (cos, sin, segment_ids, mask)


def scan_blocks(
    stack: eqx.Module, x: Float[Array, "batch seq hidden"], remat: str, call: Callable[[Any, Array], tuple[Array, Any]]
) -> tuple[Float[Array, "batch seq hidden"], Any]:
    """Run stacked blocks over `x` with `scan` under the `remat` policy; `call(block, h)` gives (h, per-layer output).

    The per-layer outputs come back stacked (`[layers, ...]`), as MoE router statistics do.
    """
    dynamic, static = eqx.partition(stack, eqx.is_array)

    def run_block(h: Array, block_params: eqx.Module) -> tuple[Array, Any]:
        h, out = call(eqx.combine(block_params, static), h)
        return constrain(h), out

    policy = REMAT_POLICIES[remat]
    return jax.lax.scan(run_block if policy is None else jax.checkpoint(run_block, policy=policy), x, dynamic)


PARAM_AXES: dict[str, tuple[str, ...]] = {
    "embed": ("vocab", "hidden"),
    "lm_head": ("hidden", "vocab"),
    "wq": ("hidden", "qdim"),
    "wk": ("hidden", "kvdim"),
    "wv": ("hidden", "kvdim"),
    "wo": ("qdim", "hidden"),
    "w_gate": ("hidden", "inter"),
    "w_up": ("hidden", "inter"),
    "w_down": ("inter", "hidden"),
    "weight": ("norm",),
}
"""Logical axis names of every weight, by field name.

The dims of the annotations above; every RMSNorm scale is `weight`.
"""
STACKED_AXIS = "layers"
"""Logical name of the leading axis that stacking adds to every leaf of a stack of blocks."""
STACKED_FIELDS = ("layers", "dense")
"""Model fields that hold stacked blocks (`LlamaModel.layers`; an MoE model's `layers` and leading `dense` blocks)."""


def logical_axes(params: eqx.Module, param_axes: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Logical axis names of every weight, keyed by its path: `.layers.attn.wq` → ("layers", "hidden", "qdim").

    `param_axes` names each weight field's dimensions. Sharding rules map the
    names to mesh axes (`tootsie.train.sharding`), so the model says what its
    dimensions are and the trainer decides where they live.
    """
    axes = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        name = jax.tree_util.keystr(path)
        field = getattr(path[-1], "name", None)
        if field not in param_axes:
            raise ValueError(f"weight {name} has no logical axes; add its field {field!r} to the model's PARAM_AXES")
        stacked = (STACKED_AXIS,) if getattr(path[0], "name", None) in STACKED_FIELDS else ()
        axes[name] = stacked + param_axes[field]
        if len(axes[name]) != len(leaf.shape):
            raise ValueError(
                f"weight {name} has shape {tuple(leaf.shape)} but logical axes {axes[name]}; fix PARAM_AXES"
            )
    return axes
