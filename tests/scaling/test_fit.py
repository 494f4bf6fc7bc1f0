"""The full fit on noisy sweeps from a known law: parameters inside their intervals, honest coverage, clear errors."""

import json

import numpy as np
import pytest

from tests.scaling.synthetic import ChinchillaLaw, sweep_records, write_jsonl
from tootsie.errors import TootsieError
from tootsie.scaling.fit import FitConfig, fit_runs
from tootsie.scaling.predict import predict
from tootsie.scaling.runs import load_runs

LAW = ChinchillaLaw()
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20, 3e20]


def _fit(tmp_path, records, **config):
    return fit_runs(load_runs([write_jsonl(tmp_path / "runs.jsonl", records)]), FitConfig(**config))


def _inside(bounds: list[float], value: float) -> bool:
    return bounds[0] <= value <= bounds[1]


def test_known_law_is_recovered_within_the_reported_intervals(tmp_path) -> None:
    fit = _fit(tmp_path, sweep_records(LAW, BUDGETS, 7, 3.0, noise=0.01, seed=0), fixed_e=(LAW.E,), bootstrap=400)
    free, fixed = fit["laws"]["free"], fit["laws"]["fixed"]
    assert (
        _inside(free["intervals"]["E"], LAW.E)
        and _inside(free["intervals"]["A"], LAW.coefficient)
        and _inside(free["intervals"]["alpha"], LAW.alpha)
    )
    assert _inside(fixed["intervals"]["A"], LAW.coefficient) and _inside(fixed["intervals"]["alpha"], LAW.alpha)
    assert _inside(fit["params_opt"]["intervals"]["exponent"], LAW.params_exponent)
    assert _inside(fit["tokens_opt"]["intervals"]["exponent"], 1 - LAW.params_exponent)
    # Intervals are informative, not just wide: the fixed-E exponent is pinned to a few percent.
    low, high = fixed["intervals"]["alpha"]
    assert high - low < 0.1 * LAW.alpha
    assert fit["noise"]["source"] == "isoflop_residuals" and 0.005 < fit["noise"]["sigma"] < 0.02
    for budget in fit["budgets"]:
        assert budget["method"] == "quadratic"
        assert budget["loss_opt"] == pytest.approx(LAW.loss_opt(budget["compute"]), abs=0.015)
        assert budget["params_opt"] == pytest.approx(LAW.params_opt(budget["compute"]), rel=0.1)


def test_interval_coverage_over_seeds(tmp_path) -> None:
    # 90 % intervals should hold the truth about 90 % of the time;
    # 20 seeds at p = 0.9 fall to <= 14 hits with probability ~1 %.
    hits = np.zeros(3)
    for seed in range(20):
        fit = _fit(
            tmp_path,
            sweep_records(LAW, BUDGETS, 6, 3.0, noise=0.01, seed=seed),
            fixed_e=(LAW.E,),
            bootstrap=200,
            seed=seed,
        )
        hits += [
            _inside(fit["laws"]["free"]["intervals"]["alpha"], LAW.alpha),
            _inside(fit["laws"]["fixed"]["intervals"]["alpha"], LAW.alpha),
            _inside(fit["params_opt"]["intervals"]["exponent"], LAW.params_exponent),
        ]
    assert (hits >= 15).all(), hits


def test_leave_future_out_cross_validation(tmp_path) -> None:
    fit = _fit(tmp_path, sweep_records(LAW, BUDGETS[:4], 5, 3.0, noise=0.005, seed=3), fixed_e=(LAW.E,), bootstrap=200)
    checks = fit["cross_validation"]
    assert [c["compute"] for c in checks] == BUDGETS[2:4]
    assert "free" not in checks[0] and checks[0]["train_budgets"] == BUDGETS[:2]
    assert "free" in checks[1] and "fixed" in checks[1]
    for check in checks:
        assert check["fixed"]["low"] <= check["fixed"]["predicted"] <= check["fixed"]["high"]
        assert check["fixed"]["error"] == pytest.approx(check["actual"] - check["fixed"]["predicted"])
        assert abs(check["fixed"]["error"]) < 0.05


def test_max_budget_excludes_and_lists_runs(tmp_path) -> None:
    fit = _fit(tmp_path, sweep_records(LAW, BUDGETS[:4], 4, 3.0, noise=0.005, seed=1), max_budget=1e19, bootstrap=100)
    assert [b["compute"] for b in fit["budgets"]] == BUDGETS[:3] and len(fit["excluded"]) == 4
    assert {r["compute"] for r in fit["excluded"]} == {3e19}


def test_noise_falls_back_to_law_residuals_or_asks_for_it(tmp_path) -> None:
    three_sizes = sweep_records(LAW, BUDGETS[:4], 3, 2.0, noise=0.005, seed=2)
    fit = _fit(tmp_path, three_sizes, fixed_e=(LAW.E,), bootstrap=100)
    assert fit["noise"]["source"] == "fixed_law_residuals" and fit["noise"]["dof"] == 2
    assert _fit(tmp_path, three_sizes, loss_noise=0.003, bootstrap=100)["noise"] == {
        "sigma": 0.003,
        "source": "given",
        "dof": None,
    }
    with pytest.raises(TootsieError, match="cannot estimate the loss noise.*--loss-noise"):
        _fit(tmp_path, three_sizes[:9], bootstrap=100)


def test_too_few_budgets_and_bad_asymptote(tmp_path) -> None:
    two = sweep_records(LAW, BUDGETS[:2], 4, 3.0, noise=0.005, seed=0)
    with pytest.raises(TootsieError, match=r"2 budget\(s\).*free-E law needs at least 3 budgets.*--fixed-asymptote"):
        _fit(tmp_path, two, bootstrap=100)
    assert _fit(tmp_path, two, fixed_e=(LAW.E,), bootstrap=100)["laws"].keys() == {"fixed"}
    with pytest.raises(TootsieError, match="--fixed-asymptote 9.0 is not below the lowest isoflop minimum"):
        _fit(tmp_path, two, fixed_e=(9.0,), bootstrap=100)


def test_a_thin_budget_is_an_error_not_a_drop(tmp_path) -> None:
    records = sweep_records(LAW, BUDGETS[:3], 4, 3.0, noise=0.005, seed=0)
    thin = [r for r in records if r["compute"] != 1e19] + [r for r in records if r["compute"] == 1e19][:2]
    with pytest.raises(TootsieError, match=r"budget 1e\+19 FLOPs has 2 run\(s\)"):
        _fit(tmp_path, thin, bootstrap=100)


def test_config_validation() -> None:
    for bad in (
        {"bootstrap": 10},
        {"level": 1.5},
        {"fixed_e": (-1.0,)},
        {"loss_noise": float("nan")},
        {"max_budget": 0.0},
        {"fixed_e": 1.6},
        {"fixed_e": (1.6, 1.6)},
        {"target": 0.0},
    ):
        with pytest.raises(ValueError):
            FitConfig(**bad)


def test_several_fixed_asymptotes_rank_the_true_one_first(tmp_path) -> None:
    # Chinchilla's E is 1.69: cross-validated against 1.0 and 2.0, the true asymptote extrapolates best.
    records = sweep_records(LAW, BUDGETS, 5, 3.0, noise=0.005, seed=4)
    fit = _fit(tmp_path, records, fixed_e=(LAW.E, 1.0, 2.0), bootstrap=200)
    assert list(fit["laws"]) == ["free", "fixed", "fixed=1", "fixed=2"]
    assert [(law["E"], law["fixed_e"]) for law in fit["laws"].values()][1:] == [
        (LAW.E, True),
        (1.0, True),
        (2.0, True),
    ]
    assert fit["config"]["fixed_e"] == [LAW.E, 1.0, 2.0]
    checks = fit["cross_validation"]
    assert [c["compute"] for c in checks] == BUDGETS[2:]
    assert all({"fixed", "fixed=1", "fixed=2"} <= set(c) for c in checks) and "free" not in checks[0]
    errors = {key: np.mean([abs(c[key]["error"]) for c in checks]) for key in ("fixed", "fixed=1", "fixed=2")}
    assert min(errors, key=errors.get) == "fixed", errors
    assert errors["fixed"] < 0.5 * min(errors["fixed=1"], errors["fixed=2"]), errors
    with pytest.raises(TootsieError, match="--fixed-asymptote 9.0 is not below"):
        _fit(tmp_path, records, fixed_e=(LAW.E, 9.0), bootstrap=100)


def test_one_fixed_asymptote_keeps_the_file_layout(tmp_path) -> None:
    fit = _fit(tmp_path, sweep_records(LAW, BUDGETS[:4], 4, 3.0, noise=0.005, seed=0), fixed_e=(LAW.E,), bootstrap=100)
    assert list(fit["laws"]) == ["free", "fixed"] and fit["laws"]["fixed"]["E"] == LAW.E
    assert {key for check in fit["cross_validation"] for key in check} == {
        "compute",
        "train_budgets",
        "actual",
        "free",
        "fixed",
    }
    assert "stability" not in fit and fit["infeasible"] == [] and "created_at" in fit


def test_stability_rows_end_at_the_full_fit_prediction(tmp_path) -> None:
    records = sweep_records(LAW, BUDGETS, 4, 3.0, noise=0.005, seed=5)
    fit = _fit(tmp_path, records, fixed_e=(LAW.E, 2.0), bootstrap=100, target=1e22)
    stability = fit["stability"]
    assert stability["target"] == 1e22
    rows = stability["rows"]
    assert [len(row["train_budgets"]) for row in rows] == [2, 3, 4, 5, 6]
    assert "free" not in rows[0] and all({"free", "fixed", "fixed=2"} <= set(row) for row in rows[1:])
    for key in fit["laws"]:
        full = predict(fit, 1e22, key)
        assert rows[-1][key] == pytest.approx({"predicted": full["loss"], "low": full["low"], "high": full["high"]})
    # The true asymptote's prediction barely moves as budgets are added.
    truth = LAW.loss_opt(1e22)
    assert all(abs(row["fixed"]["predicted"] - truth) < 0.03 for row in rows)


def test_fit_without_stamp_depends_only_on_its_inputs(tmp_path) -> None:
    loaded = load_runs([write_jsonl(tmp_path / "runs.jsonl", sweep_records(LAW, BUDGETS[:3], 4, 3.0, 0.005, 0))])
    config = FitConfig(fixed_e=(LAW.E,), bootstrap=60)
    first, second = fit_runs(loaded, config, stamp=False), fit_runs(loaded, config, stamp=False)
    assert "created_at" not in first and json.dumps(first) == json.dumps(second)


def test_infeasible_runs_are_listed_not_fitted(tmp_path) -> None:
    records = sweep_records(LAW, BUDGETS[:3], 4, 3.0, noise=0.005, seed=0)
    diverged = {**records[0], "name": "lr-x100", "feasible": False, "reason": "loss nan at step 12", "loss": None}
    fit = _fit(tmp_path, [*records, diverged], fixed_e=(LAW.E,), bootstrap=100)
    assert fit["infeasible"] == [
        {"source": f"{tmp_path / 'runs.jsonl'}:13", "name": "lr-x100", "compute": 1e18, "reason": "loss nan at step 12"}
    ]
    assert sum(len(budget["runs"]) for budget in fit["budgets"]) == 12
    assert fit["budgets"] == _fit(tmp_path, records, fixed_e=(LAW.E,), bootstrap=100)["budgets"]
