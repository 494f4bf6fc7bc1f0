"""`tootsie eval crosscheck`: tootsie's lm-eval adapter beside lm-eval's own `hf` model, item by item.

A suite number is only worth printing if it is the number lm-eval would give
the same model. This runs the suite's task configs (`eval.suite.plan_runs`:
stock lm-eval YAMLs on local files) twice, with `log_samples=True`: once on
`TootsieLM` over the checkpoint, once on lm-eval's `HFLM` over the checkpoint's
Hugging Face export (CPU, float32, tokenizer from the export, offline), and
compares each document's responses:

- multiple choice: the chosen answer (the argmax of the headline metric's
  scores: log-likelihood for `acc`, log-likelihood per character of the choice
  for `acc_norm`) and every choice's log-likelihood within `tolerance` nats;
- a single log-likelihood (lambada): the value within `tolerance` and the
  same "is the greedy continuation" flag;
- generation: the same text up to the stop (the raw response, before filters).

An item whose top two choices are within what `tolerance` can move (on either
path) is a tie: the paths may pick either and both are right. Ties are
counted apart and left out of the agreement rate. HumanEval's generations are
compared and never executed: its metric is replaced by exact match and no
metric is reported for it.

The export is the caller's job (the CLI's; eval sits below release), so
`run_crosscheck` takes the export directory. Example record:
`{"tasks": [{"task": "arc_easy", "items": 50, "agree": 50, "ties": 0, "agreement": 1.0,
"max_abs_loglik_diff": 3.1e-05, "metric_tootsie": 0.32, "metric_hf": 0.32, "disagreements": [],
"seconds_tootsie": 4.1, "seconds_hf": 2.0}], "tolerance": 0.001, ...}`.
"""

import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tootsie.errors import TootsieError
from tootsie.eval.benchmarks import Benchmark, suite_benchmarks, suite_columns

TOLERANCE = 1e-3
"""Nats per log-likelihood. JAX and torch float32 logits differ by ~1e-5 (tests/release: < 1e-4 per logit); a
summed continuation of tens of tokens, taken through two log-softmaxes, stays well below 1e-3."""
FEWSHOT_SEED = 1234
"""lm-eval's default few-shot seed, as `eval.suite.run_suite` uses."""


@dataclass(frozen=True)
class CrosscheckConfig:
    """A suite run on tootsie's adapter and on lm-eval's `hf` model over the checkpoint's export, compared."""

    checkpoint: str
    """A checkpoint, or a training output directory (its newest checkpoint)."""
    suite: str
    """A suite (core, reasoning, marin-base) or benchmark names joined by commas (tootsie.eval.benchmarks)."""
    data_dir: str
    """Local copies of the benchmark data, laid out as `tootsie eval mirror` writes them."""
    tasks: tuple[str, ...] = ()
    """Only these benchmarks of the suite; empty for all of them."""
    limit: int | None = None
    """The first N documents of each task; None for all."""
    tokenizer: str | None = None
    """The tokenizer.json the run trained with; None for the one that made the run's token caches."""
    max_length: int = 2048
    """Both models' longest input in tokens. HFLM needs it above every generation budget (BBH asks 1024)."""
    max_gen_toks: int | None = None
    """Cap on every generation task's budget, on both paths; None keeps each task's own."""
    batch_size: int = 8
    """TootsieLM's rows per forward pass (speed only)."""
    hf_batch_size: int = 1
    """HFLM's batch size (its default; larger batches left-pad generation prompts)."""
    tolerance: float = TOLERANCE
    """Largest log-likelihood difference in nats that still agrees; also what makes a tie."""
    ema: bool = False
    """Compare the checkpoint's EMA weights (exported and loaded) instead of the raw ones."""

    def __post_init__(self) -> None:
        names = {b.name for b in suite_benchmarks(self.suite)}
        unknown = [t for t in self.tasks if t not in names]
        if unknown:
            raise ValueError(f"tasks {unknown} are not in suite {self.suite!r} ({sorted(names)}); pick from those")
        if not self.tolerance > 0:
            raise ValueError(f"tolerance must be positive, got {self.tolerance}")
        if self.limit is not None and self.limit <= 0:
            raise ValueError(f"limit must be positive or None, got {self.limit}")
        if self.max_gen_toks is not None and not 0 < self.max_gen_toks < self.max_length:
            raise ValueError(f"max_gen_toks must be in (0, max_length={self.max_length}), got {self.max_gen_toks}")

    @property
    def weights(self) -> str:
        """Which of the checkpoint's weight trees to load: "ema" or "model"."""
        return "ema" if self.ema else "model"

    @property
    def benchmarks(self) -> tuple[Benchmark, ...]:
        """The benchmarks compared: the suite's, or the chosen `tasks` of it."""
        chosen = suite_benchmarks(self.suite)
        return tuple(b for b in chosen if not self.tasks or b.name in self.tasks)


def _gap_weights(metric: str, choices: Sequence[str]) -> np.ndarray:
    """Per-choice factor from log-likelihood to score: 1 for `acc`, 1/characters for `acc_norm` (lm-eval's)."""
    if metric.startswith("acc_norm"):
        return 1.0 / np.array([float(len(choice)) for choice in choices])
    return np.ones(len(choices))


def _is_tie(scores: np.ndarray, weights: np.ndarray, tolerance: float) -> bool:
    """Whether the top two scores are closer than moving each log-likelihood by `tolerance` could make up."""
    if len(scores) < 2:
        return False
    first, second = np.argsort(-scores)[:2]
    return bool(scores[first] - scores[second] <= tolerance * (weights[first] + weights[second]))


def compare_item(
    output_type: str,
    ours: dict[str, Any],
    theirs: dict[str, Any],
    tolerance: float,
    weights: np.ndarray | None = None,
) -> dict[str, Any]:
    """One document's logged samples on both paths: `{"status": agree|tie|disagree, "reasons", "max_abs_diff"}`.

    `weights` are `_gap_weights` of a multiple-choice item (the headline metric's scoring).
    """
    reasons = []
    if ours["arguments"] != theirs["arguments"]:
        reasons.append("the requests differ (prompt or few-shot examples)")
    if output_type == "generate_until":
        mine, other = str(ours["resps"][0][0]), str(theirs["resps"][0][0])
        if mine != other:
            reasons.append(f"generations differ: tootsie {mine[:80]!r} vs hf {other[:80]!r}")
        return {"status": "disagree" if reasons else "agree", "reasons": reasons, "max_abs_diff": None}
    lls = np.array([float(r[0]) for r in ours["filtered_resps"]])
    other_lls = np.array([float(r[0]) for r in theirs["filtered_resps"]])
    diff = float(np.max(np.abs(lls - other_lls)))
    if diff > tolerance:
        reasons.append(f"log-likelihoods differ by {diff:.3g} nats (> {tolerance:g})")
    tie = False
    if output_type == "multiple_choice":
        scale = np.ones(len(lls)) if weights is None else weights
        chosen, other_chosen = int(np.argmax(lls * scale)), int(np.argmax(other_lls * scale))
        tie = _is_tie(lls * scale, scale, tolerance) or _is_tie(other_lls * scale, scale, tolerance)
        if chosen != other_chosen and not tie:
            reasons.append(f"chosen answer differs: tootsie {chosen} vs hf {other_chosen}")
    elif [bool(r[1]) for r in ours["filtered_resps"]] != [bool(r[1]) for r in theirs["filtered_resps"]]:
        reasons.append("the is-greedy flag differs")
    status = "disagree" if reasons else "tie" if tie else "agree"
    return {"status": status, "reasons": reasons, "max_abs_diff": diff}


def first_per_doc(samples: Sequence[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Logged samples by document id; a task with several filters logs each document once per filter."""
    by_doc: dict[int, dict[str, Any]] = {}
    for sample in samples:
        by_doc.setdefault(int(sample["doc_id"]), sample)
    return by_doc


def compare_task(
    items: Sequence[tuple[str, str, dict[str, Any], dict[str, Any], np.ndarray | None]], tolerance: float
) -> dict[str, Any]:
    """Count one benchmark's items `(item id, output type, ours, theirs, weights)`: agree, ties, disagreements.

    `generated_chars` sums tootsie's generations, so a comparison of empty texts shows as one.
    """
    agree, ties, worst, disagreements, generated = 0, 0, None, [], 0
    for item_id, output_type, ours, theirs, weights in items:
        verdict = compare_item(output_type, ours, theirs, tolerance, weights)
        if output_type == "generate_until":
            generated += len(str(ours["resps"][0][0]))
        if verdict["max_abs_diff"] is not None:
            worst = max(worst or 0.0, verdict["max_abs_diff"])
        if verdict["status"] == "agree":
            agree += 1
        elif verdict["status"] == "tie":
            ties += 1
        else:
            disagreements.append({"item": item_id, "reasons": verdict["reasons"]})
    decided = len(items) - ties
    return {
        "items": len(items),
        "agree": agree,
        "ties": ties,
        "agreement": agree / decided if decided else None,
        "max_abs_loglik_diff": worst,
        "disagreements": disagreements,
        "generated_chars": generated,
    }


def _crosscheck_config(config: dict[str, Any], executes_code: bool, max_gen_toks: int | None) -> dict[str, Any]:
    """A planned task config as crosscheck runs it: code never executed, generation budgets capped if asked."""
    if executes_code:
        config = {key: value for key, value in config.items() if key != "filter_list"}
        config |= {"unsafe_code": False, "metric_list": [{"metric": "exact_match", "aggregation": "mean"}]}
    kwargs = config.get("generation_kwargs")
    # 256: the budget lm-eval's models give a task that names none (HFLM.max_gen_toks)
    if max_gen_toks is not None and kwargs is not None:
        config = config | {
            "generation_kwargs": kwargs | {"max_gen_toks": min(kwargs.get("max_gen_toks", 256), max_gen_toks)}
        }
    return config


def _evaluate(
    lm: Any, configs: list[dict[str, Any]], limit: int | None
) -> tuple[dict[str, Any], dict[str, Any], float]:
    """`(lm-eval's output, the loaded tasks, wall seconds)` of one path, samples logged."""
    from lm_eval.evaluator import evaluate

    from tootsie.eval.suite import load_tasks

    loaded = load_tasks(configs, FEWSHOT_SEED)
    started = time.perf_counter()
    output = evaluate(lm=lm, task_dict=loaded, limit=limit, bootstrap_iters=0, log_samples=True)
    return output, loaded["tasks"], time.perf_counter() - started


def load_hflm(export_dir: Path, max_length: int, batch_size: int) -> Any:
    """lm-eval's `HFLM` over a local export: CPU, float32, the export's tokenizer, never the Hub."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from lm_eval.models.huggingface import HFLM

    if not (export_dir / "config.json").is_file():
        raise TootsieError(f"{export_dir} is not a Hugging Face export (no config.json); run `tootsie export hf`")
    return HFLM(pretrained=str(export_dir), device="cpu", dtype="float32", batch_size=batch_size, max_length=max_length)


def _headline(runs: Sequence[Any], output: dict[str, Any]) -> float | None:
    """The benchmark's headline metric on one path; several subtasks (BBH) pooled by size, as the suite does."""
    from lm_eval.api.metrics import aggregate_subtask_metrics

    if runs[0].benchmark.executes_code:
        return None
    values = [float(output["results"][run.name][run.metric]) for run in runs]
    sizes = [int(output["n-samples"][run.name]["effective"]) for run in runs]
    return float(aggregate_subtask_metrics(values, sizes, weight_by_size=True))


def _items(
    runs: Sequence[Any], tasks: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]
) -> list[tuple[str, str, dict[str, Any], dict[str, Any], np.ndarray | None]]:
    """Every document of a benchmark's runs as `(item id, output type, our sample, their sample, choice weights)`."""
    items = []
    for run in runs:
        task = tasks[run.name]
        mine, other = first_per_doc(ours["samples"][run.name]), first_per_doc(theirs["samples"][run.name])
        if set(mine) != set(other):
            raise TootsieError(
                f"{run.name}: the two paths scored different documents ({sorted(set(mine) ^ set(other))[:5]});"
                " rerun with the same --limit and data"
            )
        for doc_id, sample in sorted(mine.items()):
            weights = None
            if task.OUTPUT_TYPE == "multiple_choice":
                weights = _gap_weights(run.metric, [str(c) for c in task.doc_to_choice(sample["doc"])])
            items.append((f"{run.name}:{doc_id}", task.OUTPUT_TYPE, sample, other[doc_id], weights))
    return items


def run_crosscheck(config: CrosscheckConfig, export_dir: str | Path, tokenizer: str | Path) -> dict[str, Any]:
    """Both paths on every benchmark of `config`, compared item by item: `{"tasks": [row, ...], ...}`.

    `export_dir` is `tootsie export hf` of `config.checkpoint` (same weights); `tokenizer` is the tokenizer.json
    the run trained with, which tootsie's path reads (HFLM reads the export's own).
    """
    from tootsie.extras import require

    require(("lmeval", "hf"), purpose="eval crosscheck")
    if not Path(config.data_dir).is_dir():
        raise TootsieError(
            f"data_dir {config.data_dir} is not a directory; run `tootsie eval mirror {config.suite} --out DIR` first"
        )
    from tootsie.eval.lm_eval_adapter import TootsieLM
    from tootsie.eval.suite import plan_runs

    rows = []
    with tempfile.TemporaryDirectory(prefix="tootsie-crosscheck-") as work_dir:
        cache_dir = Path(work_dir) / "hf_datasets_cache"
        runs = plan_runs(config.benchmarks, Path(config.data_dir), "lm-eval", cache_dir, suite_columns(config.suite))
        started = time.perf_counter()
        ours_lm = TootsieLM.from_checkpoint(
            config.checkpoint,
            str(tokenizer),
            weights=config.weights,
            max_length=config.max_length,
            batch_size=config.batch_size,
        )
        load_tootsie = time.perf_counter() - started
        started = time.perf_counter()
        hf_lm = load_hflm(Path(export_dir), config.max_length, config.hf_batch_size)
        load_hf = time.perf_counter() - started
        for benchmark in config.benchmarks:
            mine = [run for run in runs if run.benchmark is benchmark]
            configs = [_crosscheck_config(run.config, benchmark.executes_code, config.max_gen_toks) for run in mine]
            ours, tasks, seconds_tootsie = _evaluate(ours_lm, configs, config.limit)
            theirs, _, seconds_hf = _evaluate(hf_lm, configs, config.limit)
            counts = compare_task(_items(mine, tasks, ours, theirs), config.tolerance)
            rows.append(
                {"task": benchmark.name, **counts}
                | {
                    "metric": None
                    if benchmark.executes_code
                    else mine[0].metric.replace(",none", "").replace(",", "/"),
                    "metric_tootsie": _headline(mine, ours),
                    "metric_hf": _headline(mine, theirs),
                    "num_fewshot": int(tasks[mine[0].name].get_config("num_fewshot")),
                    "seconds_tootsie": round(seconds_tootsie, 2),
                    "seconds_hf": round(seconds_hf, 2),
                }
                | ({"note": "generations compared, never executed"} if benchmark.executes_code else {})
            )
    items, ties = sum(row["items"] for row in rows), sum(row["ties"] for row in rows)
    agree = sum(row["agree"] for row in rows)
    return {
        "checkpoint": config.checkpoint,
        "weights": config.weights,
        "export": str(export_dir),
        "suite": config.suite,
        "limit": config.limit,
        "max_length": config.max_length,
        "max_gen_toks": config.max_gen_toks,
        "tolerance": config.tolerance,
        "items": items,
        "agree": agree,
        "ties": ties,
        "agreement": agree / (items - ties) if items > ties else None,
        "seconds_load_tootsie": round(load_tootsie, 2),
        "seconds_load_hf": round(load_hf, 2),
        "seconds_tootsie": round(sum(row["seconds_tootsie"] for row in rows), 2),
        "seconds_hf": round(sum(row["seconds_hf"] for row in rows), 2),
        "tasks": rows,
    }
