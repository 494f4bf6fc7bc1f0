"""Expert compute for a mixture of experts: every kept assignment through its expert's SwiGLU, two ways.

Both backends take a layer's tokens `[tokens, hidden]`, its routing
(`tootsie.models.routing`) and the stacked expert weights (`[experts, hidden,
inter]` for gate and up, `[experts, inter, hidden]` for down), and return each
assignment's expert output `[k, tokens, hidden]`, zero where it was dropped:

- `padded`: kept assignments are copied into per-expert buffers and run
  through per-expert matmuls, in whichever of two layouts has fewer rows:
  - capacity buffers (`capacity_buffer_experts`): `capacity` rows per expert
    (slot `expert · capacity + position`), three batched matmuls
    (`einsum("ecd,edf")`); `experts × capacity` rows whatever the routing;
  - tile-padded groups (`tiled_experts`): the kept assignments sorted by
    expert, each expert's group padded to whole tiles of `tile` rows, each
    tile through its expert's weights (`tiled_matmul`, a loop of small matmuls
    with its own backward); at most `kept + experts × tile` rows. Dropless,
    capacity buffers would hold `experts × tokens` rows for `k × tokens`
    assignments, E/k times the work; this layout does not.

  The fast path on XLA:CPU, where a grouped matmul computes every expert for
  every row. Both layouts compute the same function (to float rounding).
- `ragged`: assignments sorted by expert run through `jax.lax.ragged_dot`, the
  grouped matmul that the seeds use on GPU and TPU: work is the routed rows
  (dropped ones included, which are then zeroed), no padding.

`auto` picks `padded` on CPU, `ragged` on TPU, and on GPU `ragged` up to
`RAGGED_MAX_EXPERTS_GPU` experts and `padded` past it (`resolve_backend`).
Measured on XLA:CPU (issue 27), `ragged_dot` took 65.7 ms against 13.6 ms
for the padded form at 4,096 tokens, hidden 256, inter 512, 8 experts; the
backends against each other and against Levanter: docs/moe-benchmarks.md.
"""

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from tootsie.configfile import names_literal
from tootsie.models.routing import Routing

ExpertWeights = tuple[Float[Array, "e d f"], Float[Array, "e d f"], Float[Array, "e f d"]]
"""(gate, up, down) of every expert, stacked on the expert axis."""


MAX_TILE_ROWS = 128
"""Largest tile of the tiled layout; smaller when experts get fewer rows on average (`tile_rows`)."""


def tile_rows(assignments: int, num_experts: int) -> int:
    """Rows per tile: the power of two nearest below an even share of `assignments`, within [8, MAX_TILE_ROWS]."""
    share = max(1, assignments // num_experts)
    return min(MAX_TILE_ROWS, max(8, 1 << (share.bit_length() - 1)))


def _varying_axes(array: Array) -> frozenset[str]:
    """The mesh axes `array` varies over inside `shard_map` (none outside it)."""
    return jax.typeof(array).manual_axis_type.varying


def varying_like(value: Array, reference: Array) -> Array:
    """`value` typed as varying over every mesh axis `reference` varies over (inside `shard_map`; else unchanged).

    A loop's carry must keep its type: zeros that a varying block is written into must vary like it.
    """
    axes = tuple(sorted(_varying_axes(reference) - _varying_axes(value)))
    return jax.lax.pcast(value, axes, to="varying") if axes else value


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def tiled_matmul(
    rows: Float[Array, "r d"],
    weights: Float[Array, "e d f"],
    tile_expert: Int[Array, " t"],
    used: Int[Array, ""],
    tile: int,
) -> Float[Array, "r f"]:
    """`rows[i] @ weights[tile_expert[i // tile]]` for the first `used` tiles of `rows` (zero after them).

    A grouped matmul whose groups are whole tiles, one small matmul per tile in a loop: on XLA:CPU,
    `ragged_dot` multiplies every row by every expert. Rows past the used tiles are not read.
    """
    out = varying_like(jnp.zeros((rows.shape[0], weights.shape[2]), rows.dtype), rows)

    def one_tile(t: Array, out: Array) -> Array:
        block = jax.lax.dynamic_slice_in_dim(rows, t * tile, tile)
        return jax.lax.dynamic_update_slice_in_dim(out, block @ weights[tile_expert[t]], t * tile, 0)

    return jax.lax.fori_loop(0, used, one_tile, out)


def _tiled_matmul_forward(
    rows: Array, weights: Array, tile_expert: Array, used: Array, tile: int
) -> tuple[Array, tuple[Array, ...]]:
    return tiled_matmul(rows, weights, tile_expert, used, tile), (rows, weights, tile_expert, used)


def _tiled_matmul_backward(tile: int, saved: tuple[Array, ...], grad: Array) -> tuple[Array | None, ...]:
    """Row and weight gradients tile by tile: each tile's weight gradient is added into its expert's slice."""
    rows, weights, tile_expert, used = saved

    def one_tile(t: Array, grads: tuple[Array, Array]) -> tuple[Array, Array]:
        grad_rows, grad_weights = grads
        expert = tile_expert[t]
        block = jax.lax.dynamic_slice_in_dim(rows, t * tile, tile)
        grad_block = jax.lax.dynamic_slice_in_dim(grad, t * tile, tile)
        grad_rows = jax.lax.dynamic_update_slice_in_dim(grad_rows, grad_block @ weights[expert].T, t * tile, 0)
        grad_weights = jax.lax.dynamic_update_index_in_dim(
            grad_weights, grad_weights[expert] + block.T @ grad_block, expert, 0
        )
        return grad_rows, grad_weights

    zeros = (varying_like(jnp.zeros_like(rows), grad), varying_like(jnp.zeros_like(weights), grad))
    grad_rows, grad_weights = jax.lax.fori_loop(0, used, one_tile, zeros)
    return grad_rows, grad_weights, None, None


tiled_matmul.defvjp(_tiled_matmul_forward, _tiled_matmul_backward)


def tiled_experts(
    x: Float[Array, "tokens hidden"], routing: Routing, weights: ExpertWeights, capacity: int, tile: int, total: int
) -> Float[Array, "k tokens hidden"]:
    """Each kept assignment's expert output through expert groups padded to whole tiles in `total` rows.

    `total` must hold every expert's group: at least (ceil(kept / tile) + experts) tiles of `tile` rows.
    """
    gate, up, down = weights
    num_experts = gate.shape[0]
    k, tokens = routing.experts.shape
    tiles = (jnp.minimum(routing.counts, capacity) + tile - 1) // tile
    ends = jnp.cumsum(tiles)
    tile_expert = jnp.minimum(jnp.searchsorted(ends, jnp.arange(total // tile), side="right"), num_experts - 1)
    first_row = (ends - tiles) * tile
    experts = jnp.minimum(routing.experts, num_experts - 1)  # expert parallelism marks others' assignments E
    slot = jnp.where(routing.kept, first_row[experts] + routing.position, total)
    token = jnp.broadcast_to(jnp.arange(tokens, dtype=jnp.int32), (k, tokens))
    source = jnp.full((total,), tokens, jnp.int32).at[slot.reshape(-1)].set(token.reshape(-1), mode="drop")
    rows = jnp.concatenate([x, jnp.zeros((1, x.shape[1]), x.dtype)])[source]
    tile_expert, used = tile_expert.astype(jnp.int32), ends[-1].astype(jnp.int32)
    # Under expert parallelism the weights vary over `expert` only and the rows over every batch axis; cast
    # here, outside the custom VJP, so its gradient is summed over the axes the weights do not vary over.
    gate, up, down = (varying_like(weight, rows) for weight in (gate, up, down))
    gated = jax.nn.silu(tiled_matmul(rows, gate, tile_expert, used, tile))
    hidden = gated * tiled_matmul(rows, up, tile_expert, used, tile)
    out = tiled_matmul(hidden, down, tile_expert, used, tile)
    return jnp.concatenate([out, jnp.zeros((1, x.shape[1]), out.dtype)])[slot]


def capacity_buffer_experts(
    x: Float[Array, "tokens hidden"], routing: Routing, weights: ExpertWeights, capacity: int
) -> Float[Array, "k tokens hidden"]:
    """Each kept assignment's expert output through per-expert buffers of `capacity` rows (`einsum("ecd,edf")`)."""
    gate, up, down = weights
    num_experts = gate.shape[0]
    k, tokens = routing.experts.shape
    overflow = num_experts * capacity
    slot = jnp.where(routing.kept, routing.experts * capacity + routing.position, overflow)
    token = jnp.broadcast_to(jnp.arange(tokens, dtype=jnp.int32), (k, tokens))
    source = jnp.full((overflow,), tokens, jnp.int32).at[slot.reshape(-1)].set(token.reshape(-1), mode="drop")
    padded = jnp.concatenate([x, jnp.zeros((1, x.shape[1]), x.dtype)])
    buffers = padded[source].reshape(num_experts, capacity, x.shape[1])
    hidden = jax.nn.silu(jnp.einsum("ecd,edf->ecf", buffers, gate)) * jnp.einsum("ecd,edf->ecf", buffers, up)
    out = jnp.einsum("ecf,efd->ecd", hidden, down).reshape(overflow, x.shape[1])
    return jnp.concatenate([out, jnp.zeros((1, x.shape[1]), out.dtype)])[slot]


def padded_experts(
    x: Float[Array, "tokens hidden"], routing: Routing, weights: ExpertWeights, capacity: int
) -> Float[Array, "k tokens hidden"]:
    """Each assignment's expert output through capacity buffers or tile-padded groups, whichever has fewer rows.

    Zero where dropped; both layouts compute the same function (see the module docstring).
    """
    num_experts = weights[0].shape[0]
    k, tokens = routing.experts.shape
    kept_rows = min(k * tokens, num_experts * capacity)
    tile = tile_rows(kept_rows, num_experts)
    tiled_rows = (-(-kept_rows // tile) + num_experts) * tile  # each expert's group wastes under one tile
    if tiled_rows < num_experts * capacity:
        return tiled_experts(x, routing, weights, capacity, tile, tiled_rows)
    return capacity_buffer_experts(x, routing, weights, capacity)


def ragged_experts(
    x: Float[Array, "tokens hidden"], routing: Routing, weights: ExpertWeights, capacity: int
) -> Float[Array, "k tokens hidden"]:
    """Each assignment's expert output through `ragged_dot` over the expert-sorted assignments (zero when dropped)."""
    gate, up, down = weights
    k, tokens = routing.experts.shape
    rows = x[routing.order % tokens]
    hidden = jax.nn.silu(jax.lax.ragged_dot(rows, gate, routing.counts)) * jax.lax.ragged_dot(rows, up, routing.counts)
    out = jax.lax.ragged_dot(hidden, down, routing.counts)
    unsorted = jnp.zeros_like(out).at[routing.order].set(out).reshape(k, tokens, x.shape[1])
    return jnp.where(routing.kept[..., None], unsorted, 0)


EXPERT_BACKENDS = {"auto": None, "padded": padded_experts, "ragged": ragged_experts}
"""`MoeConfig.expert_backend` → the expert compute; `auto` resolves by platform (`resolve_backend`)."""
ExpertBackend = names_literal(EXPERT_BACKENDS)
"""The type of `MoeConfig.expert_backend`: a key of EXPERT_BACKENDS."""


RAGGED_MAX_EXPERTS_GPU = 8
"""Most experts for which `auto` takes `ragged` on a GPU. Measured on an H200 with JAX 0.11.2
(`benchmarks/gpu_checks.py`, 16,384 tokens, hidden 2,048, forward + backward in bf16): `ragged_dot` ran
2.48x faster than `padded` at 8 experts (k 2, width 1,408) and 0.47x as fast at 64 (k 8, width 768); in
float32 at 64 and 128 experts its lowering asked for 64 and 128 GiB, every row times every expert."""


def resolve_backend(name: str, num_experts: int) -> str:
    """The backend `name` stands for: `auto` is `padded` on CPU, `ragged` on TPU, and on GPU `ragged` up to
    `RAGGED_MAX_EXPERTS_GPU` experts (of this layer or device), `padded` past it."""
    if name != "auto":
        return name
    platform = jax.default_backend()
    if platform == "cpu" or (platform == "gpu" and num_experts > RAGGED_MAX_EXPERTS_GPU):
        return "padded"
    return "ragged"


def expert_outputs(
    name: str, x: Float[Array, "tokens hidden"], routing: Routing, weights: ExpertWeights, capacity: int
) -> Float[Array, "k tokens hidden"]:
    """Each assignment's expert output by the backend `name` (resolved by platform when `auto`)."""
    return EXPERT_BACKENDS[resolve_backend(name, weights[0].shape[0])](x, routing, weights, capacity)
