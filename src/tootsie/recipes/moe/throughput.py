"""Tokens/s of the MoE's gradient step per capacity factor, timed in interleaved rounds in one process.

The training runs log tokens/s too, but they run one after another on a
shared machine whose load changes between them. Here every factor's step is
compiled first, then the factors take turns, round after round, and each
factor's median step time is kept, so a load change touches every factor
alike. The step is the objective's loss and its gradient (the training
forward under the capacity factor, the backward), on one batch of random
tokens of the runs' shape; the optimizer update is the same for every factor
and left out.

Example: 5 rounds of 4 factors time 20 steps; at cf 1 and 4, medians of
0.10 s and 0.25 s per 1,024-token step give 10,240 and 4,096 tokens/s.
"""

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from tootsie.jsonfile import write_json_atomic
from tootsie.models.moe import MoeConfig
from tootsie.train.objectives import NextTokenObjective

THROUGHPUT_FILE = "throughput.json"


@dataclass(frozen=True)
class ThroughputConfig:
    """The model, the capacity factors, the batch and how many rounds."""

    model: MoeConfig
    """The MoE whose capacity factor varies."""
    factors: tuple[float, ...]
    """Capacity factors to time."""
    batch_size: int
    """Sequences per step."""
    seq_len: int
    """Tokens per sequence."""
    rounds: int = 10
    """Interleaved rounds (one step of every factor each)."""

    def __post_init__(self) -> None:
        if not self.factors or self.rounds < 1 or self.batch_size < 1 or self.seq_len < 2:
            raise ValueError(
                f"need factors, rounds >= 1, batch_size >= 1 and seq_len >= 2, got {self.factors=}, "
                f"{self.rounds=}, {self.batch_size=}, {self.seq_len=}"
            )


def time_capacity_factors(config: ThroughputConfig, output_path: str) -> dict[str, object]:
    """Median seconds and tokens/s of one gradient step per factor; `throughput.json` under `output_path`."""
    key_tokens, key_model = jax.random.split(jax.random.key(0))
    tokens = jax.random.randint(key_tokens, (config.batch_size, config.seq_len), 0, config.model.vocab_size)
    segments, mask = jax.numpy.zeros_like(tokens), jax.numpy.ones(tokens.shape, jax.numpy.float32)
    objective = NextTokenObjective()
    steps = {}
    for cf in config.factors:
        model = dataclasses.replace(config.model, capacity_factor=cf).build(key=key_model)
        step = eqx.filter_jit(eqx.filter_grad(lambda m: objective.loss(m, tokens, segments, mask, 0.0)[0]))
        jax.block_until_ready(step(model))  # compile
        steps[cf] = (step, model)
    seconds = {cf: [] for cf in config.factors}
    for _ in range(config.rounds):
        for cf, (step, model) in steps.items():
            start = time.perf_counter()
            jax.block_until_ready(step(model))
            seconds[cf].append(time.perf_counter() - start)
    step_tokens = config.batch_size * config.seq_len
    results = {
        "tokens_per_step": step_tokens,
        "rounds": config.rounds,
        "factors": {
            f"{cf:g}": {
                "median_seconds": float(np.median(times)),
                "tokens_per_s": step_tokens / float(np.median(times)),
                "seconds": times,
            }
            for cf, times in seconds.items()
        },
    }
    Path(output_path).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(output_path) / THROUGHPUT_FILE, results)
    return results
