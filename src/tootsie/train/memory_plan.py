"""Per-device memory of a training step before launch: analytic bytes, checked against XLA's compiled analysis.

A step's device memory is five parts: the fp32 params, the optimizer state
(Adam's two fp32 moments, Muon's momentum, plus the EMA copy of the weights),
the fp32 gradients, the activations kept for the backward pass (set by the
remat policy) and the temporaries (one block's forward/backward working set,
or, at another time, the loss chunk's logits; weights gathered by FSDP or cast to the compute
dtype, and the updated weights, since the step does not donate the model).

Params, optimizer state and gradients are exact: the abstract shapes of
`abstract_state` (nothing allocated, so an 8B model costs nothing) divided by
how the run's layout shards each tensor (`sharding.make_layout` on an abstract
mesh). Activations and temporaries come from the shape formulas below, whose
copy counts were measured against XLA's CPU buffer assignment
(docs/training.md, "Memory planner"). Where the real step can be compiled, the
plan also compiles it on abstract shapes over fake CPU devices and reports
`memory_analysis()` per device; fake devices must exist before JAX starts, so
that compile runs in a subprocess (`python -m tootsie.train.memory_plan`).

An MoE (`MoeConfig`) is counted the same way: its expert weights and their
moments are split over the `expert` axis by the layout (their hidden dimension
over `fsdp`), batch rows over data × expert × fsdp, and each MoE block's working
set holds its dispatch buffers: `experts × capacity` rows per layer
(`capacity_slots`, so sized by the capacity factor) for the padded backend,
`k × tokens` rows for `ragged_dot`, each with the routed experts'
`[rows, intermediate]` intermediates. With `expert` = G the tokens are
those of a ring group (G devices' rows, gathered) and a device holds its E/G
experts' buffers; without an expert axis (G = 1) a device routes its own rows
(`_moe_dispatch_rows`). The plan reports `params_total` (what
memory holds) beside `params_active` (what a token's compute touches).

Example: the 8B preset (8.03e9 params) on `fsdp=8` holds 4.01 GB of params,
8.03 GB of Adam moments and 4.01 GB of EMA per device; with seq 4096 and 256
rows (32 per device, full remat) the 32 saved block inputs add 2 copies × 32
layers × 32 rows × 4096 × 4096 × 4 B = 137 GB in fp32: it does not fit an
80 GiB H100 without microbatches.
"""

import json
import math
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass, replace
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

from tootsie.configfile import from_plain, to_plain
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.models.routing import capacity_slots
from tootsie.train.config import TrainConfig
from tootsie.train.sharding import BATCH_AXES, MESH_AXES, Layout, MeshConfig, make_layout
from tootsie.train.state import abstract_state, build_optimizer
from tootsie.train.train_step import make_train_step

GIB, GB = 2**30, 10**9
PARTS = ("params", "optimizer", "gradients", "activations", "temporaries")
"""The per-device parts, in the order printed; `total` is their sum."""
RESIDUAL_COPIES = 2
"""Copies of each saved block input under scan + remat (XLA CPU keeps ~2.25: the stacked residual and its copy)."""
BLOCK_INTER_COPIES = 5
"""Live `[rows, seq, intermediate]` tensors in one block's backward (gate, up, silu, product, their gradient)."""
BLOCK_HIDDEN_COPIES = 9
"""Live fp32 `[rows, seq, hidden]` tensors in one block's backward (norms, q/k/v/out, residual gradients)."""
MOE_DISPATCH_COPIES = 4
"""Live `[dispatch rows, hidden]` tensors in one MoE block's backward (expert inputs, outputs, their gradients)."""
RING_GATHERED_COPIES = 2
"""`[G·T, hidden]` tensors of ring expert parallelism besides its `[k, G·T, hidden]` outputs (gathered rows, sum)."""
SCORE_COPIES = 2
"""fp32 `[rows, heads, seq, seq]` tensors of materialized attention (scores and their gradient)."""
LOSS_CHUNK_COPIES = 2
"""fp32 `[chunk, vocab]` tensors live in the fused loss (logits and their gradient; XLA fuses the softmax)."""
LOSS_CHUNK_TOKENS = 1024
"""Positions the loss projects at once: `tootsie.train.loss.LOSS_CHUNK_TOKENS`."""
HEADROOM = 0.9
"""Fraction of device memory a plan may use: the rest goes to the runtime, allocator fragmentation and NCCL."""


@dataclass(frozen=True)
class DeviceKind:
    """An accelerator's memory and how its attention runs."""

    memory_bytes: int
    """Physical memory per device."""
    fused_attention: bool
    """Attention runs as a fused kernel (no `[rows, heads, seq, seq]` scores in memory)."""
    note: str
    """What the figure is and where it comes from."""


def _host_memory() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


DEVICE_KINDS: dict[str, DeviceKind] = {
    "h100": DeviceKind(80 * GIB, True, "h100: 80 GiB HBM3 (SXM/PCIe 80 GB); cuDNN fused attention assumed"),
    "h200": DeviceKind(141 * GB, True, "h200: 141 GB HBM3e; cuDNN fused attention assumed"),
    "a100": DeviceKind(80 * GIB, True, "a100: the 80 GB variant (use 40 GB cards at half); cuDNN attention assumed"),
    "v5p": DeviceKind(95 * GB, False, "v5p: 95 GB HBM per chip; XLA attention (materialized scores) assumed"),
    "cpu": DeviceKind(0, False, "cpu: this host's physical memory, shared by all fake devices"),
}
"""`--device-kind` → memory per device (cpu's is read from the host when planning)."""


def parse_mesh(text: str) -> MeshConfig:
    """`data=2,fsdp=4,tensor=1` → MeshConfig; axes left out are 1, so `fsdp=8` is 8 devices of FSDP."""
    sizes = dict.fromkeys(MESH_AXES, 1)
    given: set[str] = set()
    for item in text.split(","):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in MESH_AXES or name in given or not value.strip().lstrip("-").isdigit():
            raise TootsieError(
                f"--mesh {text!r}: {item!r} is not AXIS=SIZE with AXIS one of {MESH_AXES} (once each); "
                "write it like data=2,fsdp=4,tensor=1 (-1 on one axis takes the rest)"
            )
        sizes[name] = int(value)
        given.add(name)
    try:
        return MeshConfig(**sizes)
    except ValueError as error:
        raise TootsieError(f"--mesh {text!r}: {error}") from None


def device_kind(name: str) -> DeviceKind:
    """The DeviceKind of `--device-kind NAME` (cpu's memory read from this host)."""
    if name not in DEVICE_KINDS:
        raise TootsieError(f"unknown device kind {name!r}; choose one of {sorted(DEVICE_KINDS)}")
    kind = DEVICE_KINDS[name]
    return replace(kind, memory_bytes=_host_memory()) if name == "cpu" else kind


def _abstract_layout(config: TrainConfig, devices: int) -> tuple[Layout, Any, Any, Any]:
    """The run's layout on an abstract mesh of `devices` (no devices needed), with the abstract state it shards."""
    optimizer = build_optimizer(config)
    params, static, opt_state = abstract_state(config, optimizer)
    sizes = config.mesh.shape(devices)
    mesh = AbstractMesh(sizes, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))
    return make_layout(mesh, params, opt_state), params, static, opt_state


def _shard_bytes(tree: Any, shardings: Any) -> int:
    """Bytes of one device's shard of every leaf of `tree`."""
    leaves, specs = jax.tree.leaves(tree), jax.tree.leaves(shardings)
    return sum(int(np.prod(s.shard_shape(leaf.shape))) * leaf.dtype.itemsize for leaf, s in zip(leaves, specs))


def _moe_dispatch_rows(model: MoeConfig, tokens: int, mesh: dict[str, int], backend: str) -> tuple[int, int]:
    """(expert-input rows, ring-gathered rows) one device holds in one MoE layer.

    With `expert` = G the ring (`tootsie.models.expert_parallel`) gathers its group's G·T rows onto
    every device of the group, which holds `E/G × capacity_slots(G·T)` padded rows or all `k·G·T`
    sorted assignments (ragged); without an expert axis (G = 1) each device routes its own T rows.
    """
    experts, k, group = model.num_experts, model.experts_per_token, mesh["expert"]
    routed = group * tokens
    if backend == "ragged":
        rows = k * routed
    else:
        rows = -(-experts // group) * capacity_slots(routed, experts, k, model.capacity_factor)
    return rows, routed if group > 1 else 0


@dataclass(frozen=True)
class _Mlp:
    """One kind of block's MLP on one device (a dense decoder has one kind; an MoE its MoE and dense blocks)."""

    layers: int
    """Blocks of this kind."""
    weights: int
    """Weights of the MLP this device holds once FSDP gathers them (an MoE's local experts, router, shared ones)."""
    tokens_inter: int
    """Width of the `[tokens, width]` intermediates (the dense MLP, or an MoE's shared experts)."""
    rows: int = 0
    """Expert-input rows (an MoE's dispatch buffers or sorted assignments)."""
    rows_inter: int = 0
    """Width of the `[rows, width]` expert intermediates."""
    ring_rows: int = 0
    """`[rows, hidden]` rows held for ring expert parallelism (gathered inputs, outputs, their sum)."""


def _mlp_kinds(model: LlamaConfig, tokens: int, mesh: dict[str, int], backend: str) -> list[_Mlp]:
    """Each kind of block's MLP on one device: the dense blocks, or an MoE's MoE blocks and leading dense ones."""
    tensor, hidden = mesh["tensor"], model.hidden_dim
    if not isinstance(model, MoeConfig):
        inter = model.intermediate_dim // tensor
        return [_Mlp(model.num_layers, 3 * hidden * inter, inter)]
    rows, gathered = _moe_dispatch_rows(model, tokens, mesh, backend)
    inter, shared = model.intermediate_dim // tensor, model.num_shared_experts * model.intermediate_dim // tensor
    local_experts = -(-model.num_experts // mesh["expert"])
    weights = hidden * model.num_experts + 3 * hidden * (local_experts * inter + shared)
    ring_rows = gathered * (model.experts_per_token + RING_GATHERED_COPIES)
    kinds = [_Mlp(model.moe_layers, weights, shared, rows, inter, ring_rows)]
    if model.dense_layers:
        width = model.dense_width // tensor
        kinds.append(_Mlp(model.dense_layers, 3 * hidden * width, width))
    return kinds


def analytic_bytes(
    config: TrainConfig, devices: int, fused_attention: bool, auto_expert_backend: str = "ragged"
) -> dict[str, int]:
    """Per-device bytes of each part (and their pieces), from the shapes and the layout alone.

    An MoE's expert backend `auto` is taken as `auto_expert_backend` (`padded` on CPU, `ragged` elsewhere).
    """
    layout, params, _, opt_state = _abstract_layout(config, devices)
    mesh = dict(layout.mesh.shape)
    model, tensor = config.model, mesh["tensor"]
    rows = max(size for _, size in config.data.batch_schedule.stages)
    rows = -(-rows // math.prod(mesh[axis] for axis in BATCH_AXES))
    micro_rows = -(-rows // config.microbatches)
    seq, hidden, vocab = config.data.seq_len, model.hidden_dim, model.vocab_size
    heads = max(model.num_heads // tensor, 1)
    qkv = (model.num_heads + 2 * model.num_kv_heads) * model.resolved_head_dim // tensor
    attention_weights = hidden * (qkv + model.num_heads * model.resolved_head_dim // tensor)
    compute = jnp.dtype(config.compute_dtype).itemsize
    tokens = micro_rows * seq
    backend = getattr(model, "expert_backend", "auto")
    kinds = _mlp_kinds(model, tokens, mesh, auto_expert_backend if backend == "auto" else backend)

    param_bytes = _shard_bytes(params, layout.params)
    ema = param_bytes if config.ema is not None else 0
    grads = param_bytes * (2 if config.microbatches > 1 else 1)
    scores = 0 if fused_attention else micro_rows * seq * seq * (SCORE_COPIES * heads * 4 + 1)
    blocks = [
        tokens * (BLOCK_INTER_COPIES * kind.tokens_inter * compute + BLOCK_HIDDEN_COPIES * hidden * 4)
        + kind.rows * (BLOCK_INTER_COPIES * kind.rows_inter + MOE_DISPATCH_COPIES * hidden) * compute
        + kind.ring_rows * hidden * compute
        for kind in kinds
    ]
    block = max(blocks)
    saved_input = RESIDUAL_COPIES * model.num_layers * tokens * hidden * compute
    saved = {
        "full": 0,
        "dots": sum(
            kind.layers
            * (tokens * (qkv + 3 * hidden + 2 * kind.tokens_inter) + kind.rows * 2 * kind.rows_inter)
            * compute
            for kind in kinds
        ),
        "none": sum(kind.layers * (one + scores) for kind, one in zip(kinds, blocks, strict=True)),
    }[model.remat]
    layer_params = attention_weights + max(kind.weights for kind in kinds)
    gathered = (2 * layer_params + vocab * hidden // tensor) * compute if mesh["fsdp"] > 1 else 0
    cast = param_bytes // 4 * compute if compute != 4 else 0
    loss = min(LOSS_CHUNK_TOKENS, tokens) * vocab // tensor * 4 * LOSS_CHUNK_COPIES + hidden * vocab // tensor * 4
    dispatch_rows = max(kind.rows for kind in kinds)
    return {
        "params": param_bytes,
        "optimizer": _shard_bytes(opt_state, layout.opt_state) + ema,
        "gradients": grads,
        "activations": saved_input + saved + rows * seq * 12,
        "temporaries": param_bytes + max(block + scores, loss) + gathered + cast,
        "ema": ema,
        "saved_block_inputs": saved_input,
        "attention_scores": scores,
        "moe_dispatch_rows": dispatch_rows,
        "moe_dispatch_buffers": dispatch_rows * MOE_DISPATCH_COPIES * hidden * compute,
        "fsdp_gathered_weights": gathered,
        "updated_params": param_bytes,
        "rows_per_device": rows,
    }


def _abstract(tree: Any, shardings: Any) -> Any:
    return jax.tree.map(lambda leaf, s: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=s), tree, shardings)


def compiled_bytes(config: TrainConfig) -> dict[str, int]:
    """XLA's memory analysis per device of the real train step, compiled on abstract shapes over this process's devices.

    The step is `make_train_step`'s, jitted with the same donation (all but the model).
    """
    optimizer = build_optimizer(config)
    params, static, opt_state = abstract_state(config, optimizer)
    layout = make_layout(config.mesh.build(), params, opt_state)
    model = eqx.combine(_abstract(params, layout.params), static)
    rows = max(size for _, size in config.data.batch_schedule.stages)
    batch = jax.ShapeDtypeStruct((rows, config.data.seq_len), jnp.int32, sharding=layout.batch)
    mask = jax.ShapeDtypeStruct(batch.shape, jnp.float32, sharding=layout.batch)
    step = jax.ShapeDtypeStruct((), jnp.int32, sharding=NamedSharding(layout.mesh, PartitionSpec()))
    ema = _abstract(params, layout.params) if config.ema is not None else None
    train_step = make_train_step(config, optimizer, layout).__wrapped__
    with warnings.catch_warnings():  # the batch is donated as in the trainer; no output reuses it
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        lowered = jax.jit(train_step, donate_argnums=(1, 2, 3, 4, 5, 6)).lower(
            model, _abstract(opt_state, layout.opt_state), ema, step, batch, batch, mask
        )
    analysis = lowered.compile().memory_analysis()
    sizes = {
        "arguments": analysis.argument_size_in_bytes,
        "outputs": analysis.output_size_in_bytes,
        "aliased": analysis.alias_size_in_bytes,
        "temp": analysis.temp_size_in_bytes,
    }
    return sizes | {"peak": sizes["arguments"] + sizes["temp"] + sizes["outputs"] - sizes["aliased"]}


COMPILE_TIMEOUT_S = 300
"""Longest wait for the compile subprocess; past it the plan is analytic only, with a note."""


def compiled_bytes_in_subprocess(config: TrainConfig, devices: int, timeout: float = COMPILE_TIMEOUT_S) -> dict:
    """`compiled_bytes` over `devices` fake CPU devices in a fresh process; `{"error": why}` when it cannot be had."""
    env = os.environ | {
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}",
        "JAX_PLATFORMS": "cpu",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tootsie.train.memory_plan"],
            input=json.dumps(to_plain(config)),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"compiling the step took over {timeout:.0f} s"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        return {"error": f"compiling the step failed: {lines[-1]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class MemoryPlan:
    """One device's bytes by part, the device's memory and whether the step fits, with the reasons."""

    per_device: dict[str, int]
    device_bytes: int
    fits: bool
    notes: tuple[str, ...]
    analytic: dict[str, int]
    xla: dict[str, Any] | None
    mesh: dict[str, int]
    device_kind: str
    params_total: int
    """Every parameter of the model (an MoE's every expert): what memory holds."""
    params_active: int
    """Parameters a token passes through (an MoE's router, k experts and shared ones): what compute touches."""

    def to_json(self) -> dict[str, Any]:
        """The `tootsie plan memory --json` object."""
        return to_plain(self)


def plan_memory(
    config: TrainConfig, devices: int, kind_name: str, compile_step: bool = True, timeout: float = COMPILE_TIMEOUT_S
) -> MemoryPlan:
    """The memory plan of `config` on `devices` devices of `kind_name`: analytic, and XLA's where it compiles.

    On `cpu`, XLA's figures are the target's own, so the temporaries are set to
    make the total equal XLA's peak; on accelerators the CPU compile (which
    materializes attention scores a fused kernel never holds) is reported beside
    the analytic plan, not folded into it.
    """
    kind = device_kind(kind_name)
    sizes = dict(zip(MESH_AXES, config.mesh.shape(devices), strict=True))
    auto_backend = "padded" if kind_name == "cpu" else "ragged"
    analytic = analytic_bytes(config, devices, kind.fused_attention, auto_backend)
    notes = [kind.note, f"fits = total <= {HEADROOM:.0%} of device memory (runtime, allocator and NCCL headroom)"]
    if isinstance(config.model, MoeConfig):
        routing = (
            f"ring expert parallelism routes each group of expert={sizes['expert']} devices' rows"
            if sizes["expert"] > 1
            else "without an expert axis every device routes its own rows"
        )
        notes.append(
            f"MoE: expert weights and moments split over expert={sizes['expert']} (hidden over fsdp); {routing}: "
            f"{analytic['moe_dispatch_rows']} expert-input rows per layer per device "
            f"({config.model.expert_backend} backend, auto = {auto_backend}; capacity factor "
            f"{config.model.capacity_factor})"
        )
    if config.ema is not None:
        notes.append("optimizer includes the fp32 EMA copy of the weights")
    per_device = {part: analytic[part] for part in PARTS}
    xla: dict[str, Any] | None = None
    if compile_step:
        xla = compiled_bytes_in_subprocess(config, devices, timeout)
        if "error" in xla:
            notes.append(f"analytic activations and temporaries only: {xla['error']}")
        else:
            ratio = (xla["peak"] - per_device["params"] - per_device["optimizer"]) / max(
                sum(per_device[part] for part in ("gradients", "activations", "temporaries")), 1
            )
            notes.append(
                f"XLA CPU compile on {devices} fake devices: step memory beyond the state = {ratio:.2f}x analytic"
                + (" (the CPU compile materializes attention scores)" if kind.fused_attention else "")
            )
            if kind_name == "cpu":
                state = sum(per_device[part] for part in ("params", "optimizer", "gradients", "activations"))
                per_device["temporaries"] = max(xla["peak"] - state, 0)
                notes.append("temporaries set so the total equals XLA's compiled peak on this backend")
            if ratio > 1.5 and not kind.fused_attention:
                notes.append("XLA needs far more step memory than the analytic estimate: trust its peak, not the parts")
    per_device["total"] = sum(per_device[part] for part in PARTS)
    budget = int(kind.memory_bytes * HEADROOM)
    return MemoryPlan(
        per_device,
        kind.memory_bytes,
        per_device["total"] <= budget,
        tuple(notes),
        analytic,
        xla,
        sizes,
        kind_name,
        params_total=config.model.num_parameters(),
        params_active=config.model.active_parameters(),
    )


def main() -> None:
    """Subprocess entry: read a TrainConfig as JSON on stdin, print `compiled_bytes` as JSON."""
    config = from_plain(TrainConfig, json.loads(sys.stdin.read()), "train")
    print(json.dumps(compiled_bytes(config)))


if __name__ == "__main__":
    main()
