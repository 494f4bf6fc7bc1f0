"""A real run of the 32B recipe's phase chain at a quarter of the tiny scale, on synthetic component caches.

Slow: one compile per phase.
"""

from pathlib import Path

import numpy as np
import pytest

from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.executor import Status, run_experiment
from tootsie.jsonfile import read_json
from tootsie.monitor.metrics_log import read_metrics
from tootsie.recipes.tiny.data import COMPONENT_KINDS, KINDS, TinyData
from tootsie.recipes.tiny.scale import tiny_recipe_steps, tiny_scale

from .helpers import load_experiment_module


@pytest.mark.slow
def test_quarter_tiny_32b_trains_every_phase_in_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    caches = {}
    for index, kind in enumerate(KINDS):
        writer = TokenCacheWriter(tmp_path / "caches" / kind, vocab_size=1024, ledger_extra={})
        for _ in range(20):
            writer.append(rng.integers(index * 100, index * 100 + 150, 100))
        writer.close()
        caches[kind] = str(tmp_path / "caches" / kind)
    data = TinyData(
        tokenizer="",
        train=caches,
        heldout=caches,
        components={name: caches[kind] for name, kind in COMPONENT_KINDS.items()},
    )
    recipe = load_experiment_module("marin_32b").RECIPE
    scale = tiny_scale(1 / 1600, 1 / 512)  # a quarter of the tiny recipe's steps
    steps, reports = tiny_recipe_steps(recipe, scale, None, data)
    report = run_experiment([*steps.values(), *reports], tmp_path / "out")
    assert report.ok, [(s.name, s.error) for s in report.steps if s.status != Status.SUCCESS]
    paths = {s.name: Path(s.output_path) for s in report.steps}
    for phase in recipe.phases:
        records = read_metrics(paths[f"marin_32b/{phase.name}"] / "metrics.jsonl").records
        # Each warm start continues the global step count: the phase trains exactly its scaled steps.
        assert [r["step"] for r in records] == list(range(scale.step(phase.start_step), scale.step(phase.end_step)))
        schedule = steps[phase.name].config.data.batch_schedule
        assert all(r["batch_size"] == schedule.batch_size(r["step"]) for r in records)
    phase1a = read_metrics(paths["marin_32b/phase1a"] / "metrics.jsonl").records
    assert {r["batch_size"] for r in phase1a} == {16, 15}  # 8192 / 7680 / 8192 sequences, scaled by 1/512
    mantis = read_metrics(paths["marin_32b/mantis"] / "metrics.jsonl").records
    schedule = steps["mantis"].config.schedule.build()
    assert (
        mantis[-1]["lr"] == pytest.approx(float(schedule.learning_rate(119)), rel=1e-5)
        and mantis[-1]["lr"] < 0.1 * mantis[0]["lr"]
    )  # logged on global steps
    summary = read_json(paths["marin_32b/report"] / "summary.json")
    assert set(summary["runs"]) == {"phase1a", "phase1b", "phase1c", "phase1d", "phase3", "mantis"}
    html = (paths["marin_32b/report"] / "report.html").read_text(encoding="utf-8")
    assert all(name in html for name in summary["runs"])
    assert set(read_json(paths["marin_32b/report-branches"] / "summary.json")["runs"]) == {"bison", "mantis"}
