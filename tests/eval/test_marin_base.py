"""The `marin-base` suite: its 19 columns in the retrospective's order with a documented choice each, and the six
tasks it added scored through lm-eval's own configs by stand-in models that prefer the gold answer (1.0) or a wrong
one (0.0), at the suite's few-shot counts."""

from pathlib import Path

import pytest

from tests.eval.benchmark_fixtures import write_fixtures
from tootsie.errors import TootsieError
from tootsie.eval.benchmark_data import benchmark_files
from tootsie.eval.benchmarks import (
    BENCHMARKS,
    MARIN_BASE,
    MARIN_BASE_COLUMNS,
    NOT_IN_SEEDS,
    SUITES,
    Column,
    suite_benchmarks,
    suite_columns,
)

pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install 'tootsie[lmeval]')")
from lm_eval.api.instance import Instance  # noqa: E402 - needs lm_eval
from lm_eval.api.model import LM  # noqa: E402 - needs lm_eval
from lm_eval.tasks._yaml_loader import load_yaml  # noqa: E402 - needs lm_eval

from tootsie.eval.suite import STOCK_TASKS, plan_runs, run_suite  # noqa: E402 - needs lm_eval

RETROSPECTIVE_COLUMNS = (
    "AGI Eval LSAT-AR",
    "ARC Easy",
    "ARC Challenge",
    "BoolQ",
    "CommonSense QA",
    "COPA",
    "HellaSwag",
    "lambada_openai",
    "OpenBookQA",
    "PIQA",
    "WinoGrande",
    "WSC",
    "MMLU",
    "GPQA",
    "BBH",
    "MMLU Pro",
    "HumanEval",
    "GSM8K",
    "MATH",
)
"""The base-model table's columns as the seeds print them, before "Average"."""

NEW = ("agieval_lsat_ar", "commonsense_qa", "copa", "wsc273", "gpqa", "mmlu_pro")
ROWS = 12
"""Rows per split: enough for CommonSense QA's 10 shots drawn from train."""


def test_marin_base_lists_the_nineteen_columns_in_order_each_with_a_documented_choice() -> None:
    assert tuple(title for title, _ in MARIN_BASE_COLUMNS) == RETROSPECTIVE_COLUMNS
    assert SUITES["marin-base"] == tuple(name for _, name in MARIN_BASE_COLUMNS)
    assert [b.name for b in suite_benchmarks("marin-base")] == list(SUITES["marin-base"])
    assert len(set(SUITES["marin-base"])) == 19 and set(SUITES["marin-base"]) == set(BENCHMARKS)
    shots = {column.benchmark: column.num_fewshot for column in MARIN_BASE}
    assert shots["wsc273"] == 0 and shots["agieval_lsat_ar"] == 3 and shots["mmlu_pro"] == 5
    assert shots["arc_easy"] == shots["arc_challenge"] == shots["boolq"] == shots["commonsense_qa"] == 10
    assert shots["math500"] == 4
    for column in MARIN_BASE:
        assert column.source.startswith(f"{NOT_IN_SEEDS}: ") and len(column.source) > 40, column
        benchmark = BENCHMARKS[column.benchmark]
        (stock,) = {subtask.stock_yaml for subtask in benchmark.subtasks[:1]}
        config = load_yaml(STOCK_TASKS / stock, resolve_func=False) | dict(benchmark.overrides)
        task = "bbh_cot_fewshot" if column.benchmark == "bbh" else config["task"]
        assert column.variant == task, column
        metric, _, filter_name = column.metric.partition(",")
        if not benchmark.executes_code:  # HumanEval's pass_at_1 replaces the stock metric (see eval.suite)
            assert metric in {entry["metric"] for entry in config["metric_list"]}, column
            assert filter_name in {"none"} | {entry["name"] for entry in config.get("filter_list", [])}, column
    assert suite_columns("core") == {} and suite_columns("marin-base")["gpqa"].variant == "leaderboard_gpqa_main"


def test_the_docs_table_states_each_columns_choice() -> None:
    lines = (Path(__file__).parents[2] / "docs" / "eval-marin-base.md").read_text(encoding="utf-8").splitlines()
    for column in MARIN_BASE:
        (line,) = [line for line in lines if line.startswith(f"| {column.title} | `{column.benchmark}` |")]
        assert f"| {column.num_fewshot} | `{column.metric}` | NOT IN SEEDS |" in line, line
        assert f"`{column.variant}`" in line, line


def test_a_column_refuses_a_negative_few_shot_count() -> None:
    with pytest.raises(ValueError, match="num_fewshot must be >= 0"):
        Column("X", "arc_easy", -1, "acc,none", "arc_easy", NOT_IN_SEEDS)


def test_a_missing_gpqa_file_says_how_to_get_the_gated_dataset(tmp_path) -> None:
    with pytest.raises(
        TootsieError,
        match=r"missing .*Idavidrein/gpqa/gpqa_main/train\.jsonl.*tootsie eval mirror gpqa --out .*gated: accept"
        r" its terms at https://huggingface\.co/datasets/Idavidrein/gpqa.*huggingface-cli login",
    ):
        benchmark_files(tmp_path, BENCHMARKS["gpqa"])


def _choices(task: str, doc: dict) -> tuple[int, int]:
    """(gold index, number of choices) of a processed document, read from the Hub schema, not lm-eval's target."""
    if task == "agieval_lsat_ar":
        return doc["gold"][0], len(doc["choices"])
    if task == "commonsense_qa":
        return "ABCDE".index(doc["answerKey"]), 5
    if task in ("copa", "wsc273"):
        return doc["label"], 2
    if task == "leaderboard_gpqa_main":  # process_docs shuffled the choices; `answer` is "(C)"-style
        return "ABCD".index(doc["answer"][1]), 4
    if task == "leaderboard_mmlu_pro":
        return doc["answer_index"], len(doc["options"])
    raise AssertionError(f"no gold answer for task {task!r}")


class Preferring(LM):
    """An lm-eval model whose log-likelihood is highest, per character too, on the gold choice (or the next one)."""

    def __init__(self, right: bool) -> None:
        super().__init__()
        self.right = right
        self.contexts: dict[str, list[str]] = {}

    def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        scores = []
        for request in requests:
            context, continuation = request.args
            self.contexts.setdefault(str(request.task_name), []).append(context)
            gold, count = _choices(str(request.task_name), request.doc)
            preferred = gold if self.right else (gold + 1) % count
            length = len(continuation)
            scores.append((-0.01 * length, False) if request.idx == preferred else (-10.0 * length - 10.0, False))
        return scores

    def loglikelihood_rolling(self, requests: list[Instance], disable_tqdm: bool = False) -> list[float]:
        raise AssertionError("the multiple-choice tasks request no rolling log-likelihoods")

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        """MATH-500 only: the answer between `$`s, as hendrycks_math reads it (off by one when wrong)."""
        outputs = []
        for request in requests:
            assert request.task_name == "hendrycks_math500", request.task_name
            self.contexts.setdefault("hendrycks_math500", []).append(request.args[0])
            answer = request.doc["answer"] if self.right else str(int(request.doc["answer"]) + 1)
            outputs.append(f" Adding gives ${answer}$.")
        return outputs


SHOT_MARKS = {
    "agieval_lsat_ar": "Among A through E, the answer is",
    "commonsense_qa": "Question:",
    "copa": " fell over",
    "leaderboard_gpqa_main": "What is the correct answer to this question:",
    "leaderboard_mmlu_pro": "Answer:",
}
"""A string each document's prompt holds once, so a context with k shots holds it k + 1 times."""


@pytest.mark.timeout(240)
def test_the_six_new_tasks_score_gold_one_and_wrong_zero_at_the_suites_few_shot_counts(tmp_path) -> None:
    data_dir = tmp_path / "data"
    write_fixtures(data_dir, NEW, rows=ROWS)
    columns = suite_columns("marin-base")
    for right in (True, False):
        lm = Preferring(right)
        result = run_suite(lm, "marin-base", data_dir, tmp_path / f"work-{right}", tasks=NEW)
        rows = {row["task"]: row for row in result["results"]}
        assert list(rows) == list(NEW)
        for name, row in rows.items():
            assert row["value"] == (1.0 if right else 0.0), row
            assert row["n"] == ROWS and row["prompt_format"] == "lm-eval", row
            assert row["num_fewshot"] == columns[name].num_fewshot, row
            assert row["metric"] == columns[name].metric.replace(",none", ""), row
    for task, mark in SHOT_MARKS.items():
        name = {"leaderboard_gpqa_main": "gpqa", "leaderboard_mmlu_pro": "mmlu_pro"}.get(task, task)
        counts = {context.count(mark) for context in lm.contexts[task]}
        assert counts == {columns[name].num_fewshot + 1}, (task, counts)


@pytest.mark.timeout(120)
def test_math_runs_four_shot_and_never_shows_a_problem_its_own_answer(tmp_path) -> None:
    write_fixtures(tmp_path / "data", ("math500",), rows=ROWS)
    for right in (True, False):
        lm = Preferring(right)
        (row,) = run_suite(lm, "marin-base", tmp_path / "data", tmp_path / "work", tasks=("math500",))["results"]
        assert row["value"] == (1.0 if right else 0.0) and row["num_fewshot"] == 4 and row["n"] == ROWS, row
    contexts = lm.contexts["hendrycks_math500"]
    assert len(contexts) == ROWS and all(context.count("Problem:") == 5 for context in contexts)
    for context in contexts:
        *shots, own = (problem.partition("\nAnswer:")[0] for problem in context.split("Problem:")[1:])
        assert own not in shots  # MATH500_SHOTS: lm-eval leaves the problem out of its own shots


def test_the_plan_sets_each_columns_shots_on_lm_eval_configs_and_leaves_olmes_ones_alone(tmp_path) -> None:
    write_fixtures(tmp_path, tuple(BENCHMARKS), rows=2)
    columns = suite_columns("marin-base")
    runs = plan_runs(suite_benchmarks("marin-base"), tmp_path, "both", tmp_path / "cache", columns)
    assert {run.benchmark.name for run in runs} == set(BENCHMARKS)
    for run in runs:
        if run.prompt_format == "lm-eval":
            column = columns[run.benchmark.name]
            assert run.column is column and run.config["num_fewshot"] == column.num_fewshot, run.name
            assert run.metric == column.metric
        else:  # OLMES variants keep their own shots (arc_mc, hellaswag_mc, mmlu_mc: 5; gsm8k_cot: 8)
            assert run.column is None and run.config.get("num_fewshot") in (5, 8), (
                run.name,
                run.config.get("num_fewshot"),
            )
    stock = plan_runs(suite_benchmarks("core"), tmp_path, "lm-eval", tmp_path / "cache", suite_columns("core"))
    assert all(run.config.get("num_fewshot") in (None, 0) for run in stock)  # core keeps the stock counts


def test_tasks_outside_the_suite_are_refused(tmp_path) -> None:
    with pytest.raises(TootsieError, match=r"tasks \['gpqa'\] are not in suite 'core'"):
        run_suite(Preferring(True), "core", tmp_path, tmp_path, tasks=("gpqa",))
