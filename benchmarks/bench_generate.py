"""Generation speed with the KV cache against full recomputation, tokens/s at 256 new tokens.

Both decode greedily from a randomly initialized model (no stop token, so every
row runs its whole budget) after a prompt of `--prompt-len` tokens:

- cache: `tootsie.models.generate.generate` (prefill once, then one token per step against the cache);
- recompute: `Scorer.greedy_generate`, the forward pass over the whole padded
  sequence (prompt + budget, bucketed) at every step, as lm-eval generation ran before the cache.

Each (batch, method) pair is warmed once (compiles), then timed `--repeats`
times interleaved (cache, recompute, cache, ...), and the median is reported,
with the load average, since the machine may be shared.

    python benchmarks/bench_generate.py --shape small --batch 1 8 --new-tokens 256 --repeats 3
"""

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import jax

from tootsie.eval.lm_scoring import Scorer
from tootsie.models.generate import SamplingConfig, bucket, cache_length, generate
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.models.presets import PRESETS

SHAPES = {"small": LlamaConfig(), "125m": PRESETS["125m"]}
"""`small`: LlamaConfig's defaults (hidden 256, 4 layers, vocab 4096); `125m`: the preset."""


def _cached(model: LlamaModel, prompts: list[list[int]], sampling: SamplingConfig) -> int:
    return sum(len(g.tokens) for g in generate(model, prompts, sampling))


def _recompute(scorer: Scorer, prompts: list[list[int]], new_tokens: int) -> int:
    outputs = scorer.greedy_generate(prompts, [new_tokens] * len(prompts), lambda index, ids: False)
    return sum(map(len, outputs))


def _time_interleaved(
    methods: dict[str, Callable[[], int]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Seconds of each repeat and tokens generated per method, after one warm-up (compile) run each."""
    for run in methods.values():
        run()
    seconds: dict[str, list[float]] = {name: [] for name in methods}
    tokens: dict[str, int] = {}
    for _ in range(repeats):
        for name, run in methods.items():
            start = time.perf_counter()
            tokens[name] = run()
            seconds[name].append(time.perf_counter() - start)
    return seconds, tokens


def main() -> None:
    """Time both methods per batch size and print one JSON line per batch size."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = SHAPES[args.shape]
    model = LlamaModel(config, key=jax.random.PRNGKey(0))
    sampling = SamplingConfig(max_new_tokens=args.new_tokens)
    width = cache_length(bucket(args.prompt_len), args.new_tokens)
    for batch in args.batch:
        prompts = [[(7 * row + i) % config.vocab_size for i in range(args.prompt_len)] for row in range(batch)]
        scorer = Scorer(model, max_length=width, batch_size=batch)

        methods = {
            "cache": partial(_cached, model, prompts, sampling),
            "recompute": partial(_recompute, scorer, prompts, args.new_tokens),
        }
        seconds, tokens = _time_interleaved(methods, args.repeats)
        rates = {name: tokens[name] / statistics.median(seconds[name]) for name in methods}
        print(
            json.dumps(
                {
                    "shape": args.shape,
                    "batch": batch,
                    "new_tokens": args.new_tokens,
                    "prompt_len": args.prompt_len,
                    "cache_tokens_per_s": round(rates["cache"], 1),
                    "recompute_tokens_per_s": round(rates["recompute"], 1),
                    "speedup": round(rates["cache"] / rates["recompute"], 2),
                    "seconds": {name: [round(s, 3) for s in values] for name, values in seconds.items()},
                    "load_average": [round(x, 2) for x in os.getloadavg()],
                    "device": str(jax.devices()[0]),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
