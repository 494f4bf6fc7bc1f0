"""`eval.benchmark_rows` and `tootsie eval fixtures`: made-up rows for all 19 benchmarks in the mirror layout, the same
bytes on every run, checked by the manifest, and varied enough that a scorer ignoring the text cannot get them all."""

import json

import pytest

from tootsie.cli.main import main
from tootsie.errors import TootsieError
from tootsie.eval.benchmark_data import MANIFEST_FILE, benchmark_files, record_files, sha256_of
from tootsie.eval.benchmark_rows import ROW_MAKERS, benchmark_rows, write_benchmark_rows
from tootsie.eval.benchmarks import BENCHMARKS, SUITES


def _choices(name: str, row: dict) -> tuple[int, list[str]] | None:
    """(gold index, choice texts) of a multiple-choice row, read from its Hub schema; None for generation tasks."""
    if name in ("arc_easy", "arc_challenge", "openbookqa", "commonsense_qa"):
        return row["choices"]["label"].index(row["answerKey"]), row["choices"]["text"]
    readers = {
        "hellaswag": lambda: (int(row["label"]), row["endings"]),
        "piqa": lambda: (row["label"], [row["sol1"], row["sol2"]]),
        "winogrande": lambda: (int(row["answer"]) - 1, [row["option1"], row["option2"]]),
        "boolq": lambda: (row["label"], ["no", "yes"]),
        "mmlu": lambda: (row["answer"], row["choices"]),
        "agieval_lsat_ar": lambda: (row["gold"][0], row["choices"]),
        "copa": lambda: (row["label"], [row["choice1"], row["choice2"]]),
        "wsc273": lambda: (row["label"], row["options"]),
        "gpqa": lambda: (0, [row["Correct Answer"], *(row[f"Incorrect Answer {i}"] for i in (1, 2, 3))]),
        "mmlu_pro": lambda: (row["answer_index"], row["options"]),
    }
    return readers[name]() if name in readers else None


GENERATION_ANSWERS = {
    "gsm8k": lambda row: row["answer"].rpartition("#### ")[2],
    "math500": lambda row: row["answer"],
    "bbh": lambda row: row["target"],
    "humaneval": lambda row: row["canonical_solution"],
    "lambada_openai": lambda row: row["text"].split()[-1],
}


def test_every_benchmark_has_rows_and_the_bytes_repeat(tmp_path) -> None:
    assert set(ROW_MAKERS) == set(BENCHMARKS) and len(BENCHMARKS) == 19
    first = write_benchmark_rows(tmp_path / "a", list(BENCHMARKS))
    second = write_benchmark_rows(tmp_path / "b", list(BENCHMARKS))
    assert [sha256_of(path) for path in first] == [sha256_of(path) for path in second]
    manifest = json.loads((tmp_path / "a" / MANIFEST_FILE).read_text())["files"]
    for name, benchmark in BENCHMARKS.items():
        files = benchmark_files(tmp_path / "a", benchmark)  # every split it reads, each checked against the manifest
        assert list(files) == [subtask.config for subtask in benchmark.subtasks]
        for splits in files.values():
            assert sorted(splits) == sorted(benchmark.splits)
            for path in splits.values():
                assert len(path.read_text().splitlines()) == 50, path
                key = path.relative_to(tmp_path / "a").as_posix()
                assert manifest[key]["made_up"] == name and manifest[key]["rows"] == 50, key


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_rows_vary_so_a_text_blind_scorer_cannot_get_them_all(name) -> None:
    rows = benchmark_rows(name, BENCHMARKS[name].splits[0], 50)
    assert len({json.dumps(row, sort_keys=True) for row in rows}) == 50
    assert len({len(json.dumps(row)) for row in rows}) > 3  # lengths differ
    parsed = [_choices(name, row) for row in rows]
    if parsed[0] is None:  # generation tasks (and lambada's last word): many different answers
        answers = {GENERATION_ANSWERS[name](row) for row in rows}
        assert len(answers) >= {"bbh": 2, "lambada_openai": 10}.get(name, 20), answers
        return
    golds = [gold for gold, _ in parsed]
    if name != "gpqa":  # GPQA's schema keeps the right answer in its own column; lm-eval shuffles the four
        assert len(set(golds)) >= 2 and max(golds.count(g) for g in set(golds)) < 40, golds
    for gold, choices in parsed:
        assert len(set(choices)) == len(choices) and 0 <= gold < len(choices)
    if name != "boolq":  # a scorer picking the shortest (or longest) choice misses some
        assert not all(len(c[g]) == min(map(len, c)) for g, c in parsed)
        assert not all(len(c[g]) == max(map(len, c)) for g, c in parsed)


def test_mirrored_files_are_never_overwritten(tmp_path) -> None:
    (path,) = write_benchmark_rows(tmp_path, ["wsc273"], rows=2)
    (tmp_path / MANIFEST_FILE).unlink()
    record_files(tmp_path, [path], {path.relative_to(tmp_path).as_posix(): {"repo": "lighteval/winograd_wsc"}})
    with pytest.raises(TootsieError, match="mirrored from lighteval/winograd_wsc .*refusing to overwrite"):
        write_benchmark_rows(tmp_path, ["wsc273"], rows=2)
    with pytest.raises(TootsieError, match="unknown benchmark 'nope'"):
        write_benchmark_rows(tmp_path, ["nope"])
    with pytest.raises(TootsieError, match="rows must be at least 1"):
        write_benchmark_rows(tmp_path, ["copa"], rows=0)


def test_the_fixtures_command_writes_a_suite_or_named_tasks(tmp_path, capsys) -> None:
    assert main(["eval", "fixtures", "--out", str(tmp_path / "s"), "--suite", "marin-base", "--rows", "3"]) == 0
    assert "the rows are invented" in capsys.readouterr().out
    for benchmark in BENCHMARKS.values():
        assert benchmark_files(tmp_path / "s", benchmark)
    assert main(["eval", "fixtures", "--out", str(tmp_path / "t"), "copa", "core", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["benchmarks"] == ["copa", *SUITES["core"]] and result["rows"] == 50
    assert main(["eval", "fixtures", "--out", str(tmp_path / "u"), "--suite", "core", "copa"]) == 2
    assert "not both" in capsys.readouterr().err
