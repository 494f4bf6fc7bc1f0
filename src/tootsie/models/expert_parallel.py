"""Ring expert parallelism: an MoE layer's experts split over the `expert` mesh axis, tokens all-gathered to them.

Design (the seeds' `ep4_ring`). On a mesh with `expert` = G the devices
that share their `data` and `fsdp` coordinates form an expert group: each
holds T of the batch's token rows and E/G of the layer's E experts. Inside
`jax.shard_map` every device

1. all-gathers the group's rows over `expert` (`all_gather`, tiled): G·T
   rows, in the order of the devices on the axis, and computes their router
   logits (every device of the group the same ones: one collective fewer
   than gathering logits, for a `[G·T, h] × [h, E]` matmul);
2. routes all G·T rows exactly as one device would route them
   (`tootsie.models.routing.route`, GShard priority over the group's
   assignments) under a capacity of `capacity_slots(G·T, E, k, cf)` slots per
   expert (dropless: G·T);
3. runs only its E/G local experts over the assignments they won (the rest
   are marked not kept on this device) with the configured expert backend;
4. combines each row's kept outputs with its router weights (zero rows for
   assignments on other devices' experts) and reduce-scatters the sums
   (`psum_scatter` over `expert`, tiled): each device gets back its own T rows,
   in their order, each the sum of the k expert outputs computed wherever they
   live.

Any mesh that splits the batch takes this path, G = 1 included (no expert
axis: every device routes its own T rows over all E experts, with no
collective but the statistics' all-reduce): a token then competes for
capacity with its device's rows, GShard's groups, as in every
data-parallel MoE. Only one device, or a mesh that splits no batch rows,
routes the whole batch at once.

Buffers per device, for one layer (h: hidden, f: expert width, k: experts
per token, C = `capacity_slots(G·T, E, k, cf)`):
- gathered rows `[G·T, h]`, their logits `[G·T, E]` (float32), the routing of
  the group's assignments `[k, G·T]`;
- `padded` backend: the receive buffers are `[E/G, C, h]`, one of C slots per
  local expert (`tootsie.models.experts.padded_experts`), the hidden
  activations `[E/G, C, f]`; C is sized by the capacity factor over the
  group's tokens, so a hot expert drops what overflows instead of growing the
  buffer (the crash of the seeds' `ep8_ragged`, #4359, was a receive buffer
  sized for worst-case traffic);
- `ragged` backend: the group's `k·G·T` assignments sorted with this device's
  experts first, `[k·G·T, h]`, through `ragged_dot` with the local experts'
  counts (rows of other devices' experts fall outside every group and come out
  zero): not capacity-sized, meant for GPU/TPU where `auto` picks it;
- the expert outputs `[k, G·T, h]` and their weighted sum `[G·T, h]`, which
  the reduce-scatter turns into the device's `[T, h]`.

Dropless EP on CPU takes this ring path with the `padded` backend (`auto`):
`lax.ragged_all_to_all` is unimplemented on XLA:CPU, and the ring needs no
all-to-all of any kind.

Router statistics are the same quantities as on one device over the whole
batch: each expert's share of routed assignments and its mean router
probability are averaged over every batch device (one `pmean` over data ×
expert × fsdp; the G copies of a group's routing are identical) before the
Switch loss `E · Σ_i f_i · P_i` is formed, and the z-loss, dropped fraction
and entropy, means over equal-sized groups, are averaged in the same
all-reduce. The
gradients follow: `all_gather` transposes to `psum_scatter` and back. With
no drops (dropless, or cf ≥ E/k) loss and gradients equal one device's up to
summation order; with drops, a token competes for capacity within its
group's G·T rows, not the whole batch (GShard's groups).

Example: 8 devices, `MeshConfig(data=2, expert=4)`, 8 experts, k = 2, a batch
of 8 rows × 16 tokens: each device holds 1 row (T = 16) and experts
{2d, 2d+1}; a group gathers 64 rows, cf 1.0 gives C = ceil(64·2/8) = 16
slots, the padded receive buffers are [2, 16, h], and the reduce-scatter
returns each device its 16 rows.
"""

import math

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec
from jaxtyping import Array, Float

from tootsie.models.activation_sharding import BATCH_AXES, current_mesh
from tootsie.models.experts import ExpertWeights, expert_outputs
from tootsie.models.routing import RouterStats, Routing, capacity_slots, route

EXPERT_AXIS = "expert"
"""The mesh axis an MoE's experts are split over (`tootsie.train.sharding.MESH_AXES`)."""


def expert_parallel_mesh() -> Mesh | None:
    """The mesh of the current activation sharding when it splits the batch over more than one device, else None.

    With `expert` = G > 1 the ring splits the experts over it. Without an expert axis (G = 1) each device still
    routes only its own rows: left to XLA's partitioner, every device routed the whole batch (on 8 fake CPU
    devices with data=8, 167 MB of step temporaries per device against 27 MB on data=2 × expert=4).
    """
    mesh = current_mesh()
    if mesh is None:
        return None
    return mesh if math.prod(mesh.shape.get(axis, 1) for axis in BATCH_AXES) > 1 else None


def local_routing(routing: Routing, device: Array, local_experts: int) -> Routing:
    """`routing` as seen by the device holding experts `[device · local_experts, (device + 1) · local_experts)`.

    Experts are renumbered from 0; other devices' assignments are not kept, get weight 0, and sort last in `order`.
    """
    local = routing.experts - device * local_experts
    mine = (local >= 0) & (local < local_experts)
    experts = jnp.where(mine, local, local_experts)
    order = jnp.argsort(experts.reshape(-1), stable=True).astype(jnp.int32)
    counts = jax.lax.dynamic_slice_in_dim(routing.counts, device * local_experts, local_experts)
    return Routing(experts, jnp.where(mine, routing.weights, 0.0), routing.position, routing.kept & mine, order, counts)


def group_stats(logits: Float[Array, "tokens experts"], routing: Routing, stats: RouterStats) -> RouterStats:
    """A group's router statistics turned into the whole batch's: shares and probabilities averaged over devices.

    One all-reduce (`pmean` over data × expert × fsdp) of every expert's share and mean probability and of the
    group's z-loss, dropped fraction and entropy; the Switch loss and the max load are formed after it.
    """
    num_experts = logits.shape[-1]
    load = routing.counts.astype(jnp.float32) / routing.experts.size
    probs = jax.nn.softmax(logits, axis=-1).mean(axis=0)
    means = jnp.stack([stats.router_z_loss, stats.dropped_fraction, stats.router_entropy])
    averaged = jax.lax.pmean(jnp.concatenate([load, probs, means]), BATCH_AXES)
    load, probs, means = jnp.split(averaged, [num_experts, 2 * num_experts])
    return RouterStats(
        load_balancing_loss=num_experts * jnp.sum(load * probs),
        router_z_loss=means[0],
        dropped_fraction=means[1],
        max_load=load.max(),
        router_entropy=means[2],
        expert_load=load,
    )


def ring_expert_parallel(
    mesh: Mesh,
    x: Float[Array, "batch seq hidden"],
    router: Float[Array, "hidden experts"],
    weights: ExpertWeights,
    *,
    k: int,
    router_weights: str,
    capacity_factor: float | None,
    backend: str,
) -> tuple[Float[Array, "batch seq hidden"], RouterStats]:
    """An MoE layer's routed output and router statistics with experts split over `mesh`'s `expert` axis (ring EP).

    `x`'s batch rows are split over data × expert × fsdp (the trainer's activation sharding); each device gets
    its own rows back. See the module docstring for the collectives and buffer shapes.
    """
    num_experts, group = router.shape[1], mesh.shape[EXPERT_AXIS]
    devices = 1
    for axis in BATCH_AXES:
        devices *= mesh.shape[axis]
    if num_experts % group or x.shape[0] % devices:
        raise ValueError(
            f"expert parallelism over expert={group} needs num_experts ({num_experts}) divisible by it and batch "
            f"rows ({x.shape[0]}) divisible by data × expert × fsdp = {devices}; change the mesh or the model"
        )
    local_experts = num_experts // group

    def shard(
        rows: Float[Array, "b s h"], router: Array, gate: Array, up: Array, down: Array
    ) -> tuple[Array, RouterStats]:
        flat = rows.reshape(-1, rows.shape[-1])
        group_rows = jax.lax.all_gather(flat, EXPERT_AXIS, tiled=True)
        group_logits = jnp.dot(group_rows, router, preferred_element_type=jnp.float32)
        capacity = capacity_slots(group_rows.shape[0], num_experts, k, capacity_factor)
        routing, stats = route(group_logits, k, router_weights, capacity)
        mine = local_routing(routing, jax.lax.axis_index(EXPERT_AXIS), local_experts)
        outputs = expert_outputs(backend, group_rows, mine, (gate, up, down), capacity)
        combined = jnp.einsum("ktd,kt->td", outputs, mine.weights.astype(flat.dtype))
        out = jax.lax.psum_scatter(combined, EXPERT_AXIS, scatter_dimension=0, tiled=True)
        return out.reshape(rows.shape), group_stats(group_logits, routing, stats)

    experts = PartitionSpec(EXPERT_AXIS)
    rows = PartitionSpec(BATCH_AXES)
    return jax.shard_map(
        shard,
        mesh=mesh,
        in_specs=(rows, PartitionSpec(), experts, experts, experts),
        out_specs=(rows, PartitionSpec()),
    )(x, router, *weights)
