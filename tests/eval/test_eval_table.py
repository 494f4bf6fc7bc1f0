"""`tootsie eval table` on hand-made suite results: the retrospective's column order, Average and empty columns,
standard errors, the before/after view's differences and degradation marks, bad inputs and the CLI's --json."""

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.eval.tiny_checkpoint import RandomCheckpointConfig, tokenizer_and_cache, write_random_checkpoint
from tootsie.cli.main import main
from tootsie.errors import TootsieError
from tootsie.eval.benchmark_rows import write_benchmark_rows
from tootsie.eval.benchmarks import MARIN_BASE_COLUMNS, SUITES
from tootsie.eval.table import Delta, build_row, build_table, read_results, render_markdown, table_columns, table_json

RETROSPECTIVE_HEADER = (
    "AGI Eval LSAT-AR | ARC Easy | ARC Challenge | BoolQ | CommonSense QA | COPA | HellaSwag | lambada_openai"
    " | OpenBookQA | PIQA | WinoGrande | WSC | MMLU | GPQA | BBH | MMLU Pro | HumanEval | GSM8K | MATH"
)
"""The 32B retrospective's base-model table header after "Model | Average" (seeds/marin-32b-retrospective.md)."""
TASKS = [task for _, task in MARIN_BASE_COLUMNS]


def stderr(value: float, n: int) -> float:
    """lm-eval's stderr of a mean of 0/1 scores: the sample standard deviation over sqrt(n)."""
    return math.sqrt(value * (1 - value) / (n - 1))


def suite_result(values: dict[str, float | None], prompt_format: str = "lm-eval", n: int = 100) -> dict[str, Any]:
    """A `tootsie eval suite --json` object with these headline values."""
    rows = [
        {"task": task, "metric": "acc", "value": value, "stderr": None if value is None else stderr(value, n)}
        | {"n": n, "prompt_format": prompt_format}
        for task, value in values.items()
    ]
    return {"checkpoint": "ckpt", "weights": "model", "suite": "x", "prompt_format": prompt_format, "results": rows}


def full(offset: float = 0.0) -> dict[str, float | None]:
    """All 19 marin-base benchmarks with values 0.30, 0.32, ... (+ offset)."""
    return {task: round(0.30 + 0.02 * index + offset, 4) for index, task in enumerate(TASKS)}


def table_of(*models: tuple[str, dict[str, Any]], compare: bool = False, prompt_format: str = "lm-eval"):
    columns = table_columns("marin-base")
    rows = [build_row(label, [(f"{label}.json", result)], columns, prompt_format) for label, result in models]
    return build_table("marin-base", rows, columns, prompt_format, compare=compare)


def test_marin_base_columns_follow_the_retrospective_and_other_suites_their_own_order() -> None:
    table = table_of(("base", suite_result(full())))
    header = render_markdown(table).splitlines()[0]
    assert header == f"| Model | Format | Average | {RETROSPECTIVE_HEADER} |"
    assert [column.task for column in table_columns("core")] == list(SUITES["core"])
    assert [column.title for column in table_columns("core")][:2] == ["ARC Easy", "ARC Challenge"]


def test_cells_are_percentages_with_one_standard_error_and_the_average_is_over_all_columns() -> None:
    table = table_of(("base", suite_result(full())))
    cells = render_markdown(table).splitlines()[2].split(" | ")
    assert cells[0] == "| **base**" and cells[1] == "lm-eval"
    assert cells[3] == f"30.0 ± {100 * stderr(0.30, 100):.1f}" == "30.0 ± 4.6"
    mean = sum(full().values()) / 19  # type: ignore[arg-type]
    assert table.rows[0].average.value == pytest.approx(mean) and table.rows[0].average.columns == 19
    assert cells[2] == f"{100 * mean:.1f} ± {100 * table.rows[0].average.stderr:.1f}"
    errors = [stderr(v, 100) for v in full().values()]  # type: ignore[arg-type]
    assert table.rows[0].average.stderr == pytest.approx(math.sqrt(sum(e * e for e in errors)) / 19)


def test_an_empty_column_is_named_with_its_reason_and_the_average_says_over_how_many() -> None:
    values = full() | {"humaneval": None}
    del values["gpqa"]
    result = suite_result(values)
    result["results"][[r["task"] for r in result["results"]].index("humaneval")]["refused"] = "no sandbox here"
    table = table_of(("base", result))
    markdown = render_markdown(table)
    present = [v for v in values.values() if v is not None]
    average = table.rows[0].average
    assert average.value == pytest.approx(sum(present) / 17) and (average.columns, average.of) == (17, 19)
    assert average.missing == ("GPQA", "HumanEval")
    assert f"{100 * average.value:.1f} ± {100 * average.stderr:.1f} (17/19)" in markdown.splitlines()[2]
    assert "- Empty for every model: GPQA (gpqa) (not in the results read)." in markdown
    assert "- Empty for every model: HumanEval (humaneval) (no sandbox here)." in markdown
    assert "over 17 of 19 columns (missing: GPQA, HumanEval), not comparable" in markdown
    assert markdown.splitlines()[2].count(" — ") == 2


def test_columns_empty_for_one_model_for_one_reason_share_a_note() -> None:
    sft = {task: value for task, value in full().items() if task not in ("gpqa", "mmlu_pro")}
    markdown = render_markdown(table_of(("base", suite_result(full())), ("sft", suite_result(sft))))
    assert "- Empty for sft: GPQA (gpqa), MMLU Pro (mmlu_pro) (not in the results read)." in markdown
    assert "Average of base" not in markdown and "Average of sft is over 17 of 19 columns" in markdown


def test_before_after_view_differences_and_degradation_marks() -> None:
    before = full()
    after = full() | {"arc_easy": 0.40, "boolq": 0.20, "mmlu": before["mmlu"] - 0.01}  # +8, -16 beyond noise, -1
    table = table_of(("base", suite_result(before)), ("sft", suite_result(after)), compare=True)
    deltas = {delta.title: delta for delta in table.compare}
    assert deltas["ARC Easy"].diff == pytest.approx(0.40 - before["arc_easy"]) and not deltas["ARC Easy"].degraded
    assert deltas["BoolQ"].diff == pytest.approx(-0.16) and deltas["BoolQ"].beyond_noise
    se = math.sqrt(stderr(0.36, 100) ** 2 + stderr(0.20, 100) ** 2)
    assert deltas["BoolQ"].stderr == pytest.approx(se)
    assert deltas["MMLU"].degraded and not deltas["MMLU"].beyond_noise
    assert [d.title for d in table.compare if d.degraded] == ["Average", "BoolQ", "MMLU"]
    assert deltas["HellaSwag"].diff == 0 and not deltas["HellaSwag"].degraded
    lines = render_markdown(table).splitlines()
    diff_row = next(line for line in lines if line.startswith("| sft − base |")).split(" | ")
    assert diff_row[3] == f"+8.0 ± {100 * deltas['ARC Easy'].stderr:.1f}"
    assert diff_row[5] == f"-16.0 ± {100 * se:.1f} ▼"
    notes = "\n".join(lines)
    assert "sft scores below base (the base metric degrades): 3 of 20: Average, BoolQ, MMLU." in notes
    assert "(sqrt(se_before² + se_after²)): BoolQ." in notes


def test_the_metrics_note_gives_each_columns_metric_shots_and_documents() -> None:
    result = suite_result({"arc_easy": 0.5, "boolq": 0.6}, n=20)
    result["results"][0]["num_fewshot"] = 10
    notes = render_markdown(table_of(("m", result)))
    assert (
        "Metrics, few-shot counts where recorded (documents scored): ARC Easy acc, 10-shot (n=20); BoolQ acc (n=20)."
        in notes
    )


def test_models_scored_on_a_limit_are_named_once() -> None:
    limited = suite_result({"boolq": 0.5}) | {"limit": 20}
    notes = render_markdown(table_of(("base", limited), ("sft", limited), ("full", suite_result({"boolq": 0.5}))))
    assert "- base, sft were scored on the first 20 documents of each task (--limit), not the full sets." in notes
    assert "full was" not in notes


def test_float_noise_in_equal_averages_is_no_degradation() -> None:
    assert 0.24999999999999994 - 0.25 < 0
    assert not Delta("Average", 0.25, 0.24999999999999994, 0.24999999999999994 - 0.25, 0.02).degraded
    assert Delta("Average", 0.25, 0.249, 0.249 - 0.25, 0.02).degraded


def test_compare_needs_exactly_two_models() -> None:
    with pytest.raises(TootsieError, match="exactly two models"):
        table_of(("a", suite_result(full())), compare=True)


def test_olmes_table_takes_olmes_rows_and_lm_eval_rows_only_where_no_variant_exists() -> None:
    olmes = suite_result({"arc_easy": 0.5}, prompt_format="olmes")["results"]
    lm_eval = suite_result({"arc_easy": 0.3, "arc_challenge": 0.3, "boolq": 0.6})["results"]
    table = table_of(("m", {"results": olmes + lm_eval}), prompt_format="olmes")
    cells = {cell.column.task: cell for cell in table.rows[0].cells}
    assert cells["arc_easy"].value == 0.5 and cells["boolq"].value == 0.6  # boolq has no OLMES variant
    assert cells["arc_challenge"].value is None and cells["arc_challenge"].empty == "only in lm-eval format"
    assert "| **m** | olmes (1 lm-eval) |" in render_markdown(table)


def test_one_benchmark_twice_under_one_label_is_refused() -> None:
    columns = table_columns("marin-base")
    results = [("a.json", suite_result({"boolq": 0.5})), ("b.json", suite_result({"boolq": 0.6}))]
    with pytest.raises(TootsieError, match=r"boolq \(lm-eval\) is in more than one result of 'm'"):
        build_row("m", results, columns, "lm-eval")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("not json at all", "not a JSON object"),
        ('{"suite": "core"}', "no 'results' list"),
        ('{"results": [{"value": 0.5}]}', r"results\[0\] has no 'task'"),
        ('{"results": [{"task": "boolq"}]}', r"results\[0\] has no 'task' name or no 'value'"),
        ('{"results": [{"task": "boolq", "value": 0.5, "n": 2.5}]}', r"n=2.5 is not a whole number"),
        ('{"limit": "all", "results": []}', r"limit='all' is not a whole number"),
        ('{"results": [{"task": "boolq", "value": "high"}]}', r"value='high' is not a number"),
        ('{"results": [{"task": "boolq", "value": 63.0}]}', r"value=63.0 is not a fraction"),
    ],
)
def test_a_bad_results_file_names_the_file_and_the_fix(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TootsieError, match=expected) as error:
        read_results(path)
    assert str(path) in str(error.value) and (
        "tootsie eval suite" in str(error.value) or "unedited" in str(error.value)
    )


def test_a_saved_stdout_whose_last_line_is_the_object_reads(tmp_path: Path) -> None:
    path = tmp_path / "stdout.txt"
    path.write_text("=== a prompt\nQuestion: ...\n" + json.dumps(suite_result({"boolq": 0.5})) + "\n")
    assert read_results(path)["results"][0]["value"] == 0.5


def test_cli_json_carries_the_numbers_the_markdown_shows(tmp_path: Path, capsys) -> None:
    (tmp_path / "base.json").write_text(json.dumps(suite_result(full())))
    sft = full() | {"boolq": 0.20}
    del sft["gpqa"]
    (tmp_path / "sft.json").write_text(json.dumps(suite_result(sft)))
    out = tmp_path / "tables" / "table.md"
    args = ["eval", "table", f"{tmp_path / 'base.json'}", f"sft={tmp_path / 'sft.json'}", "--suite", "marin-base"]
    assert main([*args, "--out", str(out), "--compare", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["out"] == str(out) and result["suite"] == "marin-base"
    assert [c["title"] for c in result["columns"]] == [title for title, _ in MARIN_BASE_COLUMNS]
    base, after = result["rows"]
    assert (base["label"], after["label"]) == ("base", "sft")
    assert after["average"]["columns"] == 18 and after["average"]["missing"] == ["GPQA"]
    boolq = next(d for d in result["compare"]["deltas"] if d["title"] == "BoolQ")
    assert boolq["diff"] == pytest.approx(-0.16) and boolq["degraded"] and boolq["beyond_noise"]
    markdown = out.read_text(encoding="utf-8")
    assert result["notes"] == [line[2:] for line in markdown.splitlines() if line.startswith("- ")]
    cell = base["cells"][3]
    assert f"{100 * cell['value']:.1f} ± {100 * cell['stderr']:.1f}" in markdown.splitlines()[2]


def test_cli_refuses_a_run_directory_without_data_dir(tmp_path: Path, capsys) -> None:
    assert main(["eval", "table", str(tmp_path), "--suite", "marin-base"]) != 0
    assert "pass --data-dir DIR to evaluate it" in capsys.readouterr().err


def test_table_json_round_trips_through_json() -> None:
    table = table_of(("base", suite_result(full())), ("sft", suite_result(full(-0.01))), compare=True)
    assert json.loads(json.dumps(table_json(table)))["compare"]["deltas"][0]["title"] == "Average"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cli_evaluates_run_directories_saves_their_results_and_redraws_the_same_table(tmp_path: Path, capsys) -> None:
    tokenizer, _ = tokenizer_and_cache(tmp_path / "inputs")
    for seed, name in ((0, "base"), (1, "sft")):
        write_random_checkpoint(RandomCheckpointConfig(seed=seed), str(tmp_path / name))
    write_benchmark_rows(tmp_path / "data", ["arc_easy", "boolq"], rows=6)
    suite = ["--suite", "arc_easy,boolq", "--compare", "--json"]
    evaluate = ["--data-dir", str(tmp_path / "data"), "--limit", "3", "--tokenizer", tokenizer]
    runs = [f"base={tmp_path / 'base'}", f"sft={tmp_path / 'sft'}"]
    saved = tmp_path / "results"
    assert main(["eval", "table", *runs, *suite, *evaluate, "--save-results", str(saved), "--quiet"]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [c["task"] for c in first["columns"]] == ["arc_easy", "boolq"]
    assert all(cell["n"] == 3 and cell["value"] is not None for row in first["rows"] for cell in row["cells"])
    assert main(["eval", "table", str(saved / "base.json"), str(saved / "sft.json"), *suite]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [row["sources"] for row in again["rows"]] == [[str(saved / "base.json")], [str(saved / "sft.json")]]
    assert again["rows"][0]["cells"] == first["rows"][0]["cells"] and again["compare"] == first["compare"]
