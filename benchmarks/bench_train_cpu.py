"""Training throughput of tootsie's trainer on the issue's CPU shape, with peak memory.

Shape (issue 5): Llama, hidden 256, 4 layers, 4 heads, SwiGLU 1024, vocab
8192, seq 256, batch 16, float32 (8.4 M parameters). Data: a synthetic token
cache. Times `--steps` training steps after compilation and prints tokens/s,
the step time, and the process's peak RSS. The peer (Levanter's `train_lm` on
the same shape) runs in its own virtualenv; see docs/training.md.

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
from tootsie.models.presets import PRESETS
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig


def main() -> None:
    """Train the benchmark shape for `--steps` steps and report throughput and memory."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    model = PRESETS["tiny"]
    with tempfile.TemporaryDirectory(prefix="tootsie-bench-train-") as tmp:
        writer = TokenCacheWriter(Path(tmp) / "cache", vocab_size=model.vocab_size, ledger_extra={})
        rng = np.random.default_rng(0)
        lengths = rng.integers(100, 2000, size=4000)
        writer.append_flat(rng.integers(0, model.vocab_size, size=int(lengths.sum())), lengths)
        writer.close()
        config = TrainConfig(
            model=model,
            data=MixtureConfig(
                caches={"synthetic": str(Path(tmp) / "cache")},
                stages=(MixtureStage(0, {"synthetic": 1.0}),),
                seq_len=args.seq_len,
                batch_schedule=BatchSchedule.constant(args.batch_size),
            ),
            num_steps=args.steps + 1,
            schedule=WSDConfig(peak_lr=1e-3, warmup_steps=2, decay_steps=0, total_steps=args.steps + 1),
            ema=None,
            checkpoints=CheckpointConfig(every_steps=10**9, every_minutes=None),
        )
        started = time.perf_counter()
        run_training(config, str(Path(tmp) / "run"))
        wall = time.perf_counter() - started
        records = [json.loads(line) for line in (Path(tmp) / "run" / METRICS_FILE).read_text().splitlines()]
    timed = records[1:]  # step 0 includes compilation
    seconds = sum(r["step_seconds"] for r in timed)
    tokens = sum(r["batch_size"] for r in timed) * args.seq_len
    result = {
        "benchmark": "train_cpu",
        "parameters": model.num_parameters(),
        "steps_timed": len(timed),
        "tokens_per_s": round(tokens / seconds, 1),
        "step_seconds_mean": round(seconds / len(timed), 4),
        "compile_step_seconds": round(records[0]["step_seconds"], 2),
        "wall_seconds": round(wall, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(
        f"tootsie train, {result['parameters'] / 1e6:.1f} M parameters: {result['tokens_per_s']:.0f} tokens/s, "
        f"peak RSS {result['peak_rss_mb']:.0f} MB"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
