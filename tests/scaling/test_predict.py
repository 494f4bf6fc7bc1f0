"""Predictions with intervals from a fit file; preregistered records are hashed, never overwritten, and scored."""

import json

import numpy as np
import pytest

from tests.scaling.synthetic import write_jsonl
from tootsie.errors import TootsieError
from tootsie.jsonfile import write_json_atomic
from tootsie.scaling.fit import FitConfig, fit_runs
from tootsie.scaling.predict import load_fit, predict
from tootsie.scaling.preregister import (
    load_record,
    outcome_from_runs,
    preregister,
    preregistration_time,
    score,
    training_start,
)
from tootsie.scaling.runs import load_runs

BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]


def _marin_sweep(noise: float, seed: int) -> list[dict[str, float]]:
    """Parabolic isoflop curves whose minima lie on Marin's macro law 1.6 + 95.18·C^-0.094, N_opt = 0.1·C^0.5."""
    rng = np.random.default_rng(seed)
    records = []
    for compute in BUDGETS + [1e21]:
        n_opt = 0.1 * compute**0.5
        for params in n_opt * np.geomspace(0.25, 4, 5):
            loss = 1.6 + 95.18 * compute**-0.094 + 0.05 * np.log(params / n_opt) ** 2 + noise * rng.standard_normal()
            records.append(
                {
                    "compute": compute,
                    "params": params,
                    "tokens": compute / (6 * params),
                    "loss": loss,
                    "name": f"{compute:.0e}-{params:.3g}",
                    "train_started_at": "2030-01-01T00:00:00+00:00",
                }
            )
    return records


@pytest.fixture
def fit_file(tmp_path):
    runs = write_jsonl(tmp_path / "runs.jsonl", _marin_sweep(0.003, 0))
    path = tmp_path / "fit.json"
    write_json_atomic(path, fit_runs(load_runs([runs]), FitConfig(fixed_e=(1.6,), bootstrap=300, max_budget=1e20)))
    return path


def test_prediction_fields_and_interval(fit_file) -> None:
    fit = load_fit(fit_file)
    result = predict(fit, 1e21)
    assert tuple(result) == ("compute", "loss", "low", "high", "params_opt", "tokens_opt")
    truth = 1.6 + 95.18 * 1e21**-0.094
    assert result["low"] < result["loss"] < result["high"] and result["low"] <= truth <= result["high"]
    assert result["params_opt"] == pytest.approx(0.1 * 1e21**0.5, rel=0.15)
    assert result["tokens_opt"] == pytest.approx(1e21 / (6 * 0.1 * 1e21**0.5), rel=0.15)
    # Deterministic, and the free law is there too; the fixed one is the default.
    assert predict(fit, 1e21) == result and predict(fit, 1e21, "free")["loss"] != result["loss"]
    assert predict(fit, 1e23)["loss"] == pytest.approx(2.2555, abs=0.01)


def test_predict_errors(fit_file, tmp_path) -> None:
    fit = load_fit(fit_file)
    with pytest.raises(TootsieError, match="positive number of FLOPs"):
        predict(fit, -1.0)
    del fit["laws"]["fixed"]
    with pytest.raises(TootsieError, match="no law .fixed. .its laws: free.*--fixed-asymptote E"):
        predict(fit, 1e21, "fixed")
    (tmp_path / "other.json").write_text(json.dumps({"format": "x"}), encoding="utf-8")
    with pytest.raises(TootsieError, match="is not a tootsie scaling fit"):
        load_fit(tmp_path / "other.json")


def test_preregister_then_score_against_runs(fit_file, tmp_path) -> None:
    record = preregister(fit_file, 1e21, "big-run", tmp_path / "prereg.json", note="before launch")
    assert record["fit"]["sha256"] and record["prediction"] == predict(load_fit(fit_file), 1e21)
    loaded = load_record(tmp_path / "prereg.json")
    loss, source, started = outcome_from_runs([tmp_path / "runs.jsonl"], 1e21)
    assert source == "isoflop minimum of 5 runs" and started == "2030-01-01T00:00:00+00:00"
    result = score(loaded, loss, source, started)
    assert result["within_interval"] and abs(result["error"]) < 0.02 and result["preregistered_before_run"] is True
    assert result["record_sha256"] == record["sha256"]


def test_records_are_never_overwritten_and_edits_are_detected(fit_file, tmp_path) -> None:
    path = tmp_path / "prereg.json"
    preregister(fit_file, 1e21, "big-run", path)
    with pytest.raises(TootsieError, match="already exists; a preregistration is never overwritten"):
        preregister(fit_file, 1e21, "big-run", path)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["prediction"]["high"] += 0.5
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(TootsieError, match="was modified after it was written"):
        load_record(path)


def test_outcome_from_one_run_and_missing_budget(tmp_path, fit_file) -> None:
    single = write_jsonl(tmp_path / "big.jsonl", [{"compute": 1e21, "params": 3e9, "tokens": 5e10, "loss": 2.6}])
    assert outcome_from_runs([single], 1e21) == (2.6, f"run {single}:1", None)
    with pytest.raises(TootsieError, match="no run at the preregistered budget 1e\\+22"):
        outcome_from_runs([single], 1e22)
    preregister(fit_file, 1e21, "x", tmp_path / "p.json")
    record = load_record(tmp_path / "p.json")
    assert score(record, 2.6, "given")["preregistered_before_run"] is None
    with pytest.raises(TootsieError, match="finite loss"):
        score(record, float("nan"), "given")


def test_training_start_is_read_from_the_training_steps_metadata_through_a_portable_checkpoint(tmp_path) -> None:
    prefix = tmp_path / "prefix"
    collect, trained = prefix / "sweep" / "runs-c0ffee", prefix / "sweep" / "train" / "r1-beef01"
    trained.mkdir(parents=True)
    collect.mkdir(parents=True)
    (trained / ".executor_info.json").write_text(json.dumps({"start_time": "2031-05-01T00:00:00+00:00"}))
    (collect / ".executor_info.json").write_text(json.dumps({"name": "sweep/runs", "hash": "c0ffee"}))
    record = {"name": "r1", "compute": 1e21, "params": 1e9, "tokens": 2e10, "loss": 2.5}
    (collect / "runs.jsonl").write_text(json.dumps(record | {"checkpoint": "sweep/train/r1-beef01"}) + "\n")
    [run] = load_runs([collect]).runs
    assert training_start(run) == "2031-05-01T00:00:00+00:00"
    assert outcome_from_runs([collect], 1e21)[2] == "2031-05-01T00:00:00+00:00"
    (collect / "runs.jsonl").write_text(json.dumps(record) + "\n")  # no checkpoint named: unknown
    assert training_start(load_runs([collect]).runs[0]) is None


def test_any_law_key_of_the_fit_predicts(tmp_path) -> None:
    runs = write_jsonl(tmp_path / "runs.jsonl", _marin_sweep(0.003, 0))
    fit = fit_runs(load_runs([runs]), FitConfig(fixed_e=(1.6, 1.7), bootstrap=100, max_budget=1e20))
    assert predict(fit, 1e21)["loss"] == predict(fit, 1e21, "fixed")["loss"]
    assert predict(fit, 1e21, "fixed=1.7")["loss"] > predict(fit, 1e21, "fixed")["loss"]
    with pytest.raises(
        TootsieError, match=r"no law 'fixed=1.8' \(its laws: free, fixed, fixed=1.7\).*--fixed-asymptote 1.8"
    ):
        predict(fit, 1e21, "fixed=1.8")


def test_an_unstamped_record_takes_its_time_from_the_steps_metadata(fit_file, tmp_path) -> None:
    step = tmp_path / "prereg-abc123"
    step.mkdir()
    record = preregister(fit_file, 1e21, "big-run", step / "prereg.json", stamp=False)
    assert "created_at" not in record and load_record(step / "prereg.json") == record
    assert preregistration_time(record, step / "prereg.json") is None
    (step / ".executor_info.json").write_text(
        json.dumps({"start_time": "2029-12-31T23:00:00+00:00", "end_time": "2029-12-31T23:00:05+00:00"})
    )
    written = preregistration_time(record, step / "prereg.json")
    assert written == "2029-12-31T23:00:05+00:00"
    loss, source, started = outcome_from_runs([tmp_path / "runs.jsonl"], 1e21)
    result = score(record, loss, source, started, preregistered_at=written)
    assert result["preregistered_before_run"] is True and result["preregistered_at"] == written


def test_outcome_ignores_infeasible_runs(tmp_path) -> None:
    run = {"compute": 1e21, "params": 3e9, "tokens": 5e10}
    diverged = run | {"name": "lr-x100", "loss": None, "feasible": False, "reason": "loss nan at step 12"}
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [run | {"loss": 2.6}, diverged])
    assert outcome_from_runs([mixed], 1e21) == (2.6, f"run {mixed}:1 (1 infeasible left out)", None)
    only = write_jsonl(
        tmp_path / "only.jsonl", [{"compute": 1e20, "params": 1e9, "tokens": 2e10, "loss": 2.7}, diverged]
    )
    with pytest.raises(
        TootsieError, match=r"every run at the preregistered budget 1e\+21 FLOPs is infeasible.*lr-x100"
    ):
        outcome_from_runs([only], 1e21)
