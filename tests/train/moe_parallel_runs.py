"""Expert-parallel MoE checks on 8 fake CPU devices, in one process (test_moe_parallel.py runs it).

Usage: `python moe_parallel_runs.py CONFIG.yaml OUT`: writes `OUT/results.json` with

- `gradients`: for each of `CASES` (a mesh, `e8`: expert=8, `d2e4`: data=2 × expert=4 or `d8`: data=8, an expert
  backend and a capacity factor), the max abs difference of loss, gradients and `moe/` metrics from one device's, and
  whether the step ran the expert-parallel `shard_map`;
- `training`: the losses of an uninterrupted run on expert=8 (`straight`), of a run preempted (SIGTERM) after
  step `PREEMPT_AT` and resumed on the same mesh (`same`) and on data=2 × expert=4 (`other`), whether `same`'s
  final params and optimizer state equal `straight`'s bit for bit, and whether the preemption checkpoint,
  restored onto the other mesh, equals the state the run held when it saved (and lies sharded on `expert`).

XLA_FLAGS must be set before JAX starts, hence a separate process.
"""

import json
import os
import shutil
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from tootsie.configfile import load_config
from tootsie.errors import Preempted
from tootsie.eval.training import run_training
from tootsie.models.activation_sharding import BATCH_AXES, activation_sharding
from tootsie.train.callbacks import Callback, Record, Run
from tootsie.train.checkpoint import latest_checkpoint, load_checkpoint
from tootsie.train.config import TrainConfig
from tootsie.train.objectives import NextTokenObjective
from tootsie.train.sharding import MeshConfig, make_layout, place
from tootsie.train.state import abstract_state, build_optimizer

MESHES = {"e8": MeshConfig(data=1, expert=8), "d2e4": MeshConfig(data=2, expert=4), "d8": MeshConfig(data=8)}
PREEMPT_AT = 2
"""The run is signalled after this many steps; it checkpoints and stops."""


def _log(message: str, started: float = time.perf_counter()) -> None:
    print(f"{time.perf_counter() - started:7.1f}s {message}", flush=True)


def _leaves(tree: object) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(tree)]


def _max_diff(a: object, b: object) -> float:
    return max(float(np.max(np.abs(x - y))) for x, y in zip(_leaves(a), _leaves(b), strict=True))


CASES = (("e8", "padded", None), ("d2e4", "padded", None), ("d8", "padded", None), ("e8", "ragged", 1.0))
"""(mesh, expert backend, capacity factor) of the gradient checks. On expert=8 (data=1) the expert group is the whole
batch in its order, so even cf 1.0, which drops, must route as one device does. On data=8 (no expert axis) each
device routes its own rows (groups of one)."""


def gradients(config: TrainConfig) -> dict[str, dict[str, object]]:
    """Loss, gradients and metrics of each case against one device's (padded, same cf), as max abs differences."""
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(0, config.model.vocab_size, (8, 16)), jnp.int32)
    segments, mask = jnp.ones_like(tokens), jnp.ones(tokens.shape, jnp.float32)
    objective = NextTokenObjective()

    def loss(model: eqx.Module, tokens: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        return objective.loss(model, tokens, segments, mask, config.z_loss_weight)

    def build(backend: str, capacity_factor: float | None) -> eqx.Module:
        model = replace(config.model, expert_backend=backend, capacity_factor=capacity_factor)
        return eqx.filter_jit(model.build)(key=jax.random.PRNGKey(1))

    step = eqx.filter_jit(eqx.filter_value_and_grad(loss, has_aux=True))
    one = {cf: step(build("padded", cf), tokens) for cf in sorted({cf for *_, cf in CASES}, key=str)}
    _log("one device: loss and gradients")
    results = {}
    for name, backend, capacity_factor in CASES:
        params, static = eqx.partition(build(backend, capacity_factor), eqx.is_array)
        layout = make_layout(MESHES[name].build(), params, ())
        placed = eqx.combine(place(params, layout.params), static)
        batch = NamedSharding(layout.mesh, PartitionSpec(BATCH_AXES))

        def sharded(model: eqx.Module, tokens: jax.Array, batch: NamedSharding = batch):
            with activation_sharding(batch):
                return eqx.filter_value_and_grad(loss, has_aux=True)(model, tokens)

        jaxpr = str(jax.make_jaxpr(lambda m, t, f=sharded: f(m, t))(placed, tokens))
        (ep_loss, ep_metrics), ep_grads = eqx.filter_jit(sharded)(placed, jax.device_put(tokens, batch))
        (one_loss, one_metrics), one_grads = one[capacity_factor]
        case = f"{name}/{backend}/{'dropless' if capacity_factor is None else f'cf{capacity_factor}'}"
        results[case] = {
            "loss": abs(float(ep_loss) - float(one_loss)),
            "loss_value": float(one_loss),
            "gradients": _max_diff(ep_grads, one_grads),
            "gradient_scale": max(float(np.max(np.abs(leaf))) for leaf in _leaves(one_grads)),
            "metrics": {key: _max_diff(ep_metrics[key], one_metrics[key]) for key in one_metrics},
            "dropped_fraction": float(one_metrics["moe/dropped_fraction"]),
            "shard_map": "shard_map" in jaxpr and "reduce_scatter" in jaxpr,
        }
        _log(f"{case}: loss and gradients")
    return results


class PreemptAfter(Callback):
    """Sends this process SIGTERM after step `at` (before the checkpointer asks) and keeps the state it held."""

    order = 10

    def __init__(self, at: int) -> None:
        self.at, self.state = at, None

    def after_step(self, run: Run, step: int, record: Record) -> None:
        if step + 1 == self.at:
            self.state = _leaves({"model": eqx.filter(run.state.model, eqx.is_array), "opt_state": run.state.opt_state})
            os.kill(os.getpid(), signal.SIGTERM)


def _losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def _final(out: Path, config: TrainConfig) -> list[np.ndarray]:
    params, _, opt_state = abstract_state(config, build_optimizer(config))
    trees, _ = load_checkpoint(latest_checkpoint(out / "checkpoints"), {"model": params, "opt_state": opt_state})
    return _leaves(trees)


def training(config: TrainConfig, out: Path) -> dict[str, object]:
    """An uninterrupted run, and a preempted one resumed on the same and on another mesh."""
    on = {name: replace(config, mesh=mesh) for name, mesh in MESHES.items()}
    run_training(on["e8"], str(out / "straight"))
    _log("e8: 5 steps")
    preempt = PreemptAfter(PREEMPT_AT)
    try:
        run_training(on["e8"], str(out / "same"), callbacks=[preempt])
        raise AssertionError(f"the run was not preempted after step {PREEMPT_AT}")
    except Preempted:
        pass
    _log(f"e8: preempted after step {PREEMPT_AT}")
    shutil.copytree(out / "same", out / "other")

    params, _, opt_state = abstract_state(config, build_optimizer(config))
    layout = make_layout(MESHES["d2e4"].build(), params, opt_state)
    restored, state = load_checkpoint(
        latest_checkpoint(out / "other" / "checkpoints"),
        {"model": params, "opt_state": opt_state},
        {"model": layout.params, "opt_state": layout.opt_state},
    )
    gate = restored["model"].layers.mlp.experts_gate
    run_training(on["e8"], str(out / "same"))
    _log("e8: resumed on e8")
    run_training(on["d2e4"], str(out / "other"))
    _log("e8: resumed on d2e4")
    return {
        "straight": _losses(out / "straight"),
        "same": _losses(out / "same"),
        "other": _losses(out / "other"),
        "same_state_bitwise": all(
            np.array_equal(a, b) for a, b in zip(_final(out / "same", config), _final(out / "straight", config))
        ),
        "restored_step": state["step"],
        "restored_bitwise": all(np.array_equal(a, b) for a, b in zip(_leaves(restored), preempt.state, strict=True)),
        "restored_leaves": len(preempt.state),
        "restored_gate_shards": len({str(shard.index) for shard in gate.addressable_shards}),
        "restored_gate_spec": str(gate.sharding.spec),
    }


def main(config_file: str, out: str) -> None:
    """Run both checks on `config_file` and write `out/results.json`."""
    config = load_config(config_file, TrainConfig, root="train")
    results = {
        "devices": jax.device_count(),
        "gradients": gradients(config),
        "training": training(config, Path(out)),
    }
    Path(out, "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
