"""Run records load from JSONL files and sweep directories; a bad record is an error naming it, never a silent drop."""

import json
import math

import pytest

from tootsie.errors import TootsieError
from tootsie.scaling.runs import BATCH_FIELDS, infeasible_list, load_runs


def _jsonl(path, lines: list[str]):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(loss: object = 3.0, **extra: object) -> str:
    return json.dumps({"compute": 1e12, "params": 1e5, "tokens": 2e6, "loss": loss, **extra})


def test_jsonl_and_directories_load(tmp_path) -> None:
    file = _jsonl(tmp_path / "runs.jsonl", [_run(3.0, name="a"), "", _run(2.9)])
    single = tmp_path / "eval-abc"
    single.mkdir()
    (single / "run.json").write_text(_run(2.8, name="b"), encoding="utf-8")
    collected = tmp_path / "runs-abc"
    collected.mkdir()
    (collected / "runs.jsonl").write_text(_run(2.7) + "\n", encoding="utf-8")
    loaded = load_runs([file, single, collected])
    assert [r["loss"] for r in loaded.runs] == [3.0, 2.9, 2.8, 2.7]
    assert loaded.runs[0].name == "a" and loaded.runs[1].source == f"{file}:3"
    assert loaded.files == [file, single / "run.json", collected / "runs.jsonl"]


@pytest.mark.parametrize("loss", ["NaN", "null", '"nan"', "Infinity"])
def test_non_finite_loss_names_the_line_and_run(tmp_path, loss: str) -> None:
    file = _jsonl(
        tmp_path / "runs.jsonl",
        [
            _run(3.0),
            json.dumps({"compute": 1e12, "params": 2e5, "tokens": 1e6, "name": "wide"})[:-1] + f', "loss": {loss}}}',
        ],
    )
    with pytest.raises(TootsieError, match=r"runs\.jsonl:2 \(wide\): loss is .*--drop-nonfinite"):
        load_runs([file])


def test_drop_nonfinite_returns_the_dropped_runs(tmp_path) -> None:
    file = _jsonl(tmp_path / "runs.jsonl", [_run(3.0), _run(math.nan, name="diverged")])
    loaded = load_runs([file], drop_nonfinite=True)
    assert len(loaded.runs) == 1 and [r.name for r in loaded.dropped] == ["diverged"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"compute": 1e12, "params": 1e5, "loss": 3.0}', r"runs\.jsonl:1: missing field 'tokens'"),
        (
            '{"compute": 1e12, "params": -5, "tokens": 1e6, "loss": 3.0}',
            r"field 'params' must be a positive finite number",
        ),
        ('{"compute": "big", "params": 5, "tokens": 1e6, "loss": 3.0}', r"field 'compute' must be a number"),
        ('{"compute": 1e12, "params": 5, "tokens": 1e6, "loss": 3.0', r"runs\.jsonl:1 is not a JSON object"),
        ("[1, 2]", r"expected a JSON object"),
    ],
)
def test_bad_records_are_errors(tmp_path, line: str, message: str) -> None:
    with pytest.raises(TootsieError, match=message):
        load_runs([_jsonl(tmp_path / "runs.jsonl", [line])])


def test_a_directory_without_records_says_what_to_pass(tmp_path) -> None:
    with pytest.raises(TootsieError, match="holds neither run.json"):
        load_runs([tmp_path])
    with pytest.raises(TootsieError, match="run file not found"):
        load_runs([tmp_path / "missing.jsonl"])


def test_batch_fields(tmp_path) -> None:
    file = _jsonl(tmp_path / "b.jsonl", [json.dumps({"compute": 1e12, "batch_size": 64, "loss": 3.0})])
    assert load_runs([file], fields=BATCH_FIELDS).runs[0]["batch_size"] == 64
    with pytest.raises(TootsieError, match="missing field 'batch_size'"):
        load_runs([_jsonl(tmp_path / "r.jsonl", [_run()])], fields=BATCH_FIELDS)


def test_infeasible_runs_are_set_apart_whatever_their_loss(tmp_path) -> None:
    file = _jsonl(
        tmp_path / "runs.jsonl",
        [
            _run(3.0),
            _run(None, name="nan", feasible=False, reason="loss nan at step 12"),
            json.dumps({"compute": 1e12, "params": 1e5, "tokens": 2e6, "feasible": False, "reason": "no loss"}),
            _run(2.9, feasible=True),
        ],
    )
    loaded = load_runs([file])
    assert [r["loss"] for r in loaded.runs] == [3.0, 2.9] and loaded.dropped == []
    assert [r.source for r in loaded.infeasible] == [f"{file}:2", f"{file}:3"]
    assert math.isnan(loaded.infeasible[0]["loss"]) and loaded.infeasible[0].extra["reason"] == "loss nan at step 12"
    assert infeasible_list(loaded.infeasible)[0] == {
        "source": f"{file}:2",
        "name": "nan",
        "compute": 1e12,
        "reason": "loss nan at step 12",
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_run(3.0, feasible="no"), r"runs\.jsonl:1: field 'feasible' must be true or false, got 'no'"),
        (_run(None, feasible=0), r"runs\.jsonl:1: field 'feasible' must be true or false, got 0"),
        (
            json.dumps({"compute": 1e12, "params": -1, "tokens": 2e6, "feasible": False}),
            r"runs\.jsonl:1: field 'params' must be a positive finite number",
        ),
    ],
)
def test_bad_feasible_records_are_errors(tmp_path, line: str, message: str) -> None:
    with pytest.raises(TootsieError, match=message):
        load_runs([_jsonl(tmp_path / "runs.jsonl", [line])])


def test_only_infeasible_runs_is_an_error_naming_them(tmp_path) -> None:
    file = _jsonl(tmp_path / "runs.jsonl", [_run(None, name="big", feasible=False, reason="loss inf at step 3")])
    with pytest.raises(TootsieError, match=r"no usable runs .*infeasible: .*runs\.jsonl:1 \(big\): loss inf at step 3"):
        load_runs([file])
