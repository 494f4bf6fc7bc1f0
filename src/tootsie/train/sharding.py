"""Sharded training: a device mesh, shardings by logical axis names, multi-host setup and per-host batches.

Design. A run's devices form a mesh with four named axes, `data × expert ×
fsdp × tensor` (`MeshConfig`; -1 takes the devices the other axes leave, so the
default is data parallelism over every device). Every weight names its
dimensions (the model's `logical_axes()`, e.g. `tootsie.models.llama.logical_axes`: `wq` is ("layers", "hidden",
"qdim")) and `LOGICAL_RULES` maps the names to mesh axes: the hidden dimension,
which every matrix has, over `fsdp` (so FSDP / ZeRO-3 shards every matrix and
its optimizer moments), the other matrix dimension (vocab, heads, MLP width)
over `tensor`, an MoE's expert dimension over `expert`, the layer axis and
the norm scales over nothing. A dimension the
mesh axis does not divide stays replicated (logged). An optimizer-state tensor
named after a parameter and shaped like it (`….mu.layers.attn.wq`) takes that
parameter's sharding; every other one (counts, histories) is replicated.
Batch rows are split over `data × expert × fsdp`; XLA's SPMD partitioner inserts the
all-gathers of weights and reduce-scatters of gradients.

Multi-host: every host runs the same command, `jax.distributed.initialize`
joins them (`DistributedConfig`), each host builds only the rows of
`batch(step)` its own devices hold (`MixtureDataset.batch(step, worker,
num_workers)` returns a contiguous slice of the global batch, identical to
those rows of the full batch), checkpoints are gathered and written by process
0, and a restore reads each device's slice straight from the file.

Example: 8 devices, `MeshConfig(data=2, fsdp=4)`, hidden 16: `wq` [layers 2,
hidden 16, qdim 16] gets `P(None, "fsdp", None)` (axes of size 1 are left
out), Adam's `mu` and `nu` of `wq` the same, and a batch of 8 rows puts one row
on each device. Results equal one device's up to float summation order.
"""

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.source import BASE_FIELDS, DataSource
from tootsie.errors import TootsieError
from tootsie.models.activation_sharding import BATCH_AXES

logger = logging.getLogger(__name__)
MESH_AXES = ("data", "expert", "fsdp", "tensor")
"""Names of the mesh axes, outermost first (data parallel groups, expert shards, FSDP shards, tensor shards)."""
LOGICAL_RULES: dict[str, str | None] = {
    "hidden": "fsdp",
    "vocab": "tensor",
    "qdim": "tensor",
    "kvdim": "tensor",
    "inter": "tensor",
    "layers": None,
    "norm": None,
    "experts": "expert",
}
"""Mesh axis of every logical axis name of the model's weights (None: replicated)."""
ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID = (
    "TOOTSIE_COORDINATOR_ADDRESS",
    "TOOTSIE_NUM_PROCESSES",
    "TOOTSIE_PROCESS_ID",
)


@dataclass(frozen=True)
class MeshConfig:
    """Devices per mesh axis; `data × expert × fsdp × tensor` must equal the run's device count.

    One axis may be -1 (the rest).
    """

    data: int = -1
    """Data-parallel groups (-1: every device the other axes leave)."""
    expert: int = 1
    """Devices an MoE's experts are split over (expert parallelism); batch rows are split over it too."""
    fsdp: int = 1
    """Devices each weight matrix and its optimizer moments are split over (on the hidden dimension).

    Batch rows are split over data × expert × fsdp.
    """
    tensor: int = 1
    """Devices the other matrix dimension (vocab, attention heads, MLP width) is split over."""

    def __post_init__(self) -> None:
        sizes = {"data": self.data, "expert": self.expert, "fsdp": self.fsdp, "tensor": self.tensor}
        bad = {name: size for name, size in sizes.items() if size == 0 or size < -1}
        if bad:
            raise ValueError(f"mesh axis sizes must be positive or -1 (the rest), got {bad}")
        if list(sizes.values()).count(-1) > 1:
            raise ValueError(f"at most one mesh axis may be -1, got {sizes}; give the others explicit sizes")

    def shape(self, device_count: int) -> tuple[int, int, int, int]:
        """The (data, expert, fsdp, tensor) sizes on `device_count` devices, -1 resolved."""
        sizes = (self.data, self.expert, self.fsdp, self.tensor)
        known = int(np.prod([size for size in sizes if size != -1]))
        if -1 in sizes and device_count % known == 0:
            sizes = tuple(device_count // known if size == -1 else size for size in sizes)
        if int(np.prod(sizes)) != device_count:
            raise TootsieError(
                f"mesh data={self.data} × expert={self.expert} × fsdp={self.fsdp} × tensor={self.tensor} "
                f"does not fit the {device_count} devices of this run; "
                "make the product equal the device count, or set one axis to -1 to take the rest"
            )
        return sizes

    def build(self, devices: Sequence[jax.Device] | None = None) -> Mesh:
        """The mesh over `devices` (default: every device of every process)."""
        devices = jax.devices() if devices is None else list(devices)
        return jax.make_mesh(
            self.shape(len(devices)), MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES), devices=devices
        )


@dataclass(frozen=True)
class DistributedConfig:
    """Join a multi-host run with `jax.distributed.initialize`; every host runs the same command."""

    coordinator_address: str | None = None
    """`host:port` of process 0's coordinator.

    None: $TOOTSIE_COORDINATOR_ADDRESS, else detected (Cloud TPU, Slurm, Open MPI).
    """
    num_processes: int | None = None
    """Processes (hosts) in the run.

    None: $TOOTSIE_NUM_PROCESSES, else detected. The process id, the one value that differs per host,
    comes from $TOOTSIE_PROCESS_ID or detection.
    """

    def __post_init__(self) -> None:
        if self.num_processes is not None and self.num_processes < 1:
            raise ValueError(f"num_processes must be >= 1 or None (detected), got {self.num_processes}")


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise TootsieError(
            f"${name}={value!r} is not an integer; set it to this host's number (0-based) or the process count"
        ) from None


def initialize_distributed(config: DistributedConfig | None) -> None:
    """Join the multi-host run before any JAX computation (nothing for None, or when this process already joined)."""
    if config is None or jax.distributed.is_initialized():
        return
    address = config.coordinator_address or os.environ.get(ENV_COORDINATOR)
    num_processes = config.num_processes or _env_int(ENV_NUM_PROCESSES)
    try:
        jax.distributed.initialize(address, num_processes, _env_int(ENV_PROCESS_ID))
    except (RuntimeError, ValueError) as error:
        raise TootsieError(
            f"jax.distributed.initialize failed: {error}. Call it before any JAX computation, "
            f"and outside Cloud TPU / Slurm / Open MPI set {ENV_COORDINATOR}=host:port, "
            f"{ENV_NUM_PROCESSES} and {ENV_PROCESS_ID} (or the config's distributed fields)"
        ) from error


def partition_specs(
    axes: Mapping[str, tuple[str, ...]], shapes: Mapping[str, tuple[int, ...]], mesh_shape: Mapping[str, int]
) -> dict[str, PartitionSpec]:
    """The PartitionSpec of every weight.

    A logical axis goes on its rule's mesh axis when that axis (of size > 1) divides it, else it is replicated.
    """
    specs = {}
    for name, names in axes.items():
        dims: list[str | None] = []
        for logical, size in zip(names, shapes[name], strict=True):
            if logical not in LOGICAL_RULES:
                raise ValueError(f"weight {name} has logical axis {logical!r} with no rule; add it to LOGICAL_RULES")
            mesh_axis = LOGICAL_RULES[logical]
            if mesh_axis is not None and mesh_shape[mesh_axis] > 1 and size % mesh_shape[mesh_axis]:
                logger.info(
                    "%s: %s (%d) is not divisible by %s=%d, so it stays replicated",
                    name,
                    logical,
                    size,
                    mesh_axis,
                    mesh_shape[mesh_axis],
                )
                mesh_axis = None
            dims.append(mesh_axis if mesh_axis is not None and mesh_shape[mesh_axis] > 1 else None)
        specs[name] = PartitionSpec(*dims)
    return specs


@dataclass(frozen=True)
class Layout:
    """Where a run's arrays live: the mesh, and the shardings of the params (and EMA), optimizer state and batches."""

    mesh: Mesh
    params: Any
    """A sharding per parameter, in the params' tree structure."""
    opt_state: Any
    """A sharding per optimizer-state tensor, in its tree structure."""
    batch: NamedSharding
    """Batch rows over data × expert × fsdp."""


def make_layout(mesh: Mesh, params: Any, opt_state: Any) -> Layout:
    """Shardings on `mesh` for (abstract or concrete) params and optimizer state."""
    named = {jax.tree_util.keystr(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]}
    specs = partition_specs(
        params.logical_axes(), {name: tuple(leaf.shape) for name, leaf in named.items()}, dict(mesh.shape)
    )
    by_param = {name: (tuple(named[name].shape), NamedSharding(mesh, spec)) for name, spec in specs.items()}
    replicated = NamedSharding(mesh, PartitionSpec())

    def state_sharding(path: Any, leaf: Any) -> NamedSharding:
        name = jax.tree_util.keystr(path)
        owners = [
            param for param, (shape, _) in by_param.items() if name.endswith(param) and tuple(leaf.shape) == shape
        ]
        return by_param[max(owners, key=len)][1] if owners else replicated

    return Layout(
        mesh=mesh,
        params=jax.tree_util.tree_map_with_path(lambda path, _: by_param[jax.tree_util.keystr(path)][1], params),
        opt_state=jax.tree_util.tree_map_with_path(state_sharding, opt_state),
        batch=NamedSharding(mesh, PartitionSpec(BATCH_AXES)),
    )


def check_batch_sizes(schedule: BatchSchedule, mesh: Mesh) -> None:
    """Every batch size must split evenly over the data × expert × fsdp devices."""
    groups = int(np.prod([mesh.shape[axis] for axis in BATCH_AXES]))
    uneven = [(step, size) for step, size in schedule.stages if size % groups]
    if uneven:
        raise TootsieError(
            f"batch sizes {[size for _, size in uneven]} (from steps {[step for step, _ in uneven]}) "
            f"do not split over data × expert × fsdp = {groups} devices; choose batch sizes divisible by it, "
            "or a mesh with fewer data/fsdp devices (more tensor)"
        )


def place(tree: Any, shardings: Any) -> Any:
    """Every leaf (a host array, or a device array with the same value on every process) on its sharding.

    Each device gets only its slice.
    """

    def put(leaf: Any, sharding: NamedSharding) -> jax.Array:
        if isinstance(leaf, jax.Array) and leaf.sharding.is_equivalent_to(sharding, leaf.ndim):
            return leaf
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: np.asarray(host[index]))

    return jax.tree.map(put, tree, shardings)


def gather(tree: Any) -> Any:
    """Every leaf as a whole host array on every process (a collective: all processes must call it)."""
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    return multihost_utils.process_allgather(tree, tiled=True)


def global_batch(
    data: DataSource, step: int, sharding: NamedSharding, fields: Sequence[str] = BASE_FIELDS
) -> tuple[jax.Array, ...]:
    """The `fields` of `batch(step)` (by default tokens, segment_ids, loss_mask) as global arrays.

    This process computes only the rows its devices hold.
    """
    shape = data.batch_shape(step)
    size = shape[0]
    built: dict[tuple[int, int], Any] = {}

    def rows(index: tuple[slice, ...]) -> Any:
        start, stop, _ = index[0].indices(size)
        if (start, stop) not in built:
            per_device = stop - start
            built[start, stop] = data.batch(step, worker=start // per_device, num_workers=size // per_device)
        return built[start, stop]

    return tuple(
        jax.make_array_from_callback(shape, sharding, lambda index, field=field: getattr(rows(index), field))
        for field in fields
    )


def is_main_process() -> bool:
    """Whether this process writes files (metrics, checkpoints): process 0."""
    return jax.process_index() == 0


def agree(flag: bool) -> bool:
    """Process 0's value of `flag` on every process, for choices that start collectives (a time-based checkpoint)."""
    if jax.process_count() == 1:
        return flag
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(flag)))


def barrier(name: str) -> None:
    """Wait until every process reaches this point (no-op on one process)."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)
