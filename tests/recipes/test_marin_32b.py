"""The Marin 32B recipe: tables equal the retrospective's, and the plan's steps, tokens and settings are the run's."""

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tootsie.data.permutation import FeistelConfig, LinearPermutationConfig
from tootsie.errors import TootsieError
from tootsie.executor import StepRef
from tootsie.models.presets import PRESETS
from tootsie.recipes.components import UNSET
from tootsie.recipes.marin import tables_32b as t
from tootsie.recipes.mix_table import MixTable
from tootsie.train.config import TrainConfig
from tootsie.train.optimizer import AdamCConfig, AdamWConfig

from .helpers import SEEDS, load_experiment_module, needs_seeds, number, seed_table

RETRO = "marin-32b-retrospective.md"
NEMOTRON = [
    f"nemotron_cc/{bucket}"
    for bucket in ("medium", "hq_synth", "medium_low", "hq_actual", "medium_high", "low_actual", "low_synth")
]


@pytest.fixture(scope="module")
def experiment() -> ModuleType:
    return load_experiment_module("marin_32b")


@pytest.fixture(scope="module")
def configs(experiment: ModuleType) -> dict[str, TrainConfig]:
    return {step.name.split("/")[1]: step.config for step in experiment.STEPS}


@pytest.fixture(scope="module")
def plan(experiment: ModuleType) -> dict[str, Any]:
    return experiment.PLAN()


@pytest.mark.parametrize(
    ("table", "printed_total"),
    [(t.PRETRAINING_MIX, 100.00), (t.BISON_MIX, 100.02), (t.MANTIS_MIX, 100.04), (t.MANTIS_STACKV2_MIX, 100.04)],
)
def test_tables_sum_to_their_printed_totals_and_weights_to_one(table: MixTable, printed_total: float) -> None:
    # The seed's rounded shares sum to 100.02 % (Bison) and 100.04 % (Mantis); the stage weights are normalized.
    assert table.total_percent == pytest.approx(printed_total, abs=1e-9)
    assert sum(table.weights().values()) == pytest.approx(1.0, abs=1e-12)


@needs_seeds
@pytest.mark.parametrize(
    ("table", "anchors"),
    [
        (t.PRETRAINING_MIX, ("Pretraining mixture (normalized share):",)),
        (t.BISON_MIX, ("#### Attempt 1 — Bison Cooldown", "Cooldown mixture (normalized share):")),
        (t.MANTIS_MIX, ("#### Attempt 2 — Mantis Cooldown", "Cooldown mixture (normalized share):")),
    ],
)
def test_tables_match_the_retrospective(table: MixTable, anchors: tuple[str, ...]) -> None:
    seed = {name: number(share) for name, share in seed_table(RETRO, *anchors)}
    assert {row.display: row.percent for row in table.rows} == seed
    assert [row.display for row in table.rows] == list(seed)


@needs_seeds
def test_batch_schedule_matches_the_retrospective(configs: dict[str, TrainConfig]) -> None:
    seed = tuple(
        (int(number(start)), int(number(size))) for start, size in seed_table(RETRO, "Batch schedule (seq_len = 4096):")
    )
    assert t.BATCH_SCHEDULE == seed == ((0, 8192), (18_500, 7680), (21_010, 8192))
    for name, config in configs.items():
        assert config.data.batch_schedule.stages == seed, name
        assert config.data.seq_len == 4096


def test_phase_tokens_equal_the_retrospective(plan: dict[str, Any]) -> None:
    tokens = {phase["name"]: phase["tokens"] for phase in plan["phases"]}
    # 4096 × (18,500·8192 + 2,510·7680 + 58,990·8192); 80,000·8192·4096; 32,000·8192·4096.
    assert tokens == {
        "phase1": 2_679_090_708_480,
        "phase3": 2_684_354_560_000,
        "bison": 1_073_741_824_000,
        "mantis": 1_073_741_824_000,
    }
    assert [round(tokens[name] / 1e12, 3) for name in ("phase1", "phase3", "mantis")] == [2.679, 2.684, 1.074]
    assert plan["total_tokens"] == 6_437_187_092_480 and round(plan["total_tokens"] / 1e12, 3) == 6.437
    assert [phase["name"] for phase in plan["phases"] if phase["in_final_artifact"]] == ["phase1", "phase3", "mantis"]
    assert plan["final_artifact"] == "mantis"


@needs_seeds
def test_totals_equal_the_retrospective_headline(plan: dict[str, Any]) -> None:
    headline = (SEEDS / RETRO).read_text(encoding="utf-8").splitlines()[2]
    figures = [float(x) for x in re.findall(r"(\d+\.\d+)T", headline)]
    tokens = {phase["name"]: phase["tokens"] for phase in plan["phases"]}
    assert figures == [
        round(x / 1e12, 3) for x in (plan["total_tokens"], tokens["phase1"], tokens["phase3"], tokens["mantis"])
    ]


def test_phase_boundaries(plan: dict[str, Any]) -> None:
    steps = [
        (step["step"], step["start_step"], step["end_step"]) for phase in plan["phases"] for step in phase["steps"]
    ]
    assert steps == [
        ("marin_32b/phase1a", 0, 56_400),
        ("marin_32b/phase1b", 56_400, 72_233),
        ("marin_32b/phase1c", 72_233, 74_000),
        ("marin_32b/phase1d", 74_000, 80_000),
        ("marin_32b/phase3", 80_000, 160_000),
        ("marin_32b/bison", 160_000, 192_000),
        ("marin_32b/mantis", 160_000, 192_000),
    ]
    assert [(p["name"], p["start_step"], p["end_step"]) for p in plan["phases"]] == [
        ("phase1", 0, 80_000),
        ("phase3", 80_000, 160_000),
        ("bison", 160_000, 192_000),
        ("mantis", 160_000, 192_000),
    ]


def test_learning_rates(configs: dict[str, TrainConfig]) -> None:
    def lr(name: str, step: int) -> float:
        return float(configs[name].schedule.build().learning_rate(step))

    # Phase 1: AdamW 7e-4, warmup 1 % and decay 40 % of the assumed 192k-step plan:
    # warmup ends on step 1,919, no decay before 80k.
    assert lr("phase1a", 0) == pytest.approx(7e-4 / 1920, rel=1e-5)
    assert lr("phase1a", 1919) == lr("phase1d", 79_999) == pytest.approx(7e-4, rel=1e-6)
    # Phase 3: a 1,000-step re-warm from 0 at 80k, then the peak is held.
    assert lr("phase3", 80_000) == pytest.approx(7e-4 / 1000, rel=1e-5)
    assert lr("phase3", 80_999) == lr("phase3", 159_999) == pytest.approx(7e-4, rel=1e-6)
    # Phase 4: no warmup, linear decay over 160k → 192k (to the assumed 1 %).
    for name in ("bison", "mantis"):
        assert lr(name, 160_000) == pytest.approx(7e-4, rel=1e-4)
        assert lr(name, 175_999) == pytest.approx((7e-4 + 7e-6) / 2, rel=1e-4)
        assert lr(name, 191_999) == pytest.approx(7e-6, rel=1e-5)


def test_optimizers_and_stability_change_at_the_recorded_steps(configs: dict[str, TrainConfig]) -> None:
    assert configs["phase1a"].optimizer == AdamWConfig(weight_decay=0.05, max_grad_norm=1.0)
    for name in ("phase1b", "phase1c", "phase1d", "phase3"):
        assert configs[name].optimizer == AdamWConfig(weight_decay=0.05, max_grad_norm=0.2), name
    for name in ("bison", "mantis"):
        assert configs[name].optimizer == AdamCConfig(weight_decay=0.05, max_grad_norm=0.2), name
        assert configs[name].schedule.build().learning_rate.peak_lr == 7e-4, name  # AdamC's peak, read off the schedule
    guards = {
        name: (c.stability.clip_update_window, c.stability.clip_update_sigma, c.stability.skip_bad_steps)
        for name, c in configs.items()
    }
    assert guards["phase1a"][::2] == guards["phase1b"][::2] == (None, False)
    assert guards["phase1c"] == guards["phase3"] == guards["bison"] == guards["mantis"] == (128, 2.0, True)
    assert guards["phase1d"][::2] == (None, True)
    for name, config in configs.items():
        if config.stability.skip_bad_steps:
            assert (config.stability.skip_window, config.stability.skip_sigma) == (128, 2.0), name


def test_models_warm_starts_and_shared_settings(experiment: ModuleType, configs: dict[str, TrainConfig]) -> None:
    steps = {step.name.split("/")[1]: step for step in experiment.STEPS}
    parents = {
        "phase1b": "phase1a",
        "phase1c": "phase1b",
        "phase1d": "phase1c",
        "phase3": "phase1d",
        "bison": "phase3",
        "mantis": "phase3",
    }
    assert configs["phase1a"].warm_start is None
    for name, parent in parents.items():
        checkpoint = configs[name].warm_start.checkpoint
        assert isinstance(checkpoint, StepRef) and checkpoint.step is steps[parent], name
        assert configs[name].warm_start.add_qk_norm == (name == "phase3")
    for name, config in configs.items():
        assert config.model == PRESETS["marin-32b" if name.startswith("phase1") else "marin-32b-qk-norm"], name
        assert (config.ema.beta, config.z_loss_weight, config.compute_dtype) == (0.995, 1e-4, "bfloat16"), name
        assert config.data.permutation == (FeistelConfig() if name == "mantis" else LinearPermutationConfig()), name
        assert steps[name].fn is steps["phase1a"].fn


def test_cooldown_mixtures_and_the_174k_stackv2_addition(configs: dict[str, TrainConfig]) -> None:
    bison, mantis = configs["bison"].data, configs["mantis"].data
    assert [s.start_step for s in bison.stages] == [0, 160_000]
    assert [s.start_step for s in mantis.stages] == [0, 160_000, 174_000]
    names = mantis.component_names
    before, after = dict(zip(names, mantis.weights_at(173_999))), dict(zip(names, mantis.weights_at(174_000)))
    assert before["common_pile_stackv2_edu_filtered_python"] == 0.0
    assert after["common_pile_stackv2_edu_filtered_python"] == pytest.approx(1.59 / 100.04)
    # Only the high-quality part is renormalized: the Nemotron-CC share (68.07 of 100.04) is unchanged.
    assert (
        sum(after[n] for n in NEMOTRON)
        == pytest.approx(sum(before[n] for n in NEMOTRON))
        == pytest.approx(68.07 / 100.04)
    )
    assert before["megamath/web"] == pytest.approx(5.57 / 100.04) and after["megamath/web"] < before["megamath/web"]
    assert dict(zip(bison.component_names, bison.weights_at(160_000)))["all_math"] == pytest.approx(1.08 / 100.02)
    assert dict(zip(names, mantis.weights_at(159_999))) == pytest.approx(
        {n: t.PRETRAINING_MIX.weights().get(n, 0.0) for n in names}
    )


def test_plan_reports_flops_batches_and_mixtures(plan: dict[str, Any], configs: dict[str, TrainConfig]) -> None:
    for phase in plan["phases"]:
        assert sum(phase["mixture"].values()) == pytest.approx(1.0)
        for step in phase["steps"]:
            name = step["name"]
            assert step["model_flops"] == pytest.approx(configs[name].model.flops_per_token(4096) * step["tokens"])
            tokens = sum(
                b["tokens_per_step"] * (end - b["start_step"])
                for b, end in zip(
                    step["batch_schedule"], [b["start_step"] for b in step["batch_schedule"][1:]] + [step["end_step"]]
                )
            )
            assert tokens == step["tokens"], name
    assert plan["phases"][0]["mixture"] == t.PRETRAINING_MIX.weights()
    assert plan["phases"][3]["steps"][0]["mixture_stages"][1]["table"] == "mantis+stackv2-python"
    assert plan["total_model_flops"] == pytest.approx(
        sum(p["model_flops"] for p in plan["phases"] if p["in_final_artifact"])
    )
    # Same optimizer chain across the grad-clip change: every optimizer tensor carries over.
    assert plan["phases"][0]["steps"][1]["warm_start"] | {"from": None} == {
        "from": None,
        "add_qk_norm": False,
        "moments_carried": True,
        "optimizer_state_fresh": [],
    }
    # Turning on update clipping and skip-bad-steps at 72,233 adds their statistics; Adam's moments still carry.
    phase1c = plan["phases"][0]["steps"][2]["warm_start"]
    assert phase1c["moments_carried"] is True and phase1c["optimizer_state_fresh"]
    # AdamW -> AdamC (Bison, Mantis): moments carry, only AdamC's own statistics start fresh.
    assert all(step["warm_start"]["moments_carried"] for phase in plan["phases"][2:] for step in phase["steps"][:1])


def test_dry_run_needs_no_paths_and_a_real_run_names_the_missing_ones(
    experiment: ModuleType, configs: dict[str, TrainConfig], plan: dict[str, Any], tmp_path: Path
) -> None:
    assert set(configs["phase1a"].data.caches.values()) == {UNSET}
    assert plan["missing_components"] == sorted(plan["components"]) and plan["components"]["all_math"] is None
    step = experiment.STEPS[0]
    with pytest.raises(
        TootsieError,
        match=r"9 mixture component\(s\) have no token cache: .*'nemotron_cc/medium': '<unset>'.*TOOTSIE_COMPONENTS",
    ):
        step.fn(step.config, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_components_file_points_caches_at_the_user_paths(
    experiment: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "caches" / "starcoder").mkdir(parents=True)
    mapping = tmp_path / "components.yaml"
    mapping.write_text("starcoderdata: caches/starcoder\nproofpile_2: gs://bucket/proofpile\n", encoding="utf-8")
    monkeypatch.setenv("TOOTSIE_COMPONENTS", str(mapping))
    steps = experiment.build_steps()
    caches = steps["phase1a"].config.data.caches
    assert (
        caches["starcoderdata"] == str(tmp_path / "caches" / "starcoder")
        and caches["proofpile_2"] == "gs://bucket/proofpile"
    )
    assert caches["nemotron_cc/medium"] == UNSET
    with pytest.raises(TootsieError, match=r"7 mixture component\(s\)") as error:
        steps["phase1a"].fn(steps["phase1a"].config, str(tmp_path / "out"))
    assert "starcoderdata" not in str(error.value) and "nemotron_cc/low_synth" in str(error.value)
