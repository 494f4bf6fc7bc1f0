"""`tootsie eval suite`: a named benchmark suite run through lm-eval's own task logic on local data files.

For every benchmark of the suite (`tootsie.eval.benchmarks`), the stock lm-eval
task YAML is loaded with its functions resolved (hellaswag's `process_docs`,
winogrande's partial scoring, the gsm8k regex filters, ...), and only its data
source changes: `dataset_path: json` (or `parquet`) with `data_files` pointing
at the local copies, splits it does not read switched off. The configs go to
lm-eval as inline task dicts, so neither lm-eval's task index nor the Hub is
touched. With `prompt_format="olmes"` a benchmark that has an OLMES-style
variant (`tootsie.eval.olmes_formats`) runs that instead; with "both" each such
benchmark runs in both formats in the same evaluation, side by side.

A suite that stands for a published table (`marin-base`, `benchmarks.SUITE_COLUMNS`)
sets each lm-eval-format task's `num_fewshot` to its column's documented count
and reports the column's metric; other suites keep each stock config's own
count (0 where it names none).

HumanEval's scoring executes model-written code: its metric is replaced by
`code_sandbox.pass_at_1` (a namespace without network, rlimits, a timeout, a
temp dir). Where that sandbox is unavailable, HumanEval is refused with the
reason and reported as a row with no value; the other tasks still run.

Generation tasks (GSM8K, MATH, BBH, HumanEval) decode through
`TootsieLM.generate_until`, i.e. greedily with the KV cache.
"""

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("DISABLE_MULTIPROC", "1")  # lm-eval's bootstrap would fork a process holding JAX's threads

import lm_eval.tasks  # noqa: E402
from lm_eval.api.metrics import aggregate_subtask_metrics, pooled_sample_stderr  # noqa: E402
from lm_eval.evaluator import evaluate  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402
from lm_eval.tasks._yaml_loader import load_yaml  # noqa: E402

from tootsie.errors import TootsieError  # noqa: E402
from tootsie.eval.benchmark_data import benchmark_files  # noqa: E402
from tootsie.eval.benchmarks import Benchmark, Column, Subtask, suite_benchmarks, suite_columns  # noqa: E402
from tootsie.eval.code_sandbox import build_predictions, pass_at_1, sandbox_unavailable  # noqa: E402
from tootsie.eval.lm_eval_adapter import TootsieLM  # noqa: E402
from tootsie.eval.olmes_formats import HEADLINE, VARIANTS  # noqa: E402

STOCK_TASKS = Path(lm_eval.tasks.__file__).parent
PROMPT_FORMATS = ("lm-eval", "olmes", "both")
SPLIT_KEYS = ("training_split", "validation_split", "test_split", "fewshot_split")
BOOTSTRAP_ITERS = 1000
"""Bootstrap draws for the stderr of non-mean metrics (lambada's perplexity); mean metrics use the closed form."""
PYTHON_RANDOM_SEED = 0
"""Python's global `random` seed before tasks load, lm_eval.evaluator.simple_evaluate's `random_seed` default:
GPQA's stock process_docs shuffles each question's choices with the global `random`."""


@dataclass(frozen=True)
class Run:
    """One lm-eval task config of one benchmark in one prompt format."""

    benchmark: Benchmark
    prompt_format: str
    config: dict[str, Any]
    column: Column | None = None
    """The table column this lm-eval-format run fills, whose metric it reports; None outside table suites."""

    @property
    def name(self) -> str:
        """The lm-eval task name."""
        return str(self.config["task"])

    @property
    def metric(self) -> str:
        """The headline `metric,filter` this run reports."""
        if self.prompt_format == "olmes" and self.benchmark.olmes:
            return HEADLINE[self.benchmark.olmes]
        return self.column.metric if self.column else self.benchmark.metric


def formats_of(benchmark: Benchmark, prompt_format: str) -> tuple[str, ...]:
    """The prompt formats a benchmark runs in: OLMES only where it has a variant ("olmes" falls back to lm-eval)."""
    if prompt_format not in PROMPT_FORMATS:
        raise TootsieError(f"prompt format must be one of {PROMPT_FORMATS}, got {prompt_format!r}")
    if benchmark.olmes is None:
        return ("lm-eval",)
    return {"lm-eval": ("lm-eval",), "olmes": ("olmes",), "both": ("lm-eval", "olmes")}[prompt_format]


def task_config(
    benchmark: Benchmark, subtask: Subtask, files: dict[str, Path], prompt_format: str, cache_dir: Path
) -> dict[str, Any]:
    """The stock lm-eval config of `subtask` in `prompt_format`, reading the local `files` ({split: path})."""
    code = benchmark.executes_code  # its stock utils fetch `code_eval` from the Hub on import: never resolve them
    config = load_yaml(STOCK_TASKS / subtask.stock_yaml, resolve_func=not code) | dict(benchmark.overrides)
    for key in ("tag", "group", "task_list", "dataset_name"):
        config.pop(key, None)
    if code:
        config |= {
            "metric_list": [{"metric": pass_at_1, "aggregation": "mean", "higher_is_better": True}],
            "filter_list": [
                {"name": "create_test", "filter": [{"function": "custom", "filter_fn": build_predictions}]}
            ],
        }
    if prompt_format == "olmes":
        config = VARIANTS[str(benchmark.olmes)](config) | {"task": f"{config['task']}_olmes"}
    suffixes = {path.suffix for path in files.values()}
    if len(suffixes) != 1:
        raise TootsieError(f"{benchmark.name}: mixed file formats {sorted(map(str, files.values()))}; use one format")
    for key in SPLIT_KEYS:
        if config.get(key) is not None and config[key] not in files:
            config[key] = None
    if config.get("test_split") is None and config.get("validation_split") is None:
        raise TootsieError(f"{benchmark.name}: the task config evaluates no split among {sorted(files)}")
    return config | {
        "dataset_path": "json" if suffixes == {".jsonl"} else "parquet",
        "dataset_kwargs": {"data_files": {s: str(p.resolve()) for s, p in files.items()}, "cache_dir": str(cache_dir)},
    }


def plan_runs(
    benchmarks: Sequence[Benchmark],
    data_dir: Path,
    prompt_format: str,
    cache_dir: Path,
    columns: Mapping[str, Column] | None = None,
) -> list[Run]:
    """Every lm-eval task config to evaluate; a missing or altered data file refuses before any model work.

    `columns` (`benchmarks.suite_columns`) sets each lm-eval-format config's `num_fewshot` to its column's count.
    """
    runs = []
    for benchmark in benchmarks:
        files = benchmark_files(data_dir, benchmark)
        for fmt in formats_of(benchmark, prompt_format):
            column = (columns or {}).get(benchmark.name) if fmt == "lm-eval" else None
            for subtask in benchmark.subtasks:
                config = task_config(benchmark, subtask, files[subtask.config], fmt, cache_dir)
                if column is not None:
                    config["num_fewshot"] = column.num_fewshot
                runs.append(Run(benchmark, fmt, config, column))
    return runs


def _row(benchmark: Benchmark, fmt: str, runs: list[Run], output: dict[str, Any]) -> dict[str, Any]:
    """One benchmark's headline in one format; several subtasks pool weighted by size, as lm-eval's groups do."""
    metric, _, filter_name = runs[0].metric.partition(",")
    values, stderrs, sizes = [], [], []
    for run in runs:
        result = output["results"][run.name]
        values.append(float(result[f"{metric},{filter_name}"]))
        stderr = result.get(f"{metric}_stderr,{filter_name}")
        stderrs.append(float(stderr) if isinstance(stderr, int | float) else float("nan"))
        sizes.append(int(output["n-samples"][run.name]["effective"]))
    value = values[0] if len(runs) == 1 else aggregate_subtask_metrics(values, sizes, weight_by_size=True)
    if len(runs) == 1:
        stderr = stderrs[0]
    else:  # pooled over subtasks; undefined when a subtask has one document or no stderr
        defined = min(sizes) > 1 and all(s == s for s in stderrs)
        stderr = pooled_sample_stderr(stderrs, sizes) if defined else float("nan")
    return {
        "task": benchmark.name,
        "metric": runs[0].metric.replace(",none", "").replace(",", "/"),
        "value": float(value),
        "stderr": None if stderr != stderr else float(stderr),
        "n": sum(sizes),
        "prompt_format": fmt,
    }


def load_tasks(configs: Sequence[dict[str, Any]], fewshot_seed: int) -> dict[str, Any]:
    """lm-eval tasks from inline configs, loaded as `simple_evaluate` would: Python's `random` seeded first (a
    task's process_docs may shuffle, e.g. GPQA's choices), 0 shots where a config names none, fixed few-shot seed."""
    random.seed(PYTHON_RANDOM_SEED)
    loaded = TaskManager(include_defaults=False).load(list(configs))
    for task in loaded["tasks"].values():
        if task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=fewshot_seed)
    return loaded


def run_suite(
    lm: TootsieLM,
    suite: str,
    data_dir: str | Path,
    work_dir: str | Path,
    prompt_format: str = "lm-eval",
    limit: int | None = None,
    seed: int = 1234,
    show_prompts: int = 0,
    tasks: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the suite on `lm`: `{"suite", "results": [{task, metric, value, stderr, n, prompt_format, num_fewshot}]}`.

    `limit` scores only each task's first documents; `show_prompts` returns that many rendered prompts per
    task and format under "prompts". HumanEval without a sandbox is a row with `value: None` and `refused`.
    `tasks` runs only those benchmarks of the suite, with the suite's few-shot counts and metrics.
    """
    benchmarks = suite_benchmarks(suite)
    if tasks:
        unknown = sorted(set(tasks) - {b.name for b in benchmarks})
        if unknown:
            raise TootsieError(f"tasks {unknown} are not in suite {suite!r}: {[b.name for b in benchmarks]}")
        benchmarks = tuple(b for b in benchmarks if b.name in tasks)
    refused = sandbox_unavailable()
    runnable = [b for b in benchmarks if not (b.executes_code and refused)]
    cache_dir = Path(work_dir) / "hf_datasets_cache"
    runs = plan_runs(runnable, Path(data_dir), prompt_format, cache_dir, suite_columns(suite))
    loaded = load_tasks([run.config for run in runs], seed)
    shots = {name: int(task.get_config("num_fewshot")) for name, task in loaded["tasks"].items()}
    output = evaluate(
        lm=lm,
        task_dict=loaded,
        limit=limit,
        bootstrap_iters=BOOTSTRAP_ITERS,
        log_samples=show_prompts > 0,
        confirm_run_unsafe_code=True,  # the only code-executing metric here is the sandboxed pass_at_1
    )
    rows = []
    for benchmark in benchmarks:
        if benchmark.executes_code and refused:
            rows.append(
                {"task": benchmark.name, "metric": benchmark.metric.split(",")[0], "value": None, "stderr": None}
                | {"n": 0, "prompt_format": "lm-eval", "refused": f"code execution is not sandboxed here: {refused}"}
            )
            continue
        for fmt in formats_of(benchmark, prompt_format):
            mine = [run for run in runs if run.benchmark is benchmark and run.prompt_format == fmt]
            rows.append(_row(benchmark, fmt, mine, output) | {"num_fewshot": shots[mine[0].name]})
    result: dict[str, Any] = {"suite": suite, "prompt_format": prompt_format, "limit": limit, "results": rows}
    if show_prompts:
        result["prompts"] = {
            f"{run.benchmark.name}/{run.prompt_format}/{run.name}": [
                str(sample["arguments"][0][0]) for sample in output["samples"][run.name][:show_prompts]
            ]
            for run in runs
        }
    return result
