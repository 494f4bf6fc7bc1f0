"""The lm-eval step: a checkpoint scored on lm-eval tasks from local files, as an executor step.

Its output is `lm_eval.json` (`{task: {metric: value}}` plus the checkpoint,
named relative to the prefix when it is a step's output (`portable`), and its
step), so the executor skips it when done and a changed task list, limit or
checkpoint gives a new output path; the same checkpoint and tasks under
another prefix give the same bytes. The wall time goes to `timings.json`,
declared volatile; the built-in task files (whose YAML names their data by
absolute path) are written to a temporary directory, not the output. lm-eval
is imported when the step runs, not when an experiment builds it, so a dry run
needs no lm-eval install; the step declares the `lmeval` extra, so a run
without it fails in one line before anything runs.
"""

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tootsie.configfile import unhashed
from tootsie.executor.manifest import TIMINGS_FILE
from tootsie.executor.portable import portable
from tootsie.executor.step import requires_extras, volatile_outputs
from tootsie.extras import require
from tootsie.jsonfile import write_json_atomic

LM_EVAL_FILE = "lm_eval.json"
WEIGHTS = ("model", "ema")


@dataclass(frozen=True)
class LMEvalConfig:
    """Which checkpoint to run on which lm-eval tasks, and how."""

    checkpoint: str
    """A checkpoint, or a training output directory (its newest checkpoint)."""
    tokenizer: str
    """The tokenizer.json the model was trained with."""
    tasks: tuple[str, ...]
    """Task names: tootsie's built-in local tasks, or tasks under `include_paths`."""
    include_paths: tuple[str, ...] = ()
    """Directories of lm-eval task YAMLs whose data_files are local."""
    limit: int | None = None
    """Documents per task (the first ones); None for all."""
    num_fewshot: int | None = None
    """Few-shot examples per prompt; None for each task's default (zero)."""
    max_length: int = 128
    """Longest model input in tokens (the training sequence length); longer contexts are left-truncated."""
    weights: str = "model"
    """"model" for the raw weights, "ema" for the EMA the checkpoint saved."""
    batch_size: int = unhashed(8)
    """Rows per forward pass (speed only)."""

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("tasks is empty; name at least one lm-eval task")
        if self.limit is not None and self.limit <= 0:
            raise ValueError(f"limit must be positive or None, got {self.limit}")
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {WEIGHTS}, got {self.weights!r}")
        if self.max_length < 2 or self.batch_size <= 0:
            raise ValueError(f"need max_length >= 2 and batch_size > 0, got {self.max_length=}, {self.batch_size=}")


def load_lm_eval() -> tuple[type, type]:
    """`TaskSuite` and `TootsieLM`, importing lm-eval (an optional extra) after checking that it is installed."""
    require(("lmeval",), purpose="lm-eval tasks")
    from tootsie.eval.lm_eval_adapter import TaskSuite, TootsieLM

    return TaskSuite, TootsieLM


def run_lm_eval(config: LMEvalConfig, work_dir: str | Path) -> dict[str, object]:
    """Score the checkpoint on the tasks (built-in task files go under `work_dir`); return the result record.

    The record names the checkpoint `portable` (as resolved, outside a step) and holds the wall time in `seconds`."""
    from tootsie.train.checkpoint import read_checkpoint_state  # JAX: the CLI reads LMEvalConfig without it
    from tootsie.train.loading import resolve_checkpoint

    TaskSuite, TootsieLM = load_lm_eval()
    started = time.perf_counter()
    checkpoint = resolve_checkpoint(config.checkpoint)
    suite = TaskSuite(config.tasks, work_dir, include_paths=config.include_paths)
    lm = TootsieLM.from_checkpoint(
        str(checkpoint),
        config.tokenizer,
        weights=config.weights,
        max_length=config.max_length,
        batch_size=config.batch_size,
    )
    metrics = suite.evaluate(lm, limit=config.limit, num_fewshot=config.num_fewshot)
    step = read_checkpoint_state(checkpoint)["step"]
    return {
        "checkpoint": portable(str(checkpoint)),
        "step": step,
        "weights": config.weights,
        "tasks": metrics,
        "seconds": round(time.perf_counter() - started, 1),
    }


@requires_extras("lmeval")
@volatile_outputs(TIMINGS_FILE)
def evaluate_lm_tasks(config: LMEvalConfig, output_path: str) -> dict[str, object]:
    """Step: write `lm_eval.json` with every task's metrics and `timings.json`; return both in one record."""
    with tempfile.TemporaryDirectory(prefix="tootsie-lm-eval-") as work_dir:
        result = run_lm_eval(config, work_dir)
    write_json_atomic(Path(output_path) / TIMINGS_FILE, {"seconds": result["seconds"]})
    write_json_atomic(Path(output_path) / LM_EVAL_FILE, {k: v for k, v in result.items() if k != "seconds"})
    return result
