"""MoE throughput on CPU: whole training runs (against Levanter's qwen3_moe and a dense model), and the expert layer.

Shapes (`SHAPES`): `moe8` is the issue-5 CPU shape (hidden 256, 4 layers, 4
heads, vocab 8192, float32) with each SwiGLU 1024 split into 8 experts of
width 512, k = 2, QK-norm on, dropless: its active parameters are those of
`dense`, the same decoder with a SwiGLU 1024 and QK-norm (plus a 256 × 8
router per layer). `moe64` is 64 experts of width 256 with k = 4 (the seeds'
v16 expert count and k), the same active width. Batch 4 × seq 256 (1,024
tokens a step) by default, so a Levanter step, whose `ragged_dot` multiplies
every row by every expert on XLA:CPU, fits a shared 2-core machine.

Two modes, each printing one JSON line per measurement:

- `train`: tootsie's trainer (`run_training`) on synthetic tokens (as
  `bench_train_cpu.py`), one run in a fresh directory: a compiling step then
  `--steps` timed ones. Wall tokens/s is their steady state (the metrics'
  step times), CPU s/step the process's user+sys seconds from the end of the
  compiling step to the end of the run over the timed steps (a step hook
  records them), peak RSS the process's. CPU s/step comes from inside the run
  because the compiling step's time varied by tens of seconds between runs on
  the shared machine, more than a few steps' difference.
- `layer`: one MoE layer's forward and backward (router, routing, experts,
  combine; gradients of input, router and experts) on `--tokens` random rows,
  each variant jitted once and then timed in `--rounds` interleaved rounds;
  the table gives medians of wall and CPU (user+sys, all threads) time.
  Variants: `padded` at capacity factor 1 and dropless (which takes the
  tile-padded layout), the capacity-buffer layout dropless
  (`capacity_buffer_experts`, what `padded` did before), `ragged` dropless.

    python benchmarks/bench_moe.py train --model moe8 --steps 6
    python benchmarks/bench_moe.py layer --experts 8 --rounds 3

The peer run (Levanter's `train_lm` on `moe8`) and the rounds that interleave
them: `benchmarks/moe_pairs.sh`; figures in docs/moe-benchmarks.md.
"""

import argparse
import dataclasses
import json
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
from bench_train_cpu import cpu_seconds, synthetic_run  # a sibling script, importable when this one runs as one

from tootsie.eval.training import run_training
from tootsie.models.experts import capacity_buffer_experts, padded_experts, ragged_experts
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.models.routing import capacity_slots, route
from tootsie.monitor.metrics_log import METRICS_FILE

MOE8 = MoeConfig(
    vocab_size=8192,
    hidden_dim=256,
    intermediate_dim=512,
    num_layers=4,
    num_heads=4,
    num_kv_heads=4,
    qk_norm=True,
    num_experts=8,
    experts_per_token=2,
    capacity_factor=None,
)
SHAPES: dict[str, LlamaConfig] = {
    "moe8": MOE8,
    "moe64": dataclasses.replace(MOE8, num_experts=64, experts_per_token=4, intermediate_dim=256),
    "dense": MOE8.dense_config(MOE8.num_layers),
}
"""The benchmark's models by name (see the module docstring)."""

LAYER_VARIANTS: dict[str, tuple[Callable, float | None]] = {
    "padded cf 1": (padded_experts, 1.0),
    "padded dropless": (padded_experts, None),
    "capacity buffers dropless": (capacity_buffer_experts, None),
    "ragged dropless": (ragged_experts, None),
}
"""`layer` mode's variants: the expert compute and the capacity factor (None: dropless)."""
CPU_METRIC = "bench/cpu_seconds"
"""The record field `train` adds at every step: this process's CPU seconds so far."""


def load() -> float:
    """The 1-minute load average: the machine is shared, so every figure is recorded with it."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def model_config(name: str, backend: str | None, capacity_factor: float | None) -> LlamaConfig:
    """`SHAPES[name]`, an MoE one with `backend` (None: `auto`) and `capacity_factor` (None: dropless)."""
    model = SHAPES[name]
    if not isinstance(model, MoeConfig):
        return model
    return dataclasses.replace(model, expert_backend=backend or "auto", capacity_factor=capacity_factor)


def train_once(model: LlamaConfig, steps: int, seq_len: int, batch_size: int) -> list[dict]:
    """Train `steps` + 1 steps in a fresh directory; the metric records, each with the process's CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="tootsie-bench-moe-") as tmp:
        config = synthetic_run(Path(tmp), model, steps, seq_len, batch_size)
        run_training(config, str(Path(tmp) / "run"), hooks=[lambda _: {CPU_METRIC: cpu_seconds()}])
        return [json.loads(line) for line in (Path(tmp) / "run" / METRICS_FILE).read_text().splitlines()]


def train(args: argparse.Namespace) -> None:
    """Train the chosen model and print throughput, CPU s/step and memory as one JSON line."""
    model = model_config(args.model, args.backend, args.capacity_factor)
    start_load, wall_start = load(), time.perf_counter()
    records = train_once(model, args.steps, args.seq_len, args.batch_size)
    timed = records[1:]  # step 0 includes compilation
    seconds = sum(r["step_seconds"] for r in timed)
    tokens = sum(r["batch_size"] for r in timed) * args.seq_len
    is_moe = isinstance(model, MoeConfig)
    result = {
        "benchmark": "moe_train_cpu",
        "model": args.model,
        "backend": model.expert_backend if is_moe else None,
        "capacity_factor": model.capacity_factor if is_moe else None,
        "parameters": model.num_parameters(),
        "active_parameters": model.active_parameters(),
        "steps_timed": len(timed),
        "tokens_per_s": round(tokens / seconds, 1),
        "step_seconds_mean": round(seconds / len(timed), 4),
        "cpu_seconds_per_step": round((records[-1][CPU_METRIC] - records[0][CPU_METRIC]) / len(timed), 3),
        "compile_step_seconds": round(records[0]["step_seconds"], 2),
        "wall_seconds": round(time.perf_counter() - wall_start, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load": [start_load, load()],
    }
    print(json.dumps(result))


def layer_step(config: MoeConfig, experts: Callable, capacity_factor: float | None, tokens: int) -> Callable:
    """A jitted forward + backward of one MoE layer through `experts`: the loss and the gradients of every input."""
    capacity = capacity_slots(tokens, config.num_experts, config.experts_per_token, capacity_factor)

    def loss(x: jax.Array, router: jax.Array, weights: tuple[jax.Array, ...]) -> jax.Array:
        routing, _ = route(x @ router, config.experts_per_token, config.router_weights, capacity)
        out = jnp.einsum("ktd,kt->td", experts(x, routing, weights, capacity), routing.weights)
        return jnp.mean(jnp.square(out))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))


def layer(args: argparse.Namespace) -> None:
    """Time every layer variant in interleaved rounds; one JSON line per variant and a Markdown table."""
    config = model_config("moe8" if args.experts == 8 else "moe64", None, None)
    assert isinstance(config, MoeConfig)
    keys = jax.random.split(jax.random.key(0), 5)
    e, h, f = config.num_experts, config.hidden_dim, config.intermediate_dim
    x = jax.random.normal(keys[0], (args.tokens, h))
    router = 0.02 * jax.random.normal(keys[1], (h, e))
    weights = tuple(0.02 * jax.random.normal(k, s) for k, s in zip(keys[2:], [(e, h, f), (e, h, f), (e, f, h)]))
    names = [name for name in LAYER_VARIANTS if name not in args.skip]
    steps = {name: layer_step(config, *LAYER_VARIANTS[name], args.tokens) for name in names}
    for name in names:
        jax.block_until_ready(steps[name](x, router, weights))  # compile
    seconds: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    loads = []
    for _ in range(args.rounds):
        loads.append(load())
        for name in names:
            start, cpu_start = time.perf_counter(), cpu_seconds()
            jax.block_until_ready(steps[name](x, router, weights))
            seconds[name].append(time.perf_counter() - start)
            cpu[name].append(cpu_seconds() - cpu_start)
    print(f"| {e} experts, k {config.experts_per_token}, width {f}, {args.tokens} tokens | ms | CPU ms | tokens/s |")
    print("| --- | --- | --- | --- |")
    results = []
    for name in names:
        median, cpu_median = statistics.median(seconds[name]), statistics.median(cpu[name])
        results.append(
            {
                "benchmark": "moe_layer_cpu",
                "experts": e,
                "k": config.experts_per_token,
                "expert_width": f,
                "tokens": args.tokens,
                "variant": name,
                "ms_median": round(1e3 * median, 1),
                "ms_rounds": [round(1e3 * s, 1) for s in seconds[name]],
                "cpu_ms_median": round(1e3 * cpu_median, 1),
                "tokens_per_s": round(args.tokens / median, 1),
                "loads": loads,
            }
        )
        print(f"| {name} | {1e3 * median:.1f} | {1e3 * cpu_median:.1f} | {args.tokens / median:,.0f} |")
    for result in results:
        print(json.dumps(result))


def main() -> None:
    """`train` or `layer` (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    modes = parser.add_subparsers(dest="mode", required=True)
    run = modes.add_parser("train")
    run.add_argument("--model", choices=sorted(SHAPES), default="moe8")
    run.add_argument("--backend", choices=["padded", "ragged"], default=None, help="expert backend (default: auto)")
    run.add_argument("--capacity-factor", type=float, default=None, help="default: dropless")
    run.add_argument("--steps", type=int, default=6, help="timed steps (after one compiling step)")
    run.add_argument("--seq-len", type=int, default=256)
    run.add_argument("--batch-size", type=int, default=4)
    one = modes.add_parser("layer")
    one.add_argument("--experts", type=int, choices=[8, 64], default=8)
    one.add_argument("--tokens", type=int, default=1024)
    one.add_argument("--rounds", type=int, default=3)
    one.add_argument("--skip", action="append", default=[], choices=sorted(LAYER_VARIANTS), help="leave a variant out")
    args = parser.parse_args()
    (train if args.mode == "train" else layer)(args)


if __name__ == "__main__":
    main()
