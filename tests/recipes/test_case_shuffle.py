"""LCG vs Feistel on an ordered corpus: the poor-seed search, the batch-composition drift, the train-vs-eval statistic.

The training runs of the case study take minutes (experiments/case_lcg_vs_feistel.py, numbers in
docs/case-studies.md); these tests check the mechanism on the data stream itself, which needs no training.
"""

from math import gcd
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.data.permutation import LinearPermutation
from tootsie.jsonfile import read_json
from tootsie.recipes.cases.common import trailing_mean
from tootsie.recipes.cases.shuffle import (
    SEED_FILE,
    SeedSearchConfig,
    band_drift,
    batch_composition,
    explained_by_eval,
    find_poor_lcg_seed,
    lcg_draw,
    region_of_sequences,
)
from tootsie.recipes.tiny.data import ConcatCachesConfig, concatenate_caches

STEPS = 100


@pytest.fixture(scope="module")
def ordered(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two kinds stored one after another: 120k tokens of ids 0..31, then 120k of ids 32..63 (3,750 sequences of 64)."""
    from tootsie.datakit.token_cache import TokenCacheWriter

    root = tmp_path_factory.mktemp("ordered")
    rng = np.random.default_rng(0)
    parts = []
    for index in range(2):
        writer = TokenCacheWriter(root / f"part{index}", vocab_size=64, ledger_extra={})
        for _ in range(100):
            writer.append(rng.integers(32 * index, 32 * index + 32, 1200))
        writer.close()
        parts.append(str(root / f"part{index}"))
    concatenate_caches(ConcatCachesConfig(tuple(parts)), str(root / "ordered"))
    return str(root / "ordered")


@settings(max_examples=200, deadline=None)
@given(length=st.integers(1000, 10**7), bands=st.integers(1, 6), data=st.data())
def test_band_drift_recovers_the_offset_from_the_band_lattice(length: int, bands: int, data: st.DataObject) -> None:
    p = data.draw(st.integers(0, bands).filter(lambda p: gcd(p, bands) == 1))
    drift = data.draw(st.integers(-length // (4 * bands), length // (4 * bands)))
    a = round(p * length / bands) + drift
    if not 0 < a < length:
        return
    assert band_drift(a, length, bands) == pytest.approx(a - p * length / bands)


def test_band_drift_refuses_strides_with_fewer_bands() -> None:
    assert band_drift(5000, 10_000, 4) is None  # a = N/2: two bands, not four
    assert band_drift(12, 10_000, 1) == 12 and band_drift(9_990, 10_000, 1) == -10


def test_lcg_draw_reads_the_permutation_the_mixture_uses(ordered: str) -> None:
    a, b, length = lcg_draw(ordered, seed=7)
    assert length == 3750 and gcd(a, length) == 1
    from tootsie.data.mixture import MixtureDataset
    from tootsie.recipes.cases.common import mixture
    from tootsie.recipes.cases.shuffle import ORDERED

    dataset = MixtureDataset(mixture({ORDERED: ordered}, {ORDERED: 1.0}, seed=7, permutation="linear"))
    indices = np.arange(512)
    _, draws = dataset.draws(indices)
    _, local = dataset.sequence_sources(indices)
    assert np.array_equal(local, LinearPermutation(length, a, b)(draws))


def test_a_poor_seed_makes_the_batch_composition_drift_and_feistel_does_not(ordered: str, tmp_path: Path) -> None:
    found = find_poor_lcg_seed(SeedSearchConfig(cache=ordered, steps=STEPS, bands=3), str(tmp_path))
    assert read_json(tmp_path / SEED_FILE) == found
    assert (
        1.0 <= found["sweeps"] <= 3.0
        and abs(found["multiplier"] * 3 / found["sequences"] - round(found["multiplier"] * 3 / found["sequences"]))
        < 0.01
    )
    smoothed = {}
    for permutation in ("linear", "feistel"):
        shares = batch_composition(ordered, found["seed"], permutation, STEPS, 2)
        assert np.allclose(shares.sum(axis=1), 1.0)
        smoothed[permutation] = trailing_mean(shares[:, 1], 10)[9:]
    # The LCG's three bands hold one or two stretches of each kind: the second kind's share wanders between
    # about 1/3 and 2/3, slowly; the Feistel stream's share only has batch noise, which a 10-step mean averages away.
    assert smoothed["linear"].std() > 3 * smoothed["feistel"].std()
    assert smoothed["linear"].max() - smoothed["linear"].min() > 0.25 and 0.4 < smoothed["feistel"].mean() < 0.6
    assert region_of_sequences(ordered, np.array([0, 1874, 1875, 3749])).tolist() == [0, 0, 1, 1]


def test_seed_search_gives_up_with_a_teaching_error(ordered: str, tmp_path: Path) -> None:
    from tootsie.errors import TootsieError

    with pytest.raises(TootsieError, match="raise max_seed"):
        find_poor_lcg_seed(
            SeedSearchConfig(cache=ordered, steps=STEPS, bands=3, max_seed=1, min_sweeps=2.99, max_sweeps=3.0),
            str(tmp_path),
        )
    with pytest.raises(ValueError, match="min_sweeps < max_sweeps"):
        SeedSearchConfig(cache=ordered, steps=STEPS, min_sweeps=3.0, max_sweeps=1.0)


def test_explained_by_eval_separates_a_phase_shift_from_a_smooth_descent() -> None:
    steps = np.arange(300)
    eval_steps = np.arange(9, 300, 10)
    eval_bpb = 2.0 + 2.0 * np.exp(-eval_steps / 80)
    noise = np.random.default_rng(0).normal(0, 0.05, size=300)
    tracking = 1.3 * (2.0 + 2.0 * np.exp(-steps / 80)) + noise
    shifted = tracking + 0.6 * ((steps // 60) % 2)  # plateaus every 60 steps that eval does not share
    smooth = explained_by_eval(steps, tracking, eval_steps, eval_bpb, window=10, skip=50)
    phased = explained_by_eval(steps, shifted, eval_steps, eval_bpb, window=10, skip=50)
    assert smooth["r2"] > 0.99 and phased["r2"] < 0.8
    assert phased["residual_rms"] > 4 * smooth["residual_rms"] and smooth["points"] == phased["points"] == 25
