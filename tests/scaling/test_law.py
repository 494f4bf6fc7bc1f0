"""L(C) fits (free and fixed E, bounded) and power laws recover exact laws, row by row and in bulk."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.scaling.law import at_bound, fit_law, fit_power

BUDGETS = np.geomspace(1e18, 1e21, 5)


def test_marin_fixed_e_law_is_recovered_and_predicts_1e23() -> None:
    losses = 1.6 + 95.18 * BUDGETS**-0.094
    fixed = fit_law(BUDGETS, losses[None, :], fixed_e=1.6)
    assert fixed.A[0] == pytest.approx(95.18, rel=1e-4) and fixed.alpha[0] == pytest.approx(0.094, rel=1e-5)
    assert fixed.predict(1e23)[0] == pytest.approx(2.2555, abs=1e-3)  # the weekly update's preregistered ~2.25
    free = fit_law(BUDGETS, losses[None, :])
    assert free.E[0] == pytest.approx(1.6, abs=1e-3) and free.alpha[0] == pytest.approx(0.094, rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.5, 3.0), st.floats(0.03, 0.5), st.floats(0.3, 3.0))
def test_exact_laws_are_recovered(e: float, alpha: float, gap: float) -> None:
    # A is set so that the first budget sits `gap` above E: the same shape at any scale.
    a = gap * BUDGETS[0] ** alpha
    fit = fit_law(BUDGETS, (e + a * BUDGETS**-alpha)[None, :])
    assert fit.alpha[0] == pytest.approx(alpha, rel=2e-3) and fit.E[0] == pytest.approx(e, abs=2e-3 * gap + 1e-6)
    fixed = fit_law(BUDGETS, (e + a * BUDGETS**-alpha)[None, :], fixed_e=e)
    assert fixed.A[0] == pytest.approx(a, rel=1e-3)


def test_free_asymptote_stays_physical() -> None:
    # Minima bending the "wrong" way (the pull that gave Marin a -0.1 asymptote) cannot push E below 0
    # or above the losses.
    losses = np.array([[3.0, 2.8, 2.55, 2.25, 1.9]])
    fit = fit_law(BUDGETS, losses)
    assert fit.E[0] == 0.0 and fit.A[0] > 0


def test_bulk_fits_match_one_by_one() -> None:
    rng = np.random.default_rng(1)
    losses = 1.7 + 400 * BUDGETS[None, :] ** -0.15 + 0.01 * rng.standard_normal((6, 5))
    bulk = fit_law(BUDGETS, losses)
    for row in range(6):
        alone = fit_law(BUDGETS, losses[row : row + 1])
        assert alone.alpha[0] == pytest.approx(bulk.alpha[row], rel=1e-6) and alone.E[0] == pytest.approx(
            bulk.E[row], abs=1e-9
        )


def test_flat_data_put_alpha_at_its_bound() -> None:
    assert at_bound(fit_law(BUDGETS, np.full((1, 5), 3.0) + np.array([0.0, 1e-4, -1e-4, 0.0, 1e-4])))
    assert not at_bound(fit_law(BUDGETS, (1.6 + 95.18 * BUDGETS**-0.094)[None, :]))


def test_power_law_in_log_space() -> None:
    fit = fit_power(BUDGETS, np.log(0.0862 * BUDGETS**0.5)[None, :])
    assert fit.exponent[0] == pytest.approx(0.5) and fit.coefficient[0] == pytest.approx(0.0862)
    assert fit.predict(1e22)[0] == pytest.approx(0.0862 * 1e11)
