"""What the instability signals cost a train step: the step with `signals` on against the same step with them off.

The signals (`aux/attn_logit_max` per layer, `aux/logit_max`, `aux/log_z_max`)
are computed inside the jitted step (`train.objectives.NextTokenObjective`);
this measures the compiled step alone, on one fixed batch, so data loading and
logging do not dilute the ratio. Both steps are compiled first, then timed in
interleaved rounds (the order alternates each round), and the figures are
medians over rounds of the per-step wall and process-CPU seconds. Shapes: the
CPU training benchmark's (`tiny` preset: hidden 256, 4 layers, vocab 8192,
seq 256, batch 16) and the phenomena's tiny model (hidden 64, 2 layers, vocab
1024, seq 64, batch 16). `embed_norm` is logged either way (one norm of a
weight). Prints one JSON line per shape, last.

    python benchmarks/bench_step_signals.py --rounds 9 --steps 10
"""

import argparse
import dataclasses
import json
import resource
import statistics
import tempfile
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.models.llama import LlamaConfig
from tootsie.models.presets import PRESETS
from tootsie.recipes.cases.common import CASE_MODEL
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.loading import init_model
from tootsie.train.objectives import NextTokenObjective
from tootsie.train.schedule import WSDConfig
from tootsie.train.state import build_layout, build_optimizer
from tootsie.train.train_step import make_train_step

SHAPES: dict[str, tuple[LlamaConfig, int, int]] = {
    "cpu-benchmark": (dataclasses.replace(PRESETS["tiny"], attention="xla"), 256, 16),
    "phenomena-tiny": (CASE_MODEL, 64, 16),
}
"""Shape name → (model, sequence length, batch size)."""


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stepper(model: LlamaConfig, seq_len: int, batch: int, signals: bool, cache: str):
    """A closure running `n` train steps of `model` with the signals on or off: returns (wall s, CPU s) per step."""
    config = TrainConfig(
        model=model,
        data=MixtureConfig(
            caches={"c": cache},
            stages=(MixtureStage(0, {"c": 1.0}),),
            seq_len=seq_len,
            batch_schedule=BatchSchedule.constant(batch),
        ),
        num_steps=10**6,
        schedule=WSDConfig(peak_lr=1e-3, warmup_steps=2, decay_steps=0, total_steps=10**6),
        checkpoints=CheckpointConfig(every_steps=10**9, every_minutes=None),
        objective=NextTokenObjective(signals=signals),
        ema=None,
    )
    optimizer = build_optimizer(config)
    train_step = make_train_step(config, optimizer, build_layout(config, optimizer))
    params = init_model(config)
    state = {"model": params, "opt": optimizer.init(eqx.filter(params, eqx.is_array)), "step": 0}
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(0, model.vocab_size, (batch, seq_len)), jnp.int32)
    segments = jnp.asarray(np.repeat([[0] * (seq_len // 2) + [1] * (seq_len - seq_len // 2)], batch, 0), jnp.int32)
    mask = jnp.ones((batch, seq_len), jnp.float32)

    def run(n: int) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), cpu_seconds()
        for _ in range(n):
            model_, opt, _, metrics = train_step(
                state["model"], state["opt"], None, jnp.asarray(state["step"]), tokens, segments, mask
            )
            jax.block_until_ready(metrics)
            state.update(model=model_, opt=opt, step=state["step"] + 1)
        return (time.perf_counter() - wall) / n, (cpu_seconds() - cpu) / n

    return run


def measure(name: str, rounds: int, steps: int) -> dict[str, object]:
    """Median per-step wall and CPU seconds with the signals off and on, interleaved, and their ratios."""
    model, seq_len, batch = SHAPES[name]
    with tempfile.TemporaryDirectory() as cache:
        runs = {signals: stepper(model, seq_len, batch, signals, cache) for signals in (False, True)}
        for run in runs.values():
            run(2)  # compile, and a step past it
        times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for index in range(rounds):
            for signals in (False, True) if index % 2 == 0 else (True, False):
                times[signals].append(runs[signals](steps))
    wall = {s: statistics.median(t[0] for t in times[s]) for s in times}
    cpu = {s: statistics.median(t[1] for t in times[s]) for s in times}
    return {
        "benchmark": "step_signals",
        "shape": name,
        "rounds": rounds,
        "steps_per_round": steps,
        "wall_s_off": wall[False],
        "wall_s_on": wall[True],
        "wall_ratio": wall[True] / wall[False],
        "cpu_s_off": cpu[False],
        "cpu_s_on": cpu[True],
        "cpu_ratio": cpu[True] / cpu[False],
        "device": jax.default_backend(),
    }


def main() -> None:
    """Measure every shape (or those named) and print one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (the figures are medians)")
    parser.add_argument("--steps", type=int, default=10, help="steps per round per setting")
    parser.add_argument("--shape", choices=list(SHAPES), action="append", help="default: every shape")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
    for name in args.shape or list(SHAPES):
        print(json.dumps(measure(name, args.rounds, args.steps)), flush=True)


if __name__ == "__main__":
    main()
