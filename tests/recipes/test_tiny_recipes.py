"""The tiny scale: stand-ins for every component, the scaled phase structure, the --scale flag, and the data steps."""

import gzip
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tootsie.cli.main import main
from tootsie.corpora.stdlib_source import StdlibSourceConfig
from tootsie.datakit.stats import STATS_FILE
from tootsie.datakit.token_cache import open_token_cache
from tootsie.errors import TootsieError
from tootsie.executor import StepRef
from tootsie.models.presets import PRESETS
from tootsie.recipes.scale import FULL
from tootsie.recipes.tiny.data import (
    COMPONENT_KINDS,
    KINDS,
    ComponentSlicesConfig,
    ConcatCachesConfig,
    TinyCorpusConfig,
    build_tiny_corpus,
    concatenate_caches,
    slice_components,
)
from tootsie.recipes.tiny.scale import SCALE_ENV, TINY_SEQ_LEN, selected_scale

from .helpers import REPO, load_experiment_module

RECIPES = {"marin_8b": (1 / 2000, 1 / 128), "marin_32b": (1 / 400, 1 / 256)}


def load_tiny(name: str) -> ModuleType:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SCALE_ENV, "tiny")
        return load_experiment_module(name)


@pytest.fixture(scope="module", params=sorted(RECIPES))
def recipes(request: pytest.FixtureRequest) -> tuple[str, ModuleType, ModuleType]:
    return request.param, load_experiment_module(request.param), load_tiny(request.param)


def test_every_recipe_component_has_a_stand_in(recipes: tuple[str, ModuleType, ModuleType]) -> None:
    _, full, _ = recipes
    used = {name for phase in full.RECIPE.phases for stage in phase.mixture for name in stage.weights}
    assert used <= set(COMPONENT_KINDS) and set(COMPONENT_KINDS.values()) == set(KINDS)


def test_tiny_keeps_the_phase_structure_and_weights(recipes: tuple[str, ModuleType, ModuleType]) -> None:
    name, full, tiny = recipes
    step_factor, batch_factor = RECIPES[name]
    assert full.SCALE is FULL and tiny.SCALE is tiny.TINY
    full_steps = {step.name: step for step in full.STEPS}
    phases = {step.name: step for step in tiny.STEPS if step.name in full_steps}
    assert set(phases) == set(full_steps)
    for step_name, step in phases.items():
        big, small = full_steps[step_name].config, step.config
        assert small.num_steps == int(big.num_steps * step_factor + 0.5)
        assert [s.start_step for s in small.data.stages] == [
            int(s.start_step * step_factor + 0.5) for s in big.data.stages
        ]
        assert [s.weights for s in small.data.stages] == [s.weights for s in big.data.stages]
        assert [size for _, size in small.data.batch_schedule.stages] == [
            max(1, int(size * batch_factor + 0.5)) for _, size in big.data.batch_schedule.stages
        ]
        assert (small.data.seq_len, small.compute_dtype, small.model.hidden_dim) == (TINY_SEQ_LEN, "float32", 64)
        # The preset's kind survives the shrink: QK-norm and the Llama 3 RoPE settings stay where the recipe puts them.
        assert (small.model.qk_norm, small.model.rope_scaling) == (big.model.qk_norm, big.model.rope_scaling)
        assert all(
            isinstance(path, StepRef) and path.step.name == "tiny/components" for path in small.data.caches.values()
        )
        assert (
            small.eval is not None
            and set(small.eval.heldout) == set(KINDS)
            and small.eval.every_steps == tiny.TINY_EVAL_EVERY
        )
    reports = [step for step in tiny.STEPS if step.name.endswith(("/report", "/report-branches"))]
    chain = [phase.name for phase in tiny.RECIPE.artifact_phases()]
    assert list(reports[0].config.runs) == chain
    assert set(reports[1].config.runs) >= {phase.name for phase in tiny.RECIPE.phases if phase.name not in chain}


def test_tiny_plan_is_json_and_names_the_stand_ins(recipes: tuple[str, ModuleType, ModuleType]) -> None:
    _, _, tiny = recipes
    plan = tiny.PLAN()
    json.dumps(plan, allow_nan=False)
    assert plan["scale"] == "tiny" and plan["missing_components"] == []
    assert all(path.startswith("<tiny/components>/") for path in plan["components"].values())
    assert plan["total_tokens"] == sum(phase["tokens"] for phase in plan["phases"] if phase["in_final_artifact"])


def test_selected_scale_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    scales = {"full": FULL}
    monkeypatch.delenv(SCALE_ENV, raising=False)
    assert selected_scale(scales) is FULL
    monkeypatch.setenv(SCALE_ENV, "huge")
    with pytest.raises(TootsieError, match="'huge' is not a scale of this experiment"):
        selected_scale(scales)


def test_cli_scale_flag_builds_the_tiny_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SCALE_ENV, "full")  # restored after the test; the flag overwrites it
    assert (
        main(
            [
                "status",
                str(REPO / "experiments" / "marin_32b.py"),
                "--scale",
                "tiny",
                "--prefix",
                str(tmp_path),
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    names = [step["name"] for step in report["steps"]]
    assert (
        report["scale"] == "tiny"
        and "tiny/components" in names
        and names[-2:] == ["marin_32b/report", "marin_32b/report-branches"]
    )
    assert all(step["status"] == "NOT_STARTED" for step in report["steps"])


def test_slices_are_disjoint_and_cover_each_kind(make_cache) -> None:
    web = make_cache("web", [[i, i + 1] for i in range(0, 14, 2)])
    code = make_cache("code", [[40 + i] for i in range(3)])
    out = Path(web).parent / "sliced"
    counts = slice_components(
        ComponentSlicesConfig(caches={"web": web, "code": code}, components={"a": "web", "b": "web", "c": "code"}),
        str(out),
    )
    assert {name: c["docs"] for name, c in counts.items()} == {"a": 4, "b": 3, "c": 3}
    a, b = open_token_cache(out / "a"), open_token_cache(out / "b")
    assert [a.document(i).tolist() for i in range(a.num_docs)] == [[0, 1], [4, 5], [8, 9], [12, 13]]
    assert [b.document(i).tolist() for i in range(b.num_docs)] == [[2, 3], [6, 7], [10, 11]]
    with pytest.raises(TootsieError, match="fewer than its 4 components"):
        slice_components(
            ComponentSlicesConfig(caches={"code": code}, components={k: "code" for k in "wxyz"}), str(out / "again")
        )
    with pytest.raises(ValueError, match="have no cache"):
        ComponentSlicesConfig(caches={"code": code}, components={"a": "web"})


def test_concatenation_keeps_order_and_records_where_each_part_starts(make_cache) -> None:
    first = make_cache("first", [[1] * 5, [2] * 5, [3] * 5])
    second = make_cache("second", [[7] * 4, [8] * 4])
    out = Path(first).parent / "joined"
    concatenate_caches(ConcatCachesConfig((first, second), tokens_each=8), str(out))
    joined = open_token_cache(out)
    assert joined.ledger["doc_starts"] == [0, 2, 4]
    assert np.asarray(joined.tokens[:]).tolist() == [1] * 5 + [2] * 5 + [7] * 4 + [8] * 4
    with pytest.raises(TootsieError, match="fewer than tokens_each"):
        concatenate_caches(ConcatCachesConfig((first, second), tokens_each=12), str(out.parent / "short"))


def test_tiny_corpus_writes_the_five_kinds(tmp_path: Path) -> None:
    stdlib = tmp_path / "lib"
    (stdlib / "pkg").mkdir(parents=True)
    (stdlib / "pkg" / "mod.py").write_text(
        '"""A module docstring that is long enough to count as prose for the web kind."""\nx = 1\n', encoding="utf-8"
    )
    config = TinyCorpusConfig(stdlib=StdlibSourceConfig(stdlib_dir=str(stdlib)), math_docs=3, qa_docs=2, seed=1)
    counts = build_tiny_corpus(config, str(tmp_path / "out"))
    assert (
        counts["code"] == 1
        and counts["web"] == 1
        and counts["math"] == 3
        and counts["qa"] == 2
        and counts["reference"] > 0
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([*KINDS, STATS_FILE])
    again = build_tiny_corpus(config, str(tmp_path / "again"))
    texts = [gzip.decompress((tmp_path / run / "math/docs-00000.jsonl.gz").read_bytes()) for run in ("out", "again")]
    assert again == counts and texts[0] == texts[1] and len(texts[0].splitlines()) == 3
    for kind in KINDS:
        header = (tmp_path / "out" / kind / "docs-00000.jsonl.gz").read_bytes()[:10]
        assert header[4:8] == bytes(4) and not header[3] & 0x08, (kind, header)  # no mtime, no FNAME (temp name)


def test_tiny_models_shrink_every_preset() -> None:
    from tootsie.recipes.tiny.scale import tiny_scale

    scale = tiny_scale(0.01, 0.01)
    for name, preset in PRESETS.items():
        model = scale.model(name)
        assert (model.hidden_dim, model.num_layers, model.qk_norm, model.rope_theta) == (
            64,
            2,
            preset.qk_norm,
            preset.rope_theta,
        )
