"""In-loop evaluation: held-out bits-per-byte (raw and EMA weights) and lm-eval tasks while training.

The trainer knows no evaluation; it runs callbacks. `evaluation_callbacks`
turns `TrainConfig.eval` into `Evaluation` callbacks (`train.callbacks`), which
the training entry point (`tootsie.eval.training.run_training`) hands to the
loop, so every `eval.every_steps` steps (and after the last) the step's metrics record gains
`eval/bpb/<domain>`, `eval/bpb/macro_avg`, `eval/bpb/micro_avg` and the same
keys with an `_ema` suffix — the pairs `tootsie monitor spikes` reads as the
EMA gap — and, for `eval.lm_eval_tasks`, `eval/lm/<task>/<metric>` (raw
weights only: a task costs far more than a held-out batch) with the time it
took as `eval/lm/seconds`. The lm-eval task files are written once under
`<run>/lm_eval_tasks/`. For `eval.paloma` it gains, per Paloma source,
`eval/paloma/<source>/bpb` (the macro average over its subdomains, Paloma's
per-source figure), `.../bpb_micro` and `.../ppl_token`, with the same `_ema`
suffix; the mirror is read and cut into Paloma's windows once, when the run starts.
"""

import time
from pathlib import Path
from typing import Any

import equinox as eqx

from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.tokenizer import load_tokenizer
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.eval.paloma import evaluate_source, prepare_mirror
from tootsie.models.llama import LlamaModel
from tootsie.train.callbacks import Evaluation, Every, Record, Run
from tootsie.train.config import TrainConfig
from tootsie.train.state import TrainState

LM_EVAL_TASKS_DIR = "lm_eval_tasks"


def _every(config: TrainConfig) -> Every:
    """The in-loop evaluation's schedule: every `eval.every_steps` steps, and after the last."""
    return Every(steps=config.eval.every_steps, last=True)


def _weights(state: TrainState) -> dict[str, LlamaModel]:
    """Metric-key suffix → model: the raw weights (""), and the EMA weights ("_ema") when the run keeps them."""
    weights = {"": state.model}
    if state.ema is not None:
        weights["_ema"] = eqx.combine(state.ema, eqx.filter(state.model, eqx.is_array, inverse=True))
    return weights


class HeldOutBPB(Evaluation):
    """Score `config.eval.heldout` (raw weights, and EMA when the run keeps one) every `eval.every_steps` steps."""

    def __init__(self, config: TrainConfig) -> None:
        self.config, self.every = config, _every(config)
        self.token_bytes = TokenBytes(load_tokenizer(config.eval.tokenizer))

    def after_step(self, run: Run, step: int, record: Record) -> None:
        record.update(self.scores(run.state))

    def scores(self, state: TrainState) -> dict[str, float]:
        """`eval/bpb/*` of `state`'s model, and with an `_ema` suffix of its EMA weights when it has them."""
        evaluation = self.config.eval
        values = {}
        for suffix, model in _weights(state).items():
            results = {
                name: domain_bpb(
                    model, cache, self.token_bytes, self.config.data.seq_len, max_sequences=evaluation.max_sequences
                )
                for name, cache in sorted(evaluation.heldout.items())
            }
            values |= {f"eval/bpb/{name}{suffix}": value for name, value in summarize(results).items()}
        return values


class PalomaBPB(Evaluation):
    """Score `config.eval.paloma`'s sources (raw and EMA weights) as Paloma defines its figures."""

    def __init__(self, config: TrainConfig) -> None:
        paloma = config.eval.paloma
        self.config, self.every = config, _every(config)
        self.sources = prepare_mirror(
            paloma.mirror,
            config.eval.tokenizer,
            config.data.seq_len,
            paloma.split,
            paloma.subsets,
            paloma.max_documents,
            paloma.prefix_token,
        )

    def after_step(self, run: Run, step: int, record: Record) -> None:
        record.update(self.scores(run.state))

    def scores(self, state: TrainState) -> dict[str, float]:
        """`eval/paloma/<source>/{bpb,bpb_micro,ppl_token}` of `state`'s model (and `_ema` of its EMA weights)."""
        values = {}
        for suffix, model in _weights(state).items():
            for name, source in self.sources.items():
                result = evaluate_source(model, source)
                values[f"eval/paloma/{name}/bpb{suffix}"] = result["macro_bpb"]
                values[f"eval/paloma/{name}/bpb_micro{suffix}"] = result["micro_bpb"]
                values[f"eval/paloma/{name}/ppl_token{suffix}"] = result["macro_ppl_token"]
        return values


class LMEvalTasks(Evaluation):
    """Run `config.eval.lm_eval_tasks` on the raw weights on the held-out schedule; requests are `seq_len` long."""

    def __init__(self, config: TrainConfig, output_path: str) -> None:
        # lm-eval is an optional extra, imported only when tasks are asked for
        from tootsie.eval.lm_eval_step import load_lm_eval

        evaluation = config.eval
        task_suite, self.lm_class = load_lm_eval()
        self.config, self.every = config, _every(config)
        self.suite: Any = task_suite(
            evaluation.lm_eval_tasks,
            Path(output_path) / LM_EVAL_TASKS_DIR,
            include_paths=evaluation.lm_eval_include_paths,
        )
        self.tokenizer = load_tokenizer(evaluation.tokenizer)

    def after_step(self, run: Run, step: int, record: Record) -> None:
        started = time.perf_counter()
        metrics = self.suite.evaluate(
            self.lm_class(run.state.model, self.tokenizer, max_length=self.config.data.seq_len),
            limit=self.config.eval.lm_eval_limit,
            stderr=False,
        )
        record.update(
            {
                f"eval/lm/{task}/{name}": value
                for task, values in metrics.items()
                for name, value in values.items()
                if name != "samples"
            }
        )
        record["eval/lm/seconds"] = time.perf_counter() - started


def evaluation_callbacks(config: TrainConfig, output_path: str) -> list[Evaluation]:
    """The callbacks that run everything `config.eval` asks for (held-out BPB, Paloma, lm-eval tasks)."""
    if config.eval is None:
        return []
    return (
        ([HeldOutBPB(config)] if config.eval.heldout else [])
        + ([PalomaBPB(config)] if config.eval.paloma is not None else [])
        + ([LMEvalTasks(config, output_path)] if config.eval.lm_eval_tasks else [])
    )
