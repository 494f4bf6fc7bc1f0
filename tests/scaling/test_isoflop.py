"""Isoflop minima: the vertex of a parabola in log N, with a fallback and flags, and clear errors for thin budgets."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.errors import TootsieError
from tootsie.scaling.isoflop import describe, group_runs, residual_noise, vertices
from tootsie.scaling.runs import RunRecord


def _runs(compute: float, params: list[float], losses: list[float]) -> list[RunRecord]:
    return [
        RunRecord(
            {"compute": compute, "params": n, "tokens": compute / (6 * n), "loss": loss}, f"runs.jsonl:{i + 1}", f"r{i}"
        )
        for i, (n, loss) in enumerate(zip(params, losses))
    ]


@settings(max_examples=30, deadline=None)
@given(st.floats(4.0, 20.0), st.floats(0.05, 2.0), st.floats(1.0, 5.0))
def test_vertex_of_an_exact_parabola(log_opt: float, curvature: float, floor: float) -> None:
    params = np.exp(log_opt + np.array([-1.0, -0.3, 0.4, 1.2]))
    losses = floor + curvature * (np.log(params) - log_opt) ** 2
    group = group_runs(_runs(1e15, list(params), list(losses)))[0]
    vertex = vertices(group, group.losses[None, :])
    assert np.log(np.exp(vertex.log_params[0])) == pytest.approx(log_opt, abs=1e-6)
    assert vertex.loss[0] == pytest.approx(floor, abs=1e-8) and vertex.quadratic[0]
    # Tokens follow C / 6N at the optimum, read off the line through the runs.
    assert np.exp(vertex.log_tokens[0]) == pytest.approx(1e15 / (6 * np.exp(log_opt)), rel=1e-6)
    assert describe(group, vertex) == []


def test_fewer_than_three_sizes_names_the_budget_and_its_runs() -> None:
    runs = _runs(1e12, [1e5, 2e5, 4e5], [3.0, 2.9, 3.1]) + _runs(2e12, [1e5, 1e5, 2e5], [2.9, 2.91, 2.8])
    with pytest.raises(
        TootsieError,
        match=(
            r"budget 2e\+12 FLOPs has 3 run\(s\) at 2 distinct model size\(s\) "
            r"\(runs.jsonl:1 \(r0\), .*at least 3 sizes"
        ),
    ):
        group_runs(runs)


def test_budgets_group_in_order_despite_float_noise() -> None:
    runs = _runs(2e12, [1, 2, 3], [3, 2, 3]) + _runs(1e12 * (1 + 1e-9), [1, 2, 3], [4, 3, 4]) + _runs(1e12, [4], [4.5])
    groups = group_runs(runs)
    assert [g.compute for g in groups] == [1e12, 2e12] and len(groups[0].runs) == 4


def test_downward_parabola_falls_back_to_the_lowest_run_and_says_so() -> None:
    group = group_runs(_runs(1e12, [1e5, 2e5, 4e5], [3.0, 3.1, 2.95]))[0]
    vertex = vertices(group, group.losses[None, :])
    assert not vertex.quadratic[0] and vertex.loss[0] == 2.95 and np.exp(vertex.log_params[0]) == pytest.approx(4e5)
    assert "opens downwards" in describe(group, vertex)[0] and "runs.jsonl:3 (r2)" in describe(group, vertex)[0]


def test_a_minimum_outside_the_sampled_sizes_is_flagged_and_clamped() -> None:
    params = [1e5, 2e5, 4e5]
    group = group_runs(_runs(1e12, params, [3.0 + 0.01 * (np.log(n) - np.log(1e8)) ** 2 for n in params]))[0]
    vertex = vertices(group, group.losses[None, :])
    assert vertex.clamped[0] and np.exp(vertex.log_params[0]) == pytest.approx(4e5 * 4, rel=1e-6)
    assert "clamped" in describe(group, vertex)[0]


def test_replicates_match_one_by_one_and_noise_pools_residuals() -> None:
    rng = np.random.default_rng(0)
    params = list(np.geomspace(1e5, 1e7, 6))
    group = group_runs(_runs(1e12, params, [3 + 0.1 * (np.log(n) - 13) ** 2 for n in params]))[0]
    replicates = group.losses[None, :] + 0.01 * rng.standard_normal((5, 6))
    together = vertices(group, replicates)
    for i in range(5):
        alone = vertices(group, replicates[i : i + 1])
        assert alone.loss[0] == pytest.approx(together.loss[i]) and alone.log_params[0] == pytest.approx(
            together.log_params[i]
        )
    sigma, dof = residual_noise([group_runs(_runs(1e12, params, list(replicates[0])))[0]])
    assert dof == 3 and 0.002 < sigma < 0.03
