"""`tootsie scaling fit` with several fixed asymptotes, a target and infeasible runs; predict by law key; tables."""

import json

import numpy as np

from tests.scaling.synthetic import ChinchillaLaw, sweep_records, write_jsonl
from tootsie.cli.main import main
from tootsie.scaling.tables import cross_validation_table, stability_table

LAW = ChinchillaLaw()
BUDGETS = [1e18, 3e18, 1e19, 3e19]


def _last_json(capsys) -> dict[str, object]:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _fit(runs, out, *flags: str) -> int:
    return main(["scaling", "fit", str(runs), "--out", str(out), "--bootstrap", "100", "--no-plots", *flags])


def test_several_asymptotes_target_and_infeasible_runs(tmp_path, capsys) -> None:
    records = sweep_records(LAW, BUDGETS, 4, 3.0, noise=0.005, seed=0)
    diverged = {**records[4], "name": "lr-x100", "loss": None, "feasible": False, "reason": "loss nan at step 12"}
    runs = write_jsonl(tmp_path / "runs.jsonl", [*records, diverged])
    assert _fit(runs, tmp_path / "a.json", "--fixed-asymptote", "1.6,1.7", "--target", "1e22", "--json") == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert list(summary["laws"]) == ["free", "fixed", "fixed=1.7"]
    assert [(law["E"], law["fixed_e"]) for law in summary["laws"].values()][1:] == [(1.6, True), (1.7, True)]
    assert all({"fixed", "fixed=1.7"} <= set(check) for check in summary["cross_validation"])
    assert summary["stability"]["target"] == 1e22 and len(summary["stability"]["rows"]) == 3
    assert summary["infeasible"] == [
        {"source": f"{runs}:17", "name": "lr-x100", "compute": 3e18, "reason": "loss nan at step 12"}
    ]
    assert f"infeasible {runs}:17 (C=3e+18): loss nan at step 12; left out" in captured.err

    # The flag repeated gives the same fit; the text output shows both tables.
    assert (
        _fit(runs, tmp_path / "b.json", "--fixed-asymptote", "1.6", "--fixed-asymptote", "1.7", "--target", "1e22") == 0
    )
    text = capsys.readouterr().out
    first, second = (json.loads((tmp_path / name).read_text(encoding="utf-8")) for name in ("a.json", "b.json"))
    assert first["laws"] == second["laws"] and first["stability"] == second["stability"]
    assert "leave-future-out" in text and "fixed (E=1.7)" in text and "prediction at C=1e+22" in text

    assert (
        main(["scaling", "predict", "--fit", str(tmp_path / "a.json"), "--compute", "1e21", "--law", "fixed=1.7"]) == 0
    )
    assert "prediction at C=1e+21" in capsys.readouterr().out
    assert main(["scaling", "predict", "--fit", str(tmp_path / "a.json"), "--compute", "1e21", "--law", "fixed=2"]) == 2
    assert "its laws: fixed, fixed=1.7, free" in capsys.readouterr().err


def test_markdown_tables(tmp_path, capsys) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", sweep_records(LAW, BUDGETS, 4, 3.0, noise=0.005, seed=1))
    assert _fit(runs, tmp_path / "f.json", "--fixed-asymptote", "1.69,2", "--target", "1e21") == 0
    fit = json.loads((tmp_path / "f.json").read_text(encoding="utf-8"))
    lines = cross_validation_table(fit).splitlines()
    assert lines[0] == "| held out | trained on | actual | free | fixed (E=1.69) | fixed (E=2) |"
    assert lines[1].count("---") == 6 and len(lines) == 2 + 2  # held out: 1e19 (fixed only) and 3e19
    assert lines[2].startswith("| 1e+19 | 2 budgets (1e+18–3e+18) |") and "|  |" in lines[2]
    rows = stability_table(fit).splitlines()
    assert rows[0].startswith("| trained on (predicting 1e+21) |") and len(rows) == 2 + 3
    low, high = (float(x) for x in rows[-1].split("|")[3].split("[")[1].rstrip("] ").split(","))
    assert low <= fit["stability"]["rows"][-1]["fixed"]["predicted"] <= high


def test_batch_size_lists_infeasible_runs(tmp_path, capsys) -> None:
    lines = []
    for compute in (1e18, 1e19):
        optimum = 1e-5 * compute**0.4
        lines += [
            {"compute": compute, "batch_size": b, "loss": 2.5 + 0.02 * np.log(b / optimum) ** 2}
            for b in optimum * np.geomspace(0.25, 4, 4)
        ]
    lines.append({"compute": 1e19, "batch_size": 4096, "loss": None, "feasible": False, "reason": "loss inf"})
    path = write_jsonl(tmp_path / "batch.jsonl", lines)
    assert main(["scaling", "batch-size", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["infeasible"] == [{"source": f"{path}:9", "name": None, "compute": 1e19, "reason": "loss inf"}]
    assert "infeasible" in captured.err and [b["runs"] for b in result["budgets"]] == [4, 4]
