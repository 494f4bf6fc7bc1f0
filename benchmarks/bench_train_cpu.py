"""Training throughput of tootsie's trainer on the issue's CPU shape: wall tokens/s, CPU s/step, peak memory.

Shape (issue 5): Llama, hidden 256, 4 layers, 4 heads, SwiGLU 1024, vocab
8192, seq 256, batch 16, float32 (8.4 M parameters). Data: a synthetic token
cache. One process trains the shape twice, each run in a fresh directory:
`--short-steps` then `--steps` timed steps (plus one compiling step each).
Wall tokens/s is the long run's steady state (the metrics' step times after
step 0). CPU seconds per step is the difference of the two runs' user+sys
seconds divided by the difference of their step counts, which cancels
start-up, compilation and cache building, so it stays meaningful on a shared
machine. Peak RSS is the process's maximum. Prints one line of JSON last;
the peer (Levanter's `train_lm` on the same shape) runs in its own
virtualenv, see docs/training.md.

    python benchmarks/bench_train_cpu.py --steps 30
"""

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.models.presets import PRESETS
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def synthetic_run(root: Path, model: LlamaConfig, steps: int, seq_len: int, batch_size: int) -> TrainConfig:
    """A `steps` + 1 step run of `model` on 4,000 synthetic documents (100-2,000 uniform ids, seed 0) cached in `root`.

    The data and settings every CPU training benchmark (this one, bench_moe.py) and its Levanter peer share.
    """
    writer = TokenCacheWriter(root / "cache", vocab_size=model.vocab_size, ledger_extra={})
    rng = np.random.default_rng(0)
    lengths = rng.integers(100, 2000, size=4000)
    writer.append_flat(rng.integers(0, model.vocab_size, size=int(lengths.sum())), lengths)
    writer.close()
    return TrainConfig(
        model=model,
        data=MixtureConfig(
            caches={"synthetic": str(root / "cache")},
            stages=(MixtureStage(0, {"synthetic": 1.0}),),
            seq_len=seq_len,
            batch_schedule=BatchSchedule.constant(batch_size),
        ),
        num_steps=steps + 1,
        schedule=WSDConfig(peak_lr=1e-3, warmup_steps=2, decay_steps=0, total_steps=steps + 1),
        ema=None,
        checkpoints=CheckpointConfig(every_steps=10**9, every_minutes=None),
    )


def train_once(steps: int, seq_len: int, batch_size: int) -> tuple[float, float, list[dict]]:
    """Train `steps` + 1 steps in a fresh directory; (CPU seconds, wall seconds, metric records)."""
    with tempfile.TemporaryDirectory(prefix="tootsie-bench-train-") as tmp:
        cpu_start, wall_start = cpu_seconds(), time.perf_counter()
        config = synthetic_run(Path(tmp), PRESETS["tiny"], steps, seq_len, batch_size)
        run_training(config, str(Path(tmp) / "run"))
        cpu, wall = cpu_seconds() - cpu_start, time.perf_counter() - wall_start
        records = [json.loads(line) for line in (Path(tmp) / "run" / METRICS_FILE).read_text().splitlines()]
    return cpu, wall, records


def main() -> None:
    """Train the benchmark shape twice (short, long) and print throughput, CPU s/step and memory."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30, help="timed steps of the long run")
    parser.add_argument("--short-steps", type=int, default=10, help="timed steps of the short run")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    if args.steps <= args.short_steps:
        raise SystemExit(f"--steps must exceed --short-steps, got {args.steps=} {args.short_steps=}")
    short_cpu, _, _ = train_once(args.short_steps, args.seq_len, args.batch_size)
    long_cpu, long_wall, records = train_once(args.steps, args.seq_len, args.batch_size)
    timed = records[1:]  # step 0 includes compilation
    seconds = sum(r["step_seconds"] for r in timed)
    tokens = sum(r["batch_size"] for r in timed) * args.seq_len
    result = {
        "benchmark": "train_cpu",
        "parameters": PRESETS["tiny"].num_parameters(),
        "steps_timed": len(timed),
        "tokens_per_s": round(tokens / seconds, 1),
        "step_seconds_mean": round(seconds / len(timed), 4),
        "cpu_seconds_per_step": round((long_cpu - short_cpu) / (args.steps - args.short_steps), 3),
        "compile_step_seconds": round(records[0]["step_seconds"], 2),
        "wall_seconds": round(long_wall, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(
        f"tootsie train, {result['parameters'] / 1e6:.1f} M parameters: {result['tokens_per_s']:.0f} tokens/s, "
        f"{result['cpu_seconds_per_step']:.2f} CPU s/step, peak RSS {result['peak_rss_mb']:.0f} MB"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
