"""`tootsie scaling sweep|fit|predict|preregister|score|batch-size`: JSON contracts, files written, clear errors."""

import json
import math

import numpy as np
import pytest

from tests.scaling.synthetic import ChinchillaLaw, sweep_records, write_jsonl
from tootsie.cli.main import main

LAW = ChinchillaLaw()


def _last_json(capsys) -> dict[str, object]:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture
def runs_file(tmp_path):
    return write_jsonl(
        tmp_path / "runs.jsonl", sweep_records(LAW, [1e18, 3e18, 1e19, 3e19, 1e20], 5, 3.0, noise=0.005, seed=0)
    )


def test_sweep_prints_and_writes_a_plan(tmp_path, capsys) -> None:
    args = [
        "scaling",
        "sweep",
        "--budgets",
        "1.25e11,1e12",
        "--widths",
        "8,16,24,32,48",
        "--window",
        "3",
        "--tokens-per-param",
        "3",
        "--rule",
        "tiny",
    ]
    assert main([*args, "--out", str(tmp_path / "plan.json"), "--json"]) == 0
    plan = _last_json(capsys)
    assert [r["name"] for r in plan["runs"]] == [
        "1.25e11-d8",
        "1.25e11-d16",
        "1.25e11-d24",
        "1e12-d24",
        "1e12-d32",
        "1e12-d48",
    ]
    assert json.loads((tmp_path / "plan.json").read_text(encoding="utf-8")) == plan
    assert main(args) == 0
    assert "6 runs over 2 budgets" in capsys.readouterr().out
    assert main(["scaling", "sweep", "--budgets", "1e12", "--widths", "31"]) == 2
    assert "SweepConfig: width 31" in capsys.readouterr().err


def test_fit_predict_preregister_score(tmp_path, runs_file, capsys) -> None:
    fit_path = tmp_path / "fit.json"
    assert (
        main(
            [
                "scaling",
                "fit",
                str(runs_file),
                "--out",
                str(fit_path),
                "--fixed-asymptote",
                "1.69",
                "--max-budget",
                "3e19",
                "--bootstrap",
                "200",
                "--json",
            ]
        )
        == 0
    )
    summary = _last_json(capsys)
    assert [b["compute"] for b in summary["budgets"]] == [1e18, 3e18, 1e19, 3e19] and summary["excluded"] == 5
    assert set(summary["laws"]) == {"free", "fixed"} and "samples" not in summary["laws"]["free"]
    assert all((tmp_path / name).is_file() for name in ("fit-isoflops.png", "fit-laws.png"))
    assert len(json.loads(fit_path.read_text(encoding="utf-8"))["laws"]["fixed"]["samples"]["A"]) == 200

    assert main(["scaling", "predict", "--fit", str(fit_path), "--compute", "1e20", "--json"]) == 0
    prediction = _last_json(capsys)
    assert set(prediction) == {"compute", "loss", "low", "high", "params_opt", "tokens_opt"}
    assert prediction["low"] <= LAW.loss_opt(1e20) <= prediction["high"]

    record = tmp_path / "prereg.json"
    assert (
        main(
            [
                "scaling",
                "preregister",
                "--fit",
                str(fit_path),
                "--compute",
                "1e20",
                "--name",
                "c1e20",
                "--out",
                str(record),
                "--json",
            ]
        )
        == 0
    )
    assert _last_json(capsys)["prediction"] == prediction
    assert (
        main(
            [
                "scaling",
                "preregister",
                "--fit",
                str(fit_path),
                "--compute",
                "1e20",
                "--name",
                "c1e20",
                "--out",
                str(record),
            ]
        )
        == 2
    )
    assert "never overwritten" in capsys.readouterr().err

    assert main(["scaling", "score", str(record), "--runs", str(runs_file), "--json"]) == 0
    scored = _last_json(capsys)
    assert scored["within_interval"] and scored["actual_source"] == "isoflop minimum of 5 runs"
    assert main(["scaling", "score", str(record), "--actual", "9.0"]) == 0
    assert "OUTSIDE the interval" in capsys.readouterr().out


def test_human_fit_output_and_warnings(tmp_path, runs_file, capsys) -> None:
    assert (
        main(["scaling", "fit", str(runs_file), "--out", str(tmp_path / "f.json"), "--bootstrap", "100", "--no-plots"])
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "free-E law: L = " in out
        and "leave-future-out" in out
        and "1e+20" in out
        and not (tmp_path / "f-laws.png").exists()
    )


def test_bad_runs_fail_with_messages(tmp_path, capsys) -> None:
    records = sweep_records(LAW, [1e18, 3e18, 1e19], 4, 3.0, noise=0.005, seed=0)
    records[5]["loss"] = math.nan
    nan_file = write_jsonl(tmp_path / "nan.jsonl", records)
    assert main(["scaling", "fit", str(nan_file), "--out", str(tmp_path / "f.json")]) == 2
    assert "nan.jsonl:6: loss is nan" in capsys.readouterr().err and not (tmp_path / "f.json").exists()
    assert (
        main(
            [
                "scaling",
                "fit",
                str(nan_file),
                "--out",
                str(tmp_path / "f.json"),
                "--drop-nonfinite",
                "--bootstrap",
                "100",
                "--no-plots",
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["dropped"][0]["source"].endswith("nan.jsonl:6")
    assert "dropped" in captured.err and "nan.jsonl:6" in captured.err

    thin = write_jsonl(tmp_path / "thin.jsonl", records[:4] + records[6:8] + records[8:])
    assert main(["scaling", "fit", str(thin), "--out", str(tmp_path / "g.json")]) == 2
    assert "budget 3e+18 FLOPs has 2 run(s)" in capsys.readouterr().err


def test_batch_size(tmp_path, capsys) -> None:
    lines = []
    for compute in (1e18, 1e19, 1e20):
        optimum = 1e-5 * compute**0.4
        lines += [
            {"compute": compute, "batch_size": b, "loss": 2.5 + 0.02 * np.log(b / optimum) ** 2}
            for b in optimum * np.geomspace(0.25, 4, 5)
        ]
    path = write_jsonl(tmp_path / "batch.jsonl", lines)
    assert (
        main(["scaling", "batch-size", str(path), "--compute", "1e23", "--out", str(tmp_path / "cbs.json"), "--json"])
        == 0
    )
    result = _last_json(capsys)
    assert result["optimal"]["exponent"] == pytest.approx(0.4) and result["projection"]["batch_opt"] == pytest.approx(
        1e-5 * 1e23**0.4
    )
    assert json.loads((tmp_path / "cbs.json").read_text(encoding="utf-8"))["critical"] == result["critical"]
