"""The full fit on noisy sweeps from a known law: parameters inside their intervals, honest coverage, clear errors."""

import numpy as np
import pytest

from tests.scaling.synthetic import ChinchillaLaw, sweep_records, write_jsonl
from tootsie.errors import TootsieError
from tootsie.scaling.fit import FitConfig, fit_runs
from tootsie.scaling.runs import load_runs

LAW = ChinchillaLaw()
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20, 3e20]


def _fit(tmp_path, records, **config):
    return fit_runs(load_runs([write_jsonl(tmp_path / "runs.jsonl", records)]), FitConfig(**config))


def _inside(bounds: list[float], value: float) -> bool:
    return bounds[0] <= value <= bounds[1]


def test_known_law_is_recovered_within_the_reported_intervals(tmp_path) -> None:
    fit = _fit(tmp_path, sweep_records(LAW, BUDGETS, 7, 3.0, noise=0.01, seed=0), fixed_e=LAW.E, bootstrap=400)
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
            fixed_e=LAW.E,
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
    fit = _fit(tmp_path, sweep_records(LAW, BUDGETS[:4], 5, 3.0, noise=0.005, seed=3), fixed_e=LAW.E, bootstrap=200)
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
    fit = _fit(tmp_path, three_sizes, fixed_e=LAW.E, bootstrap=100)
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
    assert _fit(tmp_path, two, fixed_e=LAW.E, bootstrap=100)["laws"].keys() == {"fixed"}
    with pytest.raises(TootsieError, match="--fixed-asymptote 9.0 is not below the lowest isoflop minimum"):
        _fit(tmp_path, two, fixed_e=9.0, bootstrap=100)


def test_a_thin_budget_is_an_error_not_a_drop(tmp_path) -> None:
    records = sweep_records(LAW, BUDGETS[:3], 4, 3.0, noise=0.005, seed=0)
    thin = [r for r in records if r["compute"] != 1e19] + [r for r in records if r["compute"] == 1e19][:2]
    with pytest.raises(TootsieError, match=r"budget 1e\+19 FLOPs has 2 run\(s\)"):
        _fit(tmp_path, thin, bootstrap=100)


def test_config_validation() -> None:
    for bad in (
        {"bootstrap": 10},
        {"level": 1.5},
        {"fixed_e": -1.0},
        {"loss_noise": float("nan")},
        {"max_budget": 0.0},
    ):
        with pytest.raises(ValueError):
            FitConfig(**bad)
