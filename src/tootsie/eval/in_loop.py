"""In-loop evaluation: held-out bits-per-byte (raw and EMA weights) and lm-eval tasks while training.

The trainer knows no evaluation; it calls step hooks. `evaluation_hook` turns
`TrainConfig.eval` into one hook, which the training entry point
(`tootsie.eval.training.run_training`) hands to the loop, so every
`eval.every_steps` steps (and after the last) the step's metrics record gains
`eval/bpb/<domain>`, `eval/bpb/macro_avg`, `eval/bpb/micro_avg` and the same
keys with an `_ema` suffix — the pairs `tootsie monitor spikes` reads as the
EMA gap — and, for `eval.lm_eval_tasks`, `eval/lm/<task>/<metric>` (raw
weights only: a task costs far more than a held-out batch) with the time it
took as `eval/lm/seconds`. The lm-eval task files are written once under
`<run>/lm_eval_tasks/`.
"""

import time
from pathlib import Path

import equinox as eqx

from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.tokenizer import load_tokenizer
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.train.config import TrainConfig
from tootsie.train.trainer import StepHook, TrainState

LM_EVAL_TASKS_DIR = "lm_eval_tasks"


def _due(config: TrainConfig, step: int) -> bool:
    """Whether the in-loop evaluation runs after `step` steps: every `every_steps`, and after the last."""
    return step % config.eval.every_steps == 0 or step == config.num_steps


def bpb_hook(config: TrainConfig) -> StepHook:
    """A step hook that scores `config.eval.heldout` every `config.eval.every_steps` steps and at the end."""
    evaluation = config.eval
    token_bytes = TokenBytes(load_tokenizer(evaluation.tokenizer))

    def hook(state: TrainState) -> dict[str, float]:
        if not _due(config, state.step):
            return {}
        weights = {"": state.model}
        if state.ema is not None:
            weights["_ema"] = eqx.combine(state.ema, eqx.filter(state.model, eqx.is_array, inverse=True))
        values = {}
        for suffix, model in weights.items():
            results = {
                name: domain_bpb(model, cache, token_bytes, config.data.seq_len, max_sequences=evaluation.max_sequences)
                for name, cache in sorted(evaluation.heldout.items())
            }
            values |= {f"eval/bpb/{name}{suffix}": value for name, value in summarize(results).items()}
        return values

    return hook


def lm_eval_hook(config: TrainConfig, output_path: str) -> StepHook:
    """A step hook that runs `config.eval.lm_eval_tasks` on the raw weights on the bpb schedule.

    Requests are `config.data.seq_len` tokens long.
    """
    from tootsie.eval.lm_eval_step import (
        load_lm_eval,
    )  # lm-eval is an optional extra, imported only when tasks are asked for

    evaluation = config.eval
    TaskSuite, TootsieLM = load_lm_eval()
    suite = TaskSuite(
        evaluation.lm_eval_tasks, Path(output_path) / LM_EVAL_TASKS_DIR, include_paths=evaluation.lm_eval_include_paths
    )
    tokenizer = load_tokenizer(evaluation.tokenizer)

    def hook(state: TrainState) -> dict[str, float]:
        if not _due(config, state.step):
            return {}
        started = time.perf_counter()
        metrics = suite.evaluate(
            TootsieLM(state.model, tokenizer, max_length=config.data.seq_len),
            limit=evaluation.lm_eval_limit,
            stderr=False,
        )
        logged = {
            f"eval/lm/{task}/{name}": value
            for task, values in metrics.items()
            for name, value in values.items()
            if name != "samples"
        }
        return logged | {"eval/lm/seconds": time.perf_counter() - started}

    return hook


def evaluation_hook(config: TrainConfig, output_path: str) -> StepHook:
    """The step hook that runs everything `config.eval` asks for (held-out BPB, lm-eval tasks).

    `config.eval` must be set.
    """
    hooks = ([bpb_hook(config)] if config.eval.heldout else []) + (
        [lm_eval_hook(config, output_path)] if config.eval.lm_eval_tasks else []
    )

    def hook(state: TrainState) -> dict[str, float]:
        return {name: value for part in hooks for name, value in part(state).items()}

    return hook
