"""Checks that need a GPU: cuDNN attention against the XLA path, ragged MoE experts against padded, and their speed.

Three parts, each printing one JSON line per case (and `--json FILE` collects them):

- `attention`: packed documents (random lengths, contiguous segment ids) at
  MHA, GQA and MQA head counts. cuDNN's fused kernel (`cudnn_attention`, the
  packed layout on Hopper) and the XLA path, both in bf16, are compared with
  the XLA path in float32 as the reference: the output and the gradients of
  q, k and v. The check is that cuDNN's error is of the bf16 path's size
  (`error_ratio` = cuDNN's largest relative error over bf16 XLA's), not that
  either is exact. Then each path's forward+backward is timed.
- `moe`: one MoE layer's routed expert compute, `ragged_experts`
  (`jax.lax.ragged_dot`, the grouped matmul `auto` picks on GPU) against
  `padded_experts` (the tile-padded loop the CPU uses), forward output and
  gradients, then both timed forward+backward, with achieved TFLOP/s.
- The train step's MFU is `bench_train_gpu.py`'s job; run it beside this.

On a machine without a GPU, `--smoke` runs the same code at tiny shapes with
the XLA path standing in for cuDNN (so the script itself is tested on CPU).

    python benchmarks/gpu_checks.py --json gpu_checks.json
    python benchmarks/gpu_checks.py --smoke
"""

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from tootsie.models.attention import attention_mask, cudnn_attention, xla_attention
from tootsie.models.experts import padded_experts, ragged_experts
from tootsie.models.routing import capacity_slots, route

ATTENTION_HEADS = ((16, 16), (16, 4), (16, 1))
"""(query heads, key/value heads) checked: MHA, GQA, MQA."""


def packed_segments(batch: int, seq: int, shortest: int, longest: int, seed: int) -> np.ndarray:
    """Segment ids of rows packed with documents of `shortest`..`longest` tokens (contiguous runs)."""
    rng = np.random.default_rng(seed)
    segments = np.zeros((batch, seq), np.int32)
    for row in segments:
        boundaries = np.cumsum(rng.integers(shortest, longest, size=seq // shortest + 1))
        row[:] = np.searchsorted(boundaries, np.arange(seq), side="right")
    return segments


def timed_ms(function: Callable, *args: jax.Array, rounds: int) -> list[float]:
    """Milliseconds of `rounds` calls of the compiled `function` (compiled and warmed first)."""
    jax.block_until_ready(function(*args))
    jax.block_until_ready(function(*args))
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        jax.block_until_ready(function(*args))
        times.append(1e3 * (time.perf_counter() - start))
    return times


def relative_error(value: jax.Array, reference: jax.Array) -> float:
    """Largest absolute difference over the reference's largest magnitude, in float32."""
    value, reference = np.asarray(value, np.float32), np.asarray(reference, np.float32)
    return float(np.abs(value - reference).max() / max(np.abs(reference).max(), 1e-30))


def attention_case(batch: int, seq: int, heads: int, kv_heads: int, dim: int, smoke: bool, rounds: int) -> dict:
    """cuDNN and bf16 XLA attention against float32 XLA on packed documents: errors and forward+backward times."""
    keys = jax.random.split(jax.random.key(heads * 100 + kv_heads), 4)
    q = jax.random.normal(keys[0], (batch, seq, heads, dim), jnp.float32)
    k = jax.random.normal(keys[1], (batch, seq, kv_heads, dim), jnp.float32)
    v = jax.random.normal(keys[2], (batch, seq, kv_heads, dim), jnp.float32)
    cotangent = jax.random.normal(keys[3], (batch, seq, heads, dim), jnp.float32)
    segments = jnp.asarray(packed_segments(batch, seq, max(8, seq // 32), max(16, seq // 2), seed=heads + kv_heads))

    def xla(q, k, v, segments):
        return xla_attention(q, k, v, attention_mask(segments, batch, seq))

    def cudnn(q, k, v, segments):
        return xla(q, k, v, segments) if smoke else cudnn_attention(q, k, v, segments)

    def forward_backward(attend: Callable, dtype: jnp.dtype) -> Callable:
        def loss(q, k, v, segments, cotangent):
            out = attend(q.astype(dtype), k.astype(dtype), v.astype(dtype), segments)
            return jnp.sum(out.astype(jnp.float32) * cotangent), out

        return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))

    results = {}
    for name, attend, dtype in (("reference", xla, jnp.float32), ("xla_bf16", xla, jnp.bfloat16)):
        results[name] = forward_backward(attend, dtype)
    results["cudnn"] = forward_backward(cudnn, jnp.bfloat16)
    outputs = {name: step(q, k, v, segments, cotangent) for name, step in results.items()}
    (_, reference_out), reference_grads = outputs["reference"]
    errors = {}
    for name in ("xla_bf16", "cudnn"):
        (_, out), grads = outputs[name]
        errors[name] = {"out": relative_error(out, reference_out)} | {
            f"d{part}": relative_error(grad, ref) for part, grad, ref in zip("qkv", grads, reference_grads)
        }
    worst = {name: max(parts.values()) for name, parts in errors.items()}
    times = {
        name: timed_ms(results[name], q, k, v, segments, cotangent, rounds=rounds) for name in ("xla_bf16", "cudnn")
    }
    documents = int(np.sum(np.asarray(segments)[:, 1:] != np.asarray(segments)[:, :-1]) + batch)
    return {
        "check": "attention",
        "batch": batch,
        "seq": seq,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": dim,
        "documents": documents,
        "relative_error": errors,
        "error_ratio": round(worst["cudnn"] / max(worst["xla_bf16"], 1e-30), 3),
        "fwd_bwd_ms_median": {name: round(statistics.median(t), 3) for name, t in times.items()},
        "speedup_cudnn_over_xla": round(statistics.median(times["xla_bf16"]) / statistics.median(times["cudnn"]), 2),
    }


def moe_case(tokens: int, hidden: int, width: int, experts: int, k: int, dtype: jnp.dtype, rounds: int) -> dict:
    """Ragged (grouped matmul) against padded expert compute, dropless: output, gradients and forward+backward."""
    keys = jax.random.split(jax.random.key(experts * 10 + k), 6)
    x = jax.random.normal(keys[0], (tokens, hidden), jnp.float32).astype(dtype)
    router = (0.02 * jax.random.normal(keys[1], (hidden, experts), jnp.float32)).astype(dtype)
    shapes = [(experts, hidden, width), (experts, hidden, width), (experts, width, hidden)]
    weights = tuple(
        (0.02 * jax.random.normal(key, shape, jnp.float32)).astype(dtype) for key, shape in zip(keys[2:5], shapes)
    )
    cotangent = jax.random.normal(keys[5], (tokens, hidden), jnp.float32)
    capacity = capacity_slots(tokens, experts, k, None)

    def step_of(experts_fn: Callable) -> Callable:
        def loss(x, router, weights, cotangent):
            routing, _ = route((x @ router).astype(jnp.float32), k, "renormalized", capacity)
            out = jnp.einsum(
                "ktd,kt->td", experts_fn(x, routing, weights, capacity).astype(jnp.float32), routing.weights
            )
            return jnp.sum(out * cotangent), out

        return jax.jit(jax.value_and_grad(loss, argnums=(0, 2), has_aux=True))

    steps = {"ragged": step_of(ragged_experts), "padded": step_of(padded_experts)}
    (_, ragged_out), ragged_grads = steps["ragged"](x, router, weights, cotangent)
    (_, padded_out), padded_grads = steps["padded"](x, router, weights, cotangent)
    flat_ragged = [ragged_grads[0], *ragged_grads[1]]
    flat_padded = [padded_grads[0], *padded_grads[1]]
    errors = {"out": relative_error(ragged_out, padded_out)} | {
        name: relative_error(a, b) for name, a, b in zip(("dx", "dgate", "dup", "ddown"), flat_ragged, flat_padded)
    }
    times = {name: timed_ms(step, x, router, weights, cotangent, rounds=rounds) for name, step in steps.items()}
    flops = 3 * 2 * 3 * k * tokens * hidden * width  # three matmuls per expert MLP, forward + twice that backward
    return {
        "check": "moe",
        "dtype": jnp.dtype(dtype).name,
        "tokens": tokens,
        "hidden": hidden,
        "expert_width": width,
        "experts": experts,
        "k": k,
        "relative_error_ragged_vs_padded": errors,
        "fwd_bwd_ms_median": {name: round(statistics.median(t), 3) for name, t in times.items()},
        "expert_tflops": {name: round(flops / statistics.median(t) / 1e9, 1) for name, t in times.items()},
        "speedup_ragged_over_padded": round(statistics.median(times["padded"]) / statistics.median(times["ragged"]), 2),
    }


def main() -> None:
    """Run the attention and MoE checks; one JSON line per case, and all of them in `--json`."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes; XLA stands in for cuDNN (runs on CPU)")
    parser.add_argument("--rounds", type=int, default=10, help="timed calls per variant (median reported)")
    parser.add_argument("--json", type=Path, default=None, help="also write every case to this file")
    args = parser.parse_args()
    device = jax.devices()[0]
    if not args.smoke and device.platform != "gpu":
        raise SystemExit(f"no GPU here ({device.platform}); pass --smoke to run the tiny shapes on it")
    results: list[dict] = []

    def emit(check: str, case: Callable[[], dict]) -> None:
        """Run one case and print its row; a case that raises is recorded as its error, and the rest still run."""
        try:
            row = case()
        except Exception as error:  # noqa: BLE001 - one broken case must not hide the others' figures
            row = {"check": check, "error": f"{type(error).__name__}: {str(error)[:500]}"}
        row = {"device": device.device_kind, **row}
        results.append(row)
        print(json.dumps(row), flush=True)

    seq, batch, dim = (64, 2, 16) if args.smoke else (4096, 4, 128)
    for heads, kv_heads in ATTENTION_HEADS if not args.smoke else ((4, 4), (4, 1)):
        emit("attention", functools.partial(attention_case, batch, seq, heads, kv_heads, dim, args.smoke, args.rounds))
    moe_shapes = (
        [(64, 16, 8, 8, 2)]
        if args.smoke
        else [(16384, 2048, 1408, 8, 2), (16384, 2048, 768, 64, 8), (16384, 2048, 768, 128, 8)]
    )
    for dtype in (jnp.float32, jnp.bfloat16):
        for tokens, hidden, width, experts, k in moe_shapes:
            emit("moe", functools.partial(moe_case, tokens, hidden, width, experts, k, dtype, args.rounds))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
