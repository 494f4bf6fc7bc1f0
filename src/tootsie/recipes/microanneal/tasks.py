"""Benchmark tasks of one microanneal branch: `tootsie eval suite` on the anneal's final checkpoint.

Optional (a spec with `task_suite` set): the branch step runs the named suite
(or a comma-separated list of benchmarks, e.g. "arc_easy,piqa") from local
files through lm-eval (`tootsie.eval.suite.run_suite`, needs
`tootsie[lmeval]`) and writes `tasks.json`: the suite's rows, and `values`,
`{"<task>/<prompt_format>/<metric>": value}` for every row that has one,
which the ranking averages over seeds and compares with the control.
"""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tootsie.corpora.stdlib_source import PythonIdentity, python_identity
from tootsie.errors import TootsieError
from tootsie.executor.step import requires_extras
from tootsie.extras import require
from tootsie.jsonfile import write_json_atomic
from tootsie.train.loading import resolve_checkpoint

TASKS_FILE = "tasks.json"


@dataclass(frozen=True)
class BranchTasksConfig:
    """Which checkpoint to score on which benchmarks, from which local data."""

    checkpoint: str
    """The anneal's output directory (its newest checkpoint) or a checkpoint."""
    tokenizer: str
    """The tokenizer.json the model was trained with."""
    suite: str
    """A suite name (core, reasoning, marin-base) or comma-separated benchmark names."""
    data_dir: str
    """Local copies of the benchmarks' files (`tootsie eval mirror` writes them)."""
    limit: int | None = 50
    """Documents per task (the first ones); None for all."""
    max_length: int = 128
    """Longest model input in tokens."""
    python: PythonIdentity = field(default_factory=python_identity)
    """The interpreter HumanEval's programs run in (`eval.code_sandbox`): whether they pass depends on it."""


def task_values(rows: list[dict[str, Any]]) -> dict[str, float]:
    """`{"<task>/<prompt_format>/<metric>": value}` for every suite row with a value (refused rows have none)."""
    return {
        f"{row['task']}/{row['prompt_format']}/{row['metric']}": float(row["value"])
        for row in rows
        if row.get("value") is not None
    }


@requires_extras("lmeval")
def branch_tasks(config: BranchTasksConfig, output_path: str) -> dict[str, Any]:
    """Run the suite on the branch's final checkpoint; write and return `tasks.json`."""
    require(("lmeval",), purpose="microanneal benchmark tasks")
    from tootsie.eval.lm_eval_adapter import TootsieLM
    from tootsie.eval.suite import run_suite

    if not Path(config.data_dir).is_dir():
        raise TootsieError(
            f"task data dir {config.data_dir} is not a directory; run `tootsie eval mirror {config.suite} --out DIR`"
        )
    lm = TootsieLM.from_checkpoint(
        str(resolve_checkpoint(config.checkpoint)), config.tokenizer, max_length=config.max_length
    )
    with tempfile.TemporaryDirectory(prefix="tootsie-microanneal-tasks-") as work_dir:
        result = run_suite(lm, config.suite, config.data_dir, work_dir, limit=config.limit)
    record = {"suite": config.suite, "rows": result["results"], "values": task_values(result["results"])}
    write_json_atomic(Path(output_path) / TASKS_FILE, record)
    return record
