"""Held-out exact match of a policy, before and after RL, with a paired bootstrap interval on the difference.

Each of the environment's first `evaluation.heldout_tasks` held-out tasks gets
one greedy completion (the run's token budget, EOS stops), or, with
`evaluation.temperature` > 0, `evaluation.samples` completions sampled at that
temperature with a fixed seed; a task's score is the share of its completions
the environment's checker accepts (a truncated completion is not checked, so
it is not right). Before and after score the same tasks with the same seed,
so the interval is a paired bootstrap: resample tasks with replacement, take
the mean of (after − before) per resample, report the percentile interval at
`confidence`. An interval that excludes 0 says RL moved exact match. Greedy
exact match is reported as well when the configured one samples, and for a
distillation run the teacher's exact match and the student's held-out reverse
KL to it before and after (`rl.distill_eval`).

Example: `evaluate_rl(config, "runs/rl")` gives `{"exact_match_before": 0.31,
"exact_match_after": 0.52, "difference": 0.21, ..., "interval": [0.16, 0.26]}`.
"""

from pathlib import Path

import numpy as np

from tootsie.errors import TootsieError
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.kv_cache import DecoderModel
from tootsie.monitor.metrics_log import METRICS_FILE, read_metrics
from tootsie.rl.codec import TokenizerCodec
from tootsie.rl.config import RLConfig
from tootsie.rl.distill_eval import distillation_summary
from tootsie.rl.environments import RewardConfig, score
from tootsie.rl.rollout import sampling_seed
from tootsie.train.callbacks import Callback, Every, Record, Run
from tootsie.train.checkpoint import latest_checkpoint, read_checkpoint_state
from tootsie.train.loading import checkpoint_root, load_model
from tootsie.train.rl_objectives import DistillObjective


def heldout_scores(
    model: DecoderModel, config: RLConfig, codec: TokenizerCodec, temperature: float, samples: int
) -> np.ndarray:
    """`[heldout_tasks]`: the share of each held-out task's completions (at `temperature`) that are right."""
    evaluation = config.rl.evaluation
    tasks = config.rl.environment.tasks("heldout", 0, evaluation.heldout_tasks)
    checker = config.rl.environment.checker()
    rows = [task for task in tasks for _ in range(samples)]
    chunk = config.rl.rollout.batch_rows
    generations = []
    for index, start in enumerate(range(0, len(rows), chunk)):
        sampling = SamplingConfig(
            max_new_tokens=config.rl.rollout.max_new_tokens,
            temperature=temperature,
            seed=sampling_seed(evaluation.seed, 0, index),
            stop_tokens=(codec.eos_id,),
        )
        generations += generate(model, [codec.encode(t.prompt) for t in rows[start : start + chunk]], sampling)
    right = [
        score(
            checker,
            task,
            codec.decode(list(g.tokens)),
            truncated=g.stop_reason == "max_new_tokens",
            rewards=RewardConfig(),
        ).reason
        == "right"
        for task, g in zip(rows, generations)
    ]
    return np.asarray(right, np.float64).reshape(len(tasks), samples).mean(axis=1)


def heldout_exact_match(model: DecoderModel, config: RLConfig, codec: TokenizerCodec) -> np.ndarray:
    """Per-task scores as `evaluation` configures them (greedy, or sampled)."""
    evaluation = config.rl.evaluation
    return heldout_scores(model, config, codec, evaluation.temperature, evaluation.samples)


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
    newest = latest_checkpoint(checkpoint_root(output))
    if newest is None:
        raise TootsieError(f"{output} has no checkpoint yet; train it with `tootsie rl --config FILE --out {output}`")
    models = {
        "before": load_model(config.train.model, config.train.warm_start.checkpoint),
        "after": load_model(config.train.model, output),
    }
    evaluation = config.rl.evaluation
    scores = {name: heldout_exact_match(model, config, codec) for name, model in models.items()}
    greedy = (
        {
            f"greedy_exact_match_{name}": float(heldout_scores(m, config, codec, 0.0, 1).mean())
            for name, m in models.items()
        }
        if evaluation.temperature > 0
        else {}
    )
    objective = config.train.objective
    distilled = (
        distillation_summary(
            config,
            models["before"],
            models["after"],
            codec,
            float(heldout_exact_match(objective.teacher_model, config, codec).mean()),
        )
        if isinstance(objective, DistillObjective)
        else {}
    )
    low, high = paired_bootstrap(scores["before"], scores["after"], evaluation.bootstrap_samples, evaluation.confidence)
    return {
        "step": int(read_checkpoint_state(newest)["step"]),
        "heldout_tasks": int(scores["before"].size),
        "temperature": evaluation.temperature,
        "samples_per_task": evaluation.samples,
        "exact_match_before": float(scores["before"].mean()),
        "exact_match_after": float(scores["after"].mean()),
        "difference": float(scores["after"].mean() - scores["before"].mean()),
        **greedy,
        **distilled,
        "confidence": evaluation.confidence,
        **kl_summary(config, output),
        "interval": [low, high],
    }


class HeldoutExactMatch(Callback):
    """Log `rl/heldout_exact_match` (as `evaluation` scores it) every N iterations and after the last."""

    order = 22

    def __init__(self, config: RLConfig, codec: TokenizerCodec) -> None:
        steps = config.rl.evaluation.every_iterations * config.rl.updates_per_iteration
        self.config, self.every = config, Every(steps=steps, last=True)
        self.codec = codec

    def after_step(self, run: Run, step: int, record: Record) -> None:
        """Score the policy after this step."""
        record["rl/heldout_exact_match"] = float(heldout_exact_match(run.state.model, self.config, self.codec).mean())
