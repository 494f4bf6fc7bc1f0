"""Held-out exact match of a policy, before and after RL, with a paired bootstrap interval on the difference.

Each of the environment's first `evaluation.heldout_tasks` held-out tasks gets
one greedy completion (temperature 0, the run's token budget, EOS stops); it
is right when the environment's checker accepts it (a truncated completion is
not checked, so it is not right). Before and after score the same tasks, so
the interval is a paired bootstrap: resample tasks with replacement, take the
mean of (after − before) per resample, report the percentile interval at
`confidence`. An interval that excludes 0 says RL moved exact match.

Example: `evaluate_rl(config, "runs/rl")` gives `{"exact_match_before": 0.31,
"exact_match_after": 0.52, "difference": 0.21, "interval": [0.16, 0.26], ...}`.
"""

from pathlib import Path

import numpy as np

from tootsie.errors import TootsieError
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.kv_cache import DecoderModel
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.rl.codec import TokenizerCodec
from tootsie.rl.config import RLConfig
from tootsie.rl.environments import RewardConfig, score
from tootsie.train.callbacks import Callback, Every, Record, Run
from tootsie.train.checkpoint import latest_checkpoint, read_checkpoint_state
from tootsie.train.loading import checkpoint_root, load_model


def heldout_correct(model: DecoderModel, config: RLConfig, codec: TokenizerCodec) -> np.ndarray:
    """`[heldout_tasks]` bool: whether the greedy completion of each held-out task is right."""
    tasks = config.rl.environment.tasks("heldout", 0, config.rl.evaluation.heldout_tasks)
    checker = config.rl.environment.checker()
    sampling = SamplingConfig(max_new_tokens=config.rl.rollout.max_new_tokens, stop_tokens=(codec.eos_id,))
    rows = config.rl.rollout.batch_rows
    generations = [
        generation
        for start in range(0, len(tasks), rows)
        for generation in generate(model, [codec.encode(t.prompt) for t in tasks[start : start + rows]], sampling)
    ]
    return np.asarray(
        [
            score(
                checker,
                task,
                codec.decode(list(g.tokens)),
                truncated=g.stop_reason == "max_new_tokens",
                rewards=RewardConfig(),
            ).reason
            == "right"
            for task, g in zip(tasks, generations)
        ]
    )


def paired_bootstrap(
    before: np.ndarray, after: np.ndarray, samples: int, confidence: float, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of mean(after − before) over `samples` resamples of the paired items."""
    difference = after.astype(np.float64) - before.astype(np.float64)
    picks = np.random.default_rng(seed).integers(0, len(difference), size=(samples, len(difference)))
    means = difference[picks].mean(axis=1)
    tail = (1 - confidence) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def kl_summary(config: RLConfig, output: str | Path) -> dict[str, object]:
    """The run's largest `rl/kl`, the stated bound and how many updates went over it (from metrics.jsonl)."""
    path = Path(output) / METRICS_FILE
    kls = [float(r["rl/kl"]) for r in read_metrics(path).records if "rl/kl" in r] if path.is_file() else []
    bound = config.rl.kl_bound
    return {
        "kl_max": max(kls, default=None),
        "kl_bound": bound,
        "updates_over_kl_bound": None if bound is None else sum(kl > bound for kl in kls),
    }


def evaluate_rl(config: RLConfig, output: str | Path) -> dict[str, object]:
    """Held-out exact match of the warm start and of the run's newest checkpoint, and the interval on the gain."""
    codec = TokenizerCodec.load(config.rl.tokenizer)
    start = config.train.warm_start.checkpoint
    newest = latest_checkpoint(checkpoint_root(output))
    if newest is None:
        raise TootsieError(f"{output} has no checkpoint yet; train it with `tootsie rl --config FILE --out {output}`")
    before = heldout_correct(load_model(config.train.model, start), config, codec)
    after = heldout_correct(load_model(config.train.model, output), config, codec)
    evaluation = config.rl.evaluation
    low, high = paired_bootstrap(before, after, evaluation.bootstrap_samples, evaluation.confidence)
    return {
        "step": int(read_checkpoint_state(newest)["step"]),
        "heldout_tasks": int(before.size),
        "exact_match_before": float(before.mean()),
        "exact_match_after": float(after.mean()),
        "difference": float(after.mean() - before.mean()),
        "confidence": evaluation.confidence,
        **kl_summary(config, output),
        "interval": [low, high],
    }


class HeldoutExactMatch(Callback):
    """Log `rl/heldout_exact_match` (greedy, the evaluation's held-out tasks) every N iterations and at the end."""

    order = 22

    def __init__(self, config: RLConfig) -> None:
        steps = config.rl.evaluation.every_iterations * config.rl.updates_per_iteration
        self.config, self.every = config, Every(steps=steps, last=True)
        self.codec = TokenizerCodec.load(config.rl.tokenizer)

    def after_step(self, run: Run, step: int, record: Record) -> None:
        """Score the policy after this step."""
        record["rl/heldout_exact_match"] = float(heldout_correct(run.state.model, self.config, self.codec).mean())
