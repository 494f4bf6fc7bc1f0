"""The recipe machinery: derived tables, recipe validation, scales, the components file and the LR summary."""

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.errors import TootsieError
from tootsie.recipes.build import recipe_steps
from tootsie.recipes.components import load_components, missing_components
from tootsie.recipes.mix_table import MixRow, MixTable, mix_stage, rows, with_added
from tootsie.recipes.plan import lr_summary
from tootsie.recipes.recipe import Phase, Recipe
from tootsie.recipes.scale import FULL, Scale
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.stability import StabilityConfig

from .helpers import load_experiment_module

TABLE = MixTable("t", "test", rows(("a", 60.0), ("b", 40.0)))


def phase(name: str, start: int, end: int, parent: str | None = None, **fields: object) -> Phase:
    base = dict(
        retro_phase=name,
        model="tiny",
        schedule=WSDConfig(warmup_steps=1, decay_steps=1, total_steps=100),
        optimizer=AdamWConfig(),
        stability=StabilityConfig(clip_update_window=None, skip_bad_steps=False),
        ema=None,
        z_loss_weight=0.0,
        permutation="feistel",
    )
    root = dict(mixture=(mix_stage(0, TABLE),), batch_sizes=((0, 4),)) if parent is None else {}
    return Phase(name=name, start_step=start, end_step=end, parent=parent, **(base | root | fields))


@settings(max_examples=50, deadline=None)
@given(
    shares=st.lists(st.floats(2.0, 50.0), min_size=2, max_size=6),
    added=st.lists(st.floats(0.01, 0.5), min_size=1, max_size=3),
    data=st.data(),
)
def test_with_added_keeps_the_total_and_rescales_only_the_named_rows(
    shares: list[float], added: list[float], data: st.DataObject
) -> None:
    table = MixTable("x", "test", tuple(MixRow(f"c{i}", f"C{i}", s) for i, s in enumerate(shares)))
    rescale = data.draw(st.lists(st.sampled_from([r.component for r in table.rows]), min_size=1, unique=True))
    derived = with_added(
        table, "y", "derived", [MixRow(f"new{i}", f"N{i}", s) for i, s in enumerate(added)], rescale=rescale
    )
    assert derived.total_percent == pytest.approx(table.total_percent)
    factor = None
    for row in table.rows:
        new = derived.percents()[row.component]
        if row.component in rescale:
            factor = factor or new / row.percent
            assert new / row.percent == pytest.approx(factor)
        else:
            assert new == row.percent
    assert [derived.percents()[f"new{i}"] for i in range(len(added))] == added


def test_table_and_row_validation() -> None:
    with pytest.raises(ValueError, match="more than once"):
        MixTable("t", "s", rows(("a", 50.0), ("a", 50.0)))
    with pytest.raises(ValueError, match="percent must be in"):
        MixRow("a", "A", 0.0)
    with pytest.raises(ValueError, match="smaller than the rescaled budget"):
        with_added(TABLE, "u", "s", [MixRow("c", "C", 40.0)], rescale=["b"])
    assert with_added(TABLE, "u", "s", [MixRow("c", "C", 10.0)]).percents() == pytest.approx(
        {"a": 54.0, "b": 36.0, "c": 10.0}
    )


@pytest.mark.parametrize(
    ("phases", "final", "message"),
    [
        ((phase("a", 0, 10), phase("b", 12, 20, parent="a")), "b", "starts at 12 but its parent 'a' ends at 10"),
        ((phase("a", 0, 10), phase("b", 10, 20, parent="z")), "b", "names parent 'z'"),
        ((phase("a", 0, 10), phase("a", 0, 10)), "a", "appears twice"),
        ((phase("a", 0, 10),), "z", "final='z'"),
        ((phase("a", 0, 10, mixture=()),), "a", "exactly one root phase"),
    ],
)
def test_recipe_validation(phases: tuple[Phase, ...], final: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Recipe(name="r", seq_len=8, phases=phases, final=final)


def test_phase_validation() -> None:
    with pytest.raises(ValueError, match="lie outside its steps"):
        phase("a", 0, 10, mixture=(mix_stage(10, TABLE),))
    with pytest.raises(ValueError, match="not a preset"):
        phase("a", 0, 10, model="nope")
    with pytest.raises(
        ValueError,
        match=r"permutation 'fiestel' is not a registered kind; pick one of \['block', 'era', 'feistel', 'linear'\]",
    ):
        phase("a", 0, 10, permutation="fiestel")
    with pytest.raises(ValueError, match="exactly when it has no parent"):
        phase("a", 5, 10, mixture=(), batch_sizes=())


def test_a_phase_that_changes_no_data_continues_its_parents_stream() -> None:
    recipe = Recipe(
        name="r",
        seq_len=8,
        final="b",
        phases=(phase("a", 0, 10), phase("b", 10, 20, parent="a", optimizer=AdamWConfig(max_grad_norm=0.2))),
    )
    steps = recipe_steps(recipe, FULL, {"a": "/x/a"})
    assert steps["a"].config.data == replace(steps["b"].config.data)
    assert steps["b"].config.data.caches == {"a": "/x/a", "b": "<unset>"}


def test_a_table_stage_is_a_labeled_mixture_stage() -> None:
    stage = mix_stage(40, TABLE, transition_steps=5)
    assert (stage.start_step, stage.weights, stage.transition_steps, stage.name, stage.source) == (
        40,
        {"a": 0.6, "b": 0.4},
        5,
        "t",
        "test",
    )
    recipe = Recipe(name="r", seq_len=8, final="a", phases=(phase("a", 0, 100, mixture=(mix_stage(0, TABLE), stage)),))
    data = recipe_steps(recipe, Scale("half", step_factor=0.5), {})["a"].config.data
    assert [(s.start_step, s.transition_steps, s.name) for s in data.stages] == [(0, 0, "t"), (20, 3, "t")]


@pytest.mark.parametrize("name", ["marin_8b", "marin_32b"])
def test_a_scaled_down_recipe_builds_with_proportional_boundaries(name: str) -> None:
    experiment = load_experiment_module(name)
    small = Scale("small", step_factor=1e-3, seq_len=64, compute_dtype="float32")
    full, scaled = experiment.build_steps(FULL), experiment.build_steps(small)
    for phase_name, step in scaled.items():
        full_config, config = full[phase_name].config, step.config
        assert config.num_steps == int(full_config.num_steps * 1e-3 + 0.5)
        assert [s.start_step for s in config.data.stages] == [
            int(s.start_step * 1e-3 + 0.5) for s in full_config.data.stages
        ]
        assert [s.weights for s in config.data.stages] == [s.weights for s in full_config.data.stages]
        assert (config.data.seq_len, config.compute_dtype, config.data.batch_schedule.batch_size(0)) == (
            64,
            "float32",
            full_config.data.batch_schedule.batch_size(0),
        )
    assert (
        full["phase3" if name == "marin_32b" else "phoenix"].config.schedule
        is experiment.RECIPE.phase("phase3" if name == "marin_32b" else "phoenix").schedule
    )


def test_scale_maps_schedules_batches_and_models() -> None:
    small = Scale("s", step_factor=0.01, batch_factor=0.25, models={"marin-8b": Scale().model("tiny")})
    assert small.schedule(WSDConfig(warmup_steps=150, decay_steps=2000, total_steps=10_000)) == WSDConfig(
        warmup_steps=2, decay_steps=20, total_steps=100
    )
    assert (small.batch(8192), small.batch(2), small.model("marin-8b").hidden_dim) == (2048, 1, 256)
    with pytest.raises(ValueError, match="not presets"):
        Scale("bad", models={"nope": Scale().model("tiny")})


def test_components_file(tmp_path: Path) -> None:
    (tmp_path / "caches" / "a").mkdir(parents=True)
    (tmp_path / "c.json").write_text('{"a": "caches/a", "b": "s3://bucket/b", "c": "/nowhere"}', encoding="utf-8")
    mapping = load_components(tmp_path / "c.json")
    assert mapping == {"a": str(tmp_path / "caches" / "a"), "b": "s3://bucket/b", "c": "/nowhere"}
    assert missing_components(mapping | {"d": "<unset>"}) == ["c", "d"]
    (tmp_path / "bad.yaml").write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(TootsieError, match="must map component names"):
        load_components(tmp_path / "bad.yaml")
    with pytest.raises(TootsieError, match="not found"):
        load_components(tmp_path / "missing.json")


def test_lr_summary_reads_the_schedule_over_a_phase() -> None:
    summary = lr_summary(WSDConfig(peak_lr=1.0, warmup_steps=10, decay_steps=20, total_steps=100), 50, 100)
    assert (
        summary["kind"],
        summary["lr_first"],
        summary["lr_last"],
        summary["phase_first"],
        summary["phase_last"],
    ) == ("wsd", 1.0, 0.1, "stable", "decay")
    assert [(s["phase"], s["start_step"], s["end_step"]) for s in summary["segments"]] == [
        ("stable", 10, 80),
        ("decay", 80, 100),
    ]
    past_the_end = lr_summary(WSDConfig(peak_lr=1.0, warmup_steps=10, decay_steps=20, total_steps=100), 90, 120)
    assert [s["phase"] for s in past_the_end["segments"]] == ["decay", "end"] and past_the_end["lr_last"] == 0.1
