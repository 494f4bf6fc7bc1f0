"""A mixture-of-experts decoder: the Llama decoder with each MLP replaced by routed SwiGLU experts (Grug-style).

Every MoE block is the Llama block (RMSNorm, RoPE attention with optional
QK-norm) whose MLP is `MoeMLP`: a linear router picks `experts_per_token`
of `num_experts` SwiGLU experts per token (`tootsie.models.routing`), the
experts run through one of two backends (`tootsie.models.experts`), and their
outputs are summed with the router's weights, plus `num_shared_experts`
always-on experts. The first `dense_layers` blocks keep a dense MLP (Grug's
default is none). All blocks of a kind are stacked and run with `scan`.

Two forwards. Training (`hidden_states_and_aux`) routes under the capacity
factor, drops overflow, and returns the weighted router losses with the
per-layer router statistics as `moe/` metrics. Inference (`hidden_states`,
`__call__`, the KV-cache decoder, held-out evaluation and export parity) is
dropless, so a token's output never depends on the other tokens of its batch.
Inside the trainer's step on a mesh that splits the batch, every layer routes
per expert group and its experts run split over the `expert` axis
(`tootsie.models.expert_parallel`, ring EP).

Parameter and FLOP counts distinguish total from active: a token passes
through the router, its k experts and the shared ones (`active_parameters`,
which MFU's `flops_per_token` counts).

Example: `MoeConfig(num_experts=8, experts_per_token=2, hidden_dim=128,
intermediate_dim=256)`: each of 4 blocks has 8 experts of width 256, each token
uses 2 of them, and each expert takes at most ceil(1.0 · tokens · 2 / 8) of a
batch's assignments.
"""

import dataclasses
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from tootsie.configfile import unhashed
from tootsie.models.expert_parallel import expert_parallel_mesh, ring_expert_parallel
from tootsie.models.experts import EXPERT_BACKENDS, ExpertBackend, expert_outputs
from tootsie.models.llama import (
    ATTN_LOGIT_MAX,
    PARAM_AXES,
    Attention,
    Block,
    LlamaConfig,
    RMSNorm,
    SwiGLU,
    block_inputs,
    decoder_ends,
    logical_axes,
    normal_init,
    scan_blocks,
    stack_blocks,
)
from tootsie.models.routing import ROUTER_WEIGHTS, RouterStats, RouterWeights, capacity_slots, route

MOE_METRIC_PREFIX = "moe/"
"""Record-name prefix of the router metrics a training step logs."""


@dataclass(frozen=True)
class MoeConfig(LlamaConfig):
    """A Llama-shaped decoder whose MLPs are mixtures of SwiGLU experts.

    `intermediate_dim` is each expert's width (Mixtral's `intermediate_size`).
    """

    num_experts: int = 8
    """Routed experts per MoE block."""
    experts_per_token: int = 2
    """k: experts each token is routed to."""
    num_shared_experts: int = 0
    """Experts every token passes through besides its routed k (each `intermediate_dim` wide)."""
    dense_layers: int = 0
    """The first N blocks keep a dense MLP instead of experts (Grug's default: 0)."""
    dense_intermediate_dim: int | None = None
    """MLP width of those dense blocks; None: k × intermediate_dim (a dense block as wide as a token's experts)."""
    capacity_factor: float | None = 1.0
    """Slots per expert as a multiple of an even share of the batch's assignments; None: dropless.

    Overflow assignments are dropped (the token keeps its residual). Training only: inference is dropless.
    """
    router_weights: RouterWeights = "renormalized"
    """Combine weights: `renormalized` (softmax, renormalised over the chosen k) or `softmax` (not renormalised)."""
    load_balancing_weight: float = 0.01
    """Weight of the Switch load-balancing loss (1.0 at uniform load) in the objective."""
    router_z_loss_weight: float = 0.001
    """Weight of the router z-loss (mean squared logsumexp of the router logits) in the objective."""
    expert_backend: ExpertBackend = unhashed("auto")
    """Expert compute: `padded` (capacity buffers, the CPU fast path), `ragged` (`ragged_dot`), `auto` by platform.

    Unhashed, as the attention kernel: it changes how the same function is computed, not what.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_experts < 1 or not 1 <= self.experts_per_token <= self.num_experts:
            raise ValueError(
                f"need num_experts >= 1 and 1 <= experts_per_token <= num_experts, "
                f"got {self.num_experts=}, {self.experts_per_token=}"
            )
        if self.num_shared_experts < 0:
            raise ValueError(f"num_shared_experts must be >= 0, got {self.num_shared_experts}")
        if not 0 <= self.dense_layers < self.num_layers:
            raise ValueError(
                f"dense_layers must be in [0, num_layers) so at least one block has experts, "
                f"got {self.dense_layers} of {self.num_layers}"
            )
        if self.dense_intermediate_dim is not None and (self.dense_layers == 0 or self.dense_intermediate_dim <= 0):
            raise ValueError(
                f"dense_intermediate_dim={self.dense_intermediate_dim} needs dense_layers > 0 and a positive width"
            )
        if self.capacity_factor is not None and not self.capacity_factor > 0:
            raise ValueError(f"capacity_factor must be positive or null (dropless), got {self.capacity_factor}")
        if self.load_balancing_weight < 0 or self.router_z_loss_weight < 0:
            raise ValueError(
                f"router loss weights must be >= 0, got {self.load_balancing_weight=}, {self.router_z_loss_weight=}"
            )
        if self.router_weights not in ROUTER_WEIGHTS:
            raise ValueError(f"router_weights must be one of {sorted(ROUTER_WEIGHTS)}, got {self.router_weights!r}")
        if self.expert_backend not in EXPERT_BACKENDS:
            raise ValueError(f"expert_backend must be one of {sorted(EXPERT_BACKENDS)}, got {self.expert_backend!r}")

    @property
    def moe_layers(self) -> int:
        """Blocks with experts."""
        return self.num_layers - self.dense_layers

    @property
    def dense_width(self) -> int:
        """MLP width of the dense blocks: `dense_intermediate_dim`, or k × intermediate_dim."""
        return self.dense_intermediate_dim or self.experts_per_token * self.intermediate_dim

    def dense_config(self, layers: int, intermediate_dim: int | None = None) -> LlamaConfig:
        """A Llama config with this decoder's attention shape, `layers` blocks and MLPs `intermediate_dim` wide.

        The default width is `dense_width`: the leading dense blocks, and the matched dense baseline.
        """
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(LlamaConfig)}
        fields.update(num_layers=layers, intermediate_dim=intermediate_dim or self.dense_width)
        return LlamaConfig(**fields)

    def build(self, *, key: PRNGKeyArray) -> "MoeModel":
        """A freshly initialized model of this shape (the model registry's constructor)."""
        return MoeModel(self, key=key)

    def _mlp_parameters(self, experts: int) -> int:
        """Weights of one MoE block's MLP with `experts` routed experts counted: router, experts, shared experts."""
        h = self.hidden_dim
        return h * self.num_experts + 3 * h * self.intermediate_dim * (experts + self.num_shared_experts)

    def _with_moe_mlps(self, dense_count: int, experts: int) -> int:
        """A count over every block taken dense (`dense_count`), with each MoE block's MLP counted with `experts`."""
        dense_mlp = 3 * self.hidden_dim * self.dense_width
        return dense_count + self.moe_layers * (self._mlp_parameters(experts) - dense_mlp)

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Total parameters: every expert of every block."""
        all_dense = self.dense_config(layers=self.num_layers).num_parameters(include_embeddings)
        return self._with_moe_mlps(all_dense, self.num_experts)

    def active_parameters(self, include_embeddings: bool = True) -> int:
        """Parameters a token passes through: the router, its k experts and the shared ones, in every block."""
        all_dense = self.dense_config(layers=self.num_layers).num_parameters(include_embeddings)
        return self._with_moe_mlps(all_dense, self.experts_per_token)

    def block_matmul_parameters(self) -> int:
        """Weights of every block's matmuls that a token multiplies: attention, router, its k experts, shared ones."""
        all_dense = self.dense_config(layers=self.num_layers).block_matmul_parameters()
        return self._with_moe_mlps(all_dense, self.experts_per_token)


class MoeMLP(eqx.Module):
    """A router over stacked SwiGLU experts, plus optional always-on shared experts."""

    router: Float[Array, "hidden experts"]
    experts_gate: Float[Array, "experts hidden inter"]
    experts_up: Float[Array, "experts hidden inter"]
    experts_down: Float[Array, "experts inter hidden"]
    shared: SwiGLU | None
    config: MoeConfig = eqx.field(static=True)

    def __init__(self, config: MoeConfig, *, key: PRNGKeyArray) -> None:
        kr, kg, ku, kd, ks = jax.random.split(key, 5)
        e, h, i, std = config.num_experts, config.hidden_dim, config.intermediate_dim, config.initializer_std
        self.router = normal_init(kr, (h, e), std)
        self.experts_gate, self.experts_up = normal_init(kg, (e, h, i), std), normal_init(ku, (e, h, i), std)
        self.experts_down = normal_init(kd, (e, i, h), std)
        shared_width = config.num_shared_experts * config.intermediate_dim
        self.shared = SwiGLU(config.dense_config(1, shared_width), key=ks) if shared_width else None
        self.config = config

    def __call__(self, x: Float[Array, "batch seq hidden"]) -> Float[Array, "batch seq hidden"]:
        """The dropless output (inference: a token's output never depends on its batch)."""
        return self.routed(x, None)[0]

    def routed(
        self, x: Float[Array, "batch seq hidden"], capacity_factor: float | None
    ) -> tuple[Float[Array, "batch seq hidden"], RouterStats]:
        """The output under `capacity_factor` (None: dropless) and this layer's router statistics.

        Under an activation sharding that splits the batch, each device routes its expert group's rows and runs
        its own experts (`tootsie.models.expert_parallel`); otherwise the whole batch is routed here.
        """
        config = self.config
        router = self.router.astype(x.dtype)
        weights = (
            self.experts_gate.astype(x.dtype),
            self.experts_up.astype(x.dtype),
            self.experts_down.astype(x.dtype),
        )
        mesh = expert_parallel_mesh()
        if mesh is not None:
            out, stats = ring_expert_parallel(
                mesh,
                x,
                router,
                weights,
                k=config.experts_per_token,
                router_weights=config.router_weights,
                capacity_factor=capacity_factor,
                backend=config.expert_backend,
            )
        else:
            rows = x.reshape(-1, x.shape[-1])
            logits = jnp.dot(rows, router, preferred_element_type=jnp.float32)
            capacity = capacity_slots(rows.shape[0], config.num_experts, config.experts_per_token, capacity_factor)
            routing, stats = route(logits, config.experts_per_token, config.router_weights, capacity)
            outputs = expert_outputs(config.expert_backend, rows, routing, weights, capacity)
            out = jnp.einsum("ktd,kt->td", outputs, routing.weights.astype(x.dtype)).reshape(x.shape)
        return (out if self.shared is None else out + self.shared(x)), stats


class MoeBlock(eqx.Module):
    """One pre-norm transformer block whose MLP is a mixture of experts."""

    attn_norm: RMSNorm
    attn: Attention
    mlp_norm: RMSNorm
    mlp: MoeMLP

    def __init__(self, config: MoeConfig, *, key: PRNGKeyArray) -> None:
        ka, km = jax.random.split(key)
        self.attn_norm = RMSNorm(config.hidden_dim, config.norm_eps)
        self.mlp_norm = RMSNorm(config.hidden_dim, config.norm_eps)
        self.attn, self.mlp = Attention(config, key=ka), MoeMLP(config, key=km)

    def __call__(
        self,
        x: Float[Array, "batch seq hidden"],
        cos: Array,
        sin: Array,
        segment_ids: Int[Array, "batch seq"] | None,
        mask: Array | None,
        capacity_factor: float | None = None,
        signals: bool = False,
    ) -> tuple[Float[Array, "batch seq hidden"], tuple[RouterStats, Float[Array, ""] | None]]:
        """The block's output under `capacity_factor` (None: dropless), its router statistics, and with `signals`
        its attention's largest pre-softmax logit (else None)."""
        if signals:
            attended, logit_max = self.attn.with_logit_max(self.attn_norm(x), cos, sin, segment_ids, mask)
        else:
            attended, logit_max = self.attn(self.attn_norm(x), cos, sin, segment_ids, mask), None
        x = x + attended
        out, stats = self.mlp.routed(self.mlp_norm(x), capacity_factor)
        return x + out, (stats, logit_max)


MOE_PARAM_AXES: dict[str, tuple[str, ...]] = {
    **PARAM_AXES,
    "router": ("hidden", "experts"),
    "experts_gate": ("experts", "hidden", "inter"),
    "experts_up": ("experts", "hidden", "inter"),
    "experts_down": ("experts", "inter", "hidden"),
}
"""Logical axis names of every MoE model weight, by field name (the Llama ones, the router and the experts)."""


class MoeModel(eqx.Module):
    """Token embedding, the stacked dense blocks then the stacked MoE blocks (each run by `scan`), norm, head."""

    embed: Float[Array, "vocab hidden"]
    dense: Block | None
    layers: MoeBlock
    final_norm: RMSNorm
    lm_head: Float[Array, "hidden vocab"] | None
    config: MoeConfig = eqx.field(static=True)

    def __init__(self, config: MoeConfig, *, key: PRNGKeyArray) -> None:
        k_embed, k_layers, k_head, k_dense = jax.random.split(key, 4)
        self.config = config
        self.embed, self.final_norm, self.lm_head = decoder_ends(config, k_embed, k_head)
        self.dense = (
            stack_blocks(lambda k: Block(config.dense_config(config.dense_layers), key=k), config.dense_layers, k_dense)
            if config.dense_layers
            else None
        )
        self.layers = stack_blocks(lambda k: MoeBlock(config, key=k), config.moe_layers, k_layers)

    def __call__(
        self, tokens: Int[Array, "batch seq"], segment_ids: Int[Array, "batch seq"] | None = None
    ) -> Float[Array, "batch seq vocab"]:
        """Next-token logits for every position (dropless)."""
        return self.hidden_states(tokens, segment_ids) @ self.output_head().astype(self.embed.dtype)

    def output_head(self) -> Float[Array, "hidden vocab"]:
        """The output projection: the untied head, or the transposed embedding when tied."""
        return self.embed.T if self.lm_head is None else self.lm_head

    def _forward(
        self,
        tokens: Int[Array, "batch seq"],
        segment_ids: Int[Array, "batch seq"] | None,
        capacity: float | None,
        signals: bool = False,
    ) -> tuple[Float[Array, "batch seq hidden"], RouterStats, Float[Array, " layers"] | None]:
        """Hidden states, router statistics, and with `signals` every layer's largest attention logit."""
        x, inputs = block_inputs(self.config, self.embed, tokens, segment_ids)
        remat = self.config.remat
        dense_max = None
        if self.dense is not None:
            call = (
                (lambda block, h: block.with_logit_max(h, *inputs))
                if signals
                else (lambda block, h: (block(h, *inputs), None))
            )
            x, dense_max = scan_blocks(self.dense, x, remat, call)
        x, (stats, logit_max) = scan_blocks(
            self.layers, x, remat, lambda block, h: block(h, *inputs, capacity, signals)
        )
        if signals and dense_max is not None:
            logit_max = jnp.concatenate([dense_max, logit_max])
        return self.final_norm(x), stats, logit_max

    def hidden_states(
        self, tokens: Int[Array, "batch seq"], segment_ids: Int[Array, "batch seq"] | None = None
    ) -> Float[Array, "batch seq hidden"]:
        """The final-normed hidden state of every position, routed dropless (inference and evaluation)."""
        return self._forward(tokens, segment_ids, None)[0]

    def hidden_states_and_aux(
        self,
        tokens: Int[Array, "batch seq"],
        segment_ids: Int[Array, "batch seq"] | None = None,
        *,
        signals: bool = False,
    ) -> tuple[Float[Array, "batch seq hidden"], Float[Array, ""], dict[str, Array]]:
        """The training forward under the capacity factor: hidden states, weighted router losses, `moe/` metrics,
        and with `signals` `aux/attn_logit_max` (`[layers]`, the dense layers first)."""
        hidden, stats, logit_max = self._forward(tokens, segment_ids, self.config.capacity_factor, signals)
        metrics = router_metrics(stats)
        if logit_max is not None:
            metrics[ATTN_LOGIT_MAX] = logit_max
        return hidden, router_loss(self.config, stats), metrics

    def logical_axes(self) -> dict[str, tuple[str, ...]]:
        """Logical axis names of every weight, keyed by its path (`tootsie.models.llama.logical_axes`)."""
        return logical_axes(self, MOE_PARAM_AXES)


def router_loss(config: MoeConfig, stats: RouterStats) -> Float[Array, ""]:
    """The objective's router term: the weighted load-balancing and z losses, each a mean over MoE layers."""
    return config.load_balancing_weight * stats.load_balancing_loss.mean() + (
        config.router_z_loss_weight * stats.router_z_loss.mean()
    )


def router_metrics(stats: RouterStats) -> dict[str, Array]:
    """The step's `moe/` metrics from per-layer statistics: scalars averaged over layers, `expert_load` per layer."""
    per_layer = {"expert_load"}
    return {
        f"{MOE_METRIC_PREFIX}{name}": jax.lax.stop_gradient(value if name in per_layer else value.mean())
        for name, value in stats._asdict().items()
    }
