"""The Marin 8B recipe: tables equal the seeds', step boundaries follow the token boundaries, settings per phase."""

from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tootsie.data.permutation import LinearPermutationConfig
from tootsie.models.presets import PRESETS
from tootsie.recipes.marin import tables_8b as t
from tootsie.recipes.marin import tables_32b as marin_32b_tables
from tootsie.recipes.mix_table import MixTable
from tootsie.train.config import TrainConfig

from .helpers import load_experiment_module, needs_seeds, number, seed_table

OUTLINE = "paper-outline-marin-8b-32b.md"
Mi = 2**20


@pytest.fixture(scope="module")
def experiment() -> ModuleType:
    return load_experiment_module("marin_8b")


@pytest.fixture(scope="module")
def configs(experiment: ModuleType) -> dict[str, TrainConfig]:
    return {step.name.split("/")[1]: step.config for step in experiment.STEPS}


@pytest.fixture(scope="module")
def plan(experiment: ModuleType) -> dict[str, Any]:
    return experiment.PLAN()


@pytest.mark.parametrize("table", [t.KESTREL_MIX, t.JELLYFISH_MIX, t.PHOENIX_MIX, t.SPOONBILL_MIX, t.STARLING_MIX])
def test_tables_sum_to_100_percent_and_weights_to_one(table: MixTable) -> None:
    assert table.total_percent == pytest.approx(100.0, abs=1e-9)
    assert sum(table.weights().values()) == pytest.approx(1.0, abs=1e-12)


@needs_seeds
@pytest.mark.parametrize(
    ("table", "section", "anchor"),
    [
        (t.KESTREL_MIX, "#### 6.4.2.1 Phase 1: Kestrel", "Mix (normalized)"),
        (t.JELLYFISH_MIX, "#### 6.4.2.4 Phase 3: Jellyfish", "Mix (normalized)"),
        (t.STARLING_MIX, "#### 6.4.2.7 Phase 5: Starling", "Mix (proportion + oversampling)"),
    ],
)
def test_tables_match_the_paper_outline(table: MixTable, section: str, anchor: str) -> None:
    seed = seed_table(OUTLINE, section, anchor)
    assert [(row.display, row.percent) for row in table.rows] == [(cells[0], number(cells[1])) for cells in seed]
    if len(seed[0]) == 3:
        assert [t.STARLING_OVERSAMPLING[row.component] for row in table.rows] == [number(cells[2]) for cells in seed]


def test_derived_tables() -> None:
    # Phoenix = the 32B pretraining mix ("Mirrors our 8B Phoenix data mix");
    # Spoonbill = Jellyfish + Tulu v3 0.3 % + FLAN 1 %.
    assert t.PHOENIX_MIX.rows == marin_32b_tables.PRETRAINING_MIX.rows
    spoonbill, jellyfish = t.SPOONBILL_MIX.percents(), t.JELLYFISH_MIX.percents()
    assert (spoonbill["tulu_v3"], spoonbill["dolmino/flan"]) == (0.3, 1.0)
    assert {name: spoonbill[name] for name in jellyfish} == pytest.approx(
        {name: share * 0.987 for name, share in jellyfish.items()}
    )


def test_step_boundaries_follow_the_token_boundaries(plan: dict[str, Any]) -> None:
    bounds = {p["name"]: (p["start_step"], p["end_step"]) for p in plan["phases"]}
    assert bounds == {
        "kestrel": (0, 660_000),
        "ocelot": (660_000, 740_407),
        "jellyfish": (740_407, 819_907),
        "phoenix": (819_907, 1_322_149),
        "raccoon": (819_907, 827_854),
        "spoonbill": (819_907, 827_854),
        "spoonbill-zloss": (819_907, 827_854),
        "starling": (1_322_149, 1_402_019),
    }
    tokens = {p["name"]: p["tokens"] for p in plan["phases"]}
    cumulative = np.cumsum([tokens[name] for name in ("kestrel", "ocelot", "jellyfish", "phoenix", "starling")]) / 1e12
    # Seeds: batch increase at ~2.77T, Ocelot to 3.78T, Jellyfish to 4.78T, Phoenix to 11.1T;
    # then Starling's 1.34T cooldown.
    assert [round(x, 2) for x in cumulative[:4]] == [2.77, 3.78, 4.78, 11.10]
    assert tokens["jellyfish"] == 79_500 * 12 * Mi and round(tokens["jellyfish"] / 1e12, 3) == 1.000
    assert round(tokens["starling"] / 1e12, 2) == 1.34 and round(tokens["raccoon"] / 1e9) == 100
    assert plan["total_tokens"] == round(cumulative[-1] * 1e12) and plan["final_artifact"] == "starling"
    assert [p["name"] for p in plan["phases"] if not p["in_final_artifact"]] == [
        "raccoon",
        "spoonbill",
        "spoonbill-zloss",
    ]


def test_batch_sizes(configs: dict[str, TrainConfig]) -> None:
    schedule = configs["starling"].data.batch_schedule
    assert schedule.stages == ((0, 1024), (660_000, 3072), (1_322_149, 4096))
    assert [schedule.batch_size(s) * 4096 for s in (0, 660_000, 1_322_149)] == [4 * Mi, 12 * Mi, 16 * Mi]
    assert configs["raccoon"].data.batch_schedule.stages == ((0, 1024), (660_000, 3072))


def test_learning_rates(configs: dict[str, TrainConfig]) -> None:
    def lr(name: str, step: int) -> float:
        return float(configs[name].schedule.build().learning_rate(step))

    kestrel = configs["kestrel"].schedule.build()
    # WSD-S: 1k-step decays every 10k steps to step 200k, then 2k-step decays every 20k.
    assert [kestrel.phase(s) for s in (8_999, 9_000, 217_999, 218_000)] == [
        "cycle-1/stable",
        "cycle-1/decay",
        "cycle-21/stable",
        "cycle-21/decay",
    ]
    assert lr("kestrel", 5_000) == pytest.approx(1e-3) and lr("kestrel", 9_999) == pytest.approx(1e-4)
    assert lr("ocelot", 660_000) == lr("ocelot", 740_406) == pytest.approx(1.7e-3)
    assert lr("jellyfish", 819_906) == pytest.approx(1.7e-4, rel=1e-5)
    # Phoenix: 2,000-step linear re-warm 1.7e-4 → 1.7e-3, then hold.
    assert lr("phoenix", 820_906) == pytest.approx((1.7e-4 + 1.7e-3) / 2, rel=1e-4)
    assert lr("phoenix", 821_906) == lr("phoenix", 1_322_148) == pytest.approx(1.7e-3)
    assert lr("raccoon", 827_853) == pytest.approx(1.7e-5, rel=1e-5)
    assert lr("spoonbill", 827_853) == lr("spoonbill-zloss", 827_853) == pytest.approx(3e-5, rel=1e-5)
    assert lr("starling", 1_322_149) == pytest.approx(1.7e-3, rel=1e-4) and lr("starling", 1_402_018) == pytest.approx(
        1.7e-5, rel=1e-5
    )


def test_phoenix_interpolates_the_mixture_over_2000_steps(configs: dict[str, TrainConfig]) -> None:
    data = configs["phoenix"].data
    jellyfish, phoenix = data.weights_at(819_906), data.weights_at(821_906)
    names = data.component_names
    assert dict(zip(names, jellyfish)) == pytest.approx({n: t.JELLYFISH_MIX.weights().get(n, 0.0) for n in names})
    assert dict(zip(names, phoenix)) == pytest.approx({n: t.PHOENIX_MIX.weights().get(n, 0.0) for n in names})
    assert data.weights_at(820_906) == pytest.approx((jellyfish + phoenix) / 2)


def test_ema_z_loss_rope_and_lineage(experiment: ModuleType, configs: dict[str, TrainConfig]) -> None:
    assert configs["kestrel"].ema is None and configs["kestrel"].model == PRESETS["marin-8b"]
    parents = {
        "ocelot": "kestrel",
        "jellyfish": "ocelot",
        "phoenix": "jellyfish",
        "raccoon": "jellyfish",
        "spoonbill": "jellyfish",
        "spoonbill-zloss": "jellyfish",
        "starling": "phoenix",
    }
    steps = {step.name.split("/")[1]: step for step in experiment.STEPS}
    for name, parent in parents.items():
        config = configs[name]
        assert config.warm_start.checkpoint.step is steps[parent], name
        assert config.ema.beta == 0.995 and config.model == PRESETS["marin-8b-llama3-rope"], name
        assert config.z_loss_weight == (1e-4 if name in ("spoonbill-zloss", "starling") else 0.0), name
    for name, config in configs.items():
        assert (config.optimizer.weight_decay, config.optimizer.max_grad_norm, config.data.permutation) == (
            0.05,
            1.0,
            LinearPermutationConfig(),
        ), name
    assert dict(zip(configs["starling"].data.component_names, configs["starling"].data.weights_at(1_322_149)))[
        "dolmino/flan"
    ] == pytest.approx(0.03)
