"""Critical batch size: per-budget parabolas in log B and a power law in C, recovered from a known law."""

import numpy as np
import pytest

from tootsie.errors import TootsieError
from tootsie.scaling.batch_size import BatchSizeConfig, batch_at, fit_batch_sizes
from tootsie.scaling.runs import RunRecord

TOLERANCE, CURVATURE, FLOOR = 0.01, 0.02, 2.5


def _runs(budgets: list[float], sizes: int = 5) -> list[RunRecord]:
    """Curves L = FLOOR + CURVATURE·ln²(B / B_opt) whose critical batch follows Marin's CBS = 1.87e-5·C^0.388."""
    runs = []
    ratio = np.exp(np.sqrt(TOLERANCE * FLOOR / CURVATURE))
    for compute in budgets:
        optimum = 1.87e-5 * compute**0.388 / ratio
        for batch in optimum * np.geomspace(0.25, 4, sizes):
            loss = FLOOR + CURVATURE * np.log(batch / optimum) ** 2
            runs.append(
                RunRecord(
                    {"compute": compute, "batch_size": float(batch), "loss": float(loss)}, f"b.jsonl:{len(runs) + 1}"
                )
            )
    return runs


def test_marin_critical_batch_law_is_recovered() -> None:
    result = fit_batch_sizes(_runs([1e18, 1e19, 1e20]), BatchSizeConfig(tolerance=TOLERANCE))
    assert result["critical"]["exponent"] == pytest.approx(0.388, rel=1e-6)
    assert result["critical"]["coefficient"] == pytest.approx(1.87e-5, rel=1e-5)
    assert result["optimal"]["exponent"] == pytest.approx(0.388, rel=1e-6)
    # ~15,500 sequences at 1e23, as projected in the weekly update.
    assert batch_at(result["critical"], 1e23) == pytest.approx(15_690, rel=0.01)
    assert result["warnings"] == []


def test_a_downward_curve_falls_back_to_the_runs_and_warns() -> None:
    runs = _runs([1e18, 1e19])
    runs[-3] = RunRecord({**runs[-3].values, "loss": 3.5}, runs[-3].source)  # the middle batch of 1e19 is now the worst
    result = fit_batch_sizes(runs, BatchSizeConfig())
    assert "opens downwards" in result["warnings"][0]


def test_too_few_batch_sizes_or_budgets() -> None:
    with pytest.raises(TootsieError, match=r"budget 1e\+19 FLOPs has runs at 2 distinct batch size"):
        fit_batch_sizes(_runs([1e18]) + _runs([1e19], sizes=2), BatchSizeConfig())
    with pytest.raises(TootsieError, match="needs batch sweeps at 2 or more budgets"):
        fit_batch_sizes(_runs([1e18]), BatchSizeConfig())
    with pytest.raises(ValueError, match="tolerance"):
        BatchSizeConfig(tolerance=0.0)
