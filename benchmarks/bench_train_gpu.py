"""Training throughput and MFU of one device at the 125M and 1B Llama shapes, seq 4096, bf16 compute.

The train step is the trainer's own (`make_train_step`: bf16 compute over fp32
master weights and fp32 Adam moments, the fused chunked loss, the configured
remat, attention `auto` = cuDNN's fused kernel on GPU), fed batches of packed
documents (segment ids of documents of 200-2,000 tokens) already on the
device, so the figure is the step and not the data loader. Each shape compiles,
runs `--warmup` steps, then times `--steps` steps; MFU is
`flops_per_token(seq) × tokens/s ÷ peak` (model FLOPs: causal attention, no
recompute; peaks in `tootsie.monitor.throughput`). On a CPU it still runs
(`--smoke` gives a tiny shape to check that) but reports no MFU: a CPU has no
bf16 peak to divide by.

    python benchmarks/bench_train_gpu.py                      # 125m and 1b, seq 4096
    python benchmarks/bench_train_gpu.py --shapes 1b --batch-size 16 --remat dots
    python benchmarks/bench_train_gpu.py --smoke              # tiny shape, runs anywhere
"""

import argparse
import dataclasses
import json
import tempfile
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.models.llama import REMAT_POLICIES, LlamaConfig
from tootsie.models.presets import PRESETS
from tootsie.monitor.throughput import mfu
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.loading import init_model
from tootsie.train.objectives import NextTokenObjective
from tootsie.train.schedule import WSDConfig
from tootsie.train.state import build_layout, build_optimizer
from tootsie.train.train_step import make_train_step

SMOKE = LlamaConfig(vocab_size=512, hidden_dim=64, intermediate_dim=128, num_layers=2, num_heads=4, num_kv_heads=2)


def packed_batch(batch: int, seq_len: int, vocab: int, seed: int = 0) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Random tokens in rows of packed documents (200-2,000 tokens each), every position in the loss."""
    rng = np.random.default_rng(seed)
    segments = np.zeros((batch, seq_len), np.int32)
    for row in segments:
        boundaries = np.cumsum(rng.integers(200, 2000, size=seq_len // 200 + 1))
        row[:] = np.searchsorted(boundaries, np.arange(seq_len), side="right")
    tokens = rng.integers(0, vocab, size=(batch, seq_len), dtype=np.int32)
    return jnp.asarray(tokens), jnp.asarray(segments), jnp.ones((batch, seq_len), jnp.float32)


def fresh(batch: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
    """A device-side copy of the batch for one step: the step donates its inputs, and on a GPU a donated array
    is gone (reusing it raised "Array has been deleted" on an H200)."""
    return tuple(jnp.copy(array) for array in batch)


def bench_shape(
    model: LlamaConfig, seq_len: int, batch: int, steps: int, warmup: int, signals: bool
) -> dict[str, object]:
    """Compile and time the train step of `model` at this shape on one device; the figures as a dict.

    `signals` is the objective's instability signals (`NextTokenObjective.signals`): beside cuDNN they cost a
    recomputed `q·kᵀ` per layer, forward only.
    """
    with tempfile.TemporaryDirectory(prefix="tootsie-bench-gpu-") as cache:
        config = TrainConfig(
            model=model,
            data=MixtureConfig(
                caches={"unused": cache},
                stages=(MixtureStage(0, {"unused": 1.0}),),
                seq_len=seq_len,
                batch_schedule=BatchSchedule.constant(batch),
            ),
            num_steps=steps + warmup + 1,
            schedule=WSDConfig(peak_lr=3e-4, warmup_steps=1, decay_steps=0, total_steps=steps + warmup + 1),
            checkpoints=CheckpointConfig(every_steps=10**9, every_minutes=None),
            compute_dtype="bfloat16",
            ema=None,
            objective=NextTokenObjective(signals=signals),
        )
        optimizer = build_optimizer(config)
        layout = build_layout(config, optimizer)
    train_step = make_train_step(config, optimizer, layout)
    state = init_model(config)
    opt_state = optimizer.init(eqx.filter(state, eqx.is_array))
    data = packed_batch(batch, seq_len, model.vocab_size)
    started = time.perf_counter()
    state, opt_state, _, metrics = train_step(state, opt_state, None, jnp.asarray(0), *fresh(data))
    jax.block_until_ready(metrics)
    compile_seconds = time.perf_counter() - started
    for index in range(warmup):
        state, opt_state, _, metrics = train_step(state, opt_state, None, jnp.asarray(1 + index), *fresh(data))
    jax.block_until_ready(metrics)
    started = time.perf_counter()
    for index in range(steps):
        state, opt_state, _, metrics = train_step(state, opt_state, None, jnp.asarray(1 + warmup + index), *fresh(data))
    jax.block_until_ready((state, metrics))
    seconds = (time.perf_counter() - started) / steps
    tokens_per_s = batch * seq_len / seconds
    device = jax.devices()[0]
    on_cpu = device.platform == "cpu"
    utilization = None if on_cpu else mfu(model.flops_per_token(seq_len), tokens_per_s, device.device_kind)
    memory = device.memory_stats() or {}
    return {
        "parameters": model.num_parameters(),
        "seq_len": seq_len,
        "batch_size": batch,
        "remat": model.remat,
        "attention": model.attention,
        "signals": signals,
        "device": device.device_kind,
        "step_seconds": round(seconds, 4),
        "tokens_per_s": round(tokens_per_s, 1),
        "mfu": None if utilization is None else round(utilization, 4),
        "compile_seconds": round(compile_seconds, 1),
        "peak_device_memory_gb": round(memory["peak_bytes_in_use"] / 2**30, 2)
        if "peak_bytes_in_use" in memory
        else None,
        "loss": float(metrics["loss"]),
    }


def main() -> None:
    """Benchmark each shape and print a table, then one JSON line per shape."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="125m,1b", help="comma-separated presets (tootsie.models.presets)")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per step (one device)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after the compiling one")
    parser.add_argument("--remat", choices=sorted(REMAT_POLICIES), default="full")
    parser.add_argument(
        "--no-signals", action="store_true", help="turn off the objective's instability signals (attn/logit maxima)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny shape (seq 128, batch 2, 3 steps) to check it runs"
    )
    args = parser.parse_args()
    if args.smoke:
        runs = [("smoke", SMOKE, 128, 2, 3, 1)]
    else:
        unknown = [name for name in args.shapes.split(",") if name not in PRESETS]
        if unknown:
            raise SystemExit(f"unknown shapes {unknown}; presets are {sorted(PRESETS)}")
        runs = [
            (name, PRESETS[name], args.seq_len, args.batch_size, args.steps, args.warmup)
            for name in args.shapes.split(",")
        ]
    results = []
    for name, model, seq_len, batch, steps, warmup in runs:
        model = dataclasses.replace(model, remat=args.remat)
        results.append({"shape": name, **bench_shape(model, seq_len, batch, steps, warmup, not args.no_signals)})
    print(f"{'shape':<8}{'params':>10}{'seq':>6}{'batch':>6}{'step s':>9}{'tokens/s':>12}{'MFU':>8}  device")
    for row in results:
        shown = "n/a" if row["mfu"] is None else f"{100 * row['mfu']:.1f}%"
        print(
            f"{row['shape']:<8}{row['parameters'] / 1e6:>9.1f}M{row['seq_len']:>6}{row['batch_size']:>6}"
            f"{row['step_seconds']:>9.3f}{row['tokens_per_s']:>12.0f}{shown:>8}  {row['device']}"
        )
    if any(row["mfu"] is None for row in results):
        print("MFU is not reported on a CPU (no bf16 peak to divide by); run on a GPU for it.")
    for row in results:
        print(json.dumps({"benchmark": "train_gpu", **row}))


if __name__ == "__main__":
    main()
