"""Cached contamination: the fix gets a new cache path and the unfixed cache is caught.

Marin-style versioning serves the stale one.
"""

import gzip
import json
from pathlib import Path
from types import ModuleType

import pytest

from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.stats import STATS_FILE
from tootsie.executor import Status, Step, run_experiment
from tootsie.jsonfile import read_json
from tootsie.recipes.cases.contamination import (
    EVAL_FILE,
    TEST_FILE,
    MarinStyleBundleDocsConfig,
    MathBundleConfig,
    bundle_documents,
    write_math_bundle,
)

from .helpers import load_experiment_module

TEST_PROBLEMS = 40


@pytest.fixture(scope="module")
def experiment() -> ModuleType:
    return load_experiment_module("case_contamination")


def _texts(directory: Path) -> list[str]:
    return [
        json.loads(line)["text"]
        for line in gzip.decompress((directory / "docs-00000.jsonl.gz").read_bytes()).decode().splitlines()
    ]


def test_bundle_plants_the_eval_split_and_keeps_train_clean(tmp_path: Path) -> None:
    counts = write_math_bundle(MathBundleConfig(train_problems=300, test_problems=TEST_PROBLEMS, seed=3), str(tmp_path))
    eval_items = [json.loads(line) for line in (tmp_path / EVAL_FILE).read_text(encoding="utf-8").splitlines()]
    test_docs = [
        json.loads(line)["text"] for line in (tmp_path / "bundle" / TEST_FILE).read_text(encoding="utf-8").splitlines()
    ]
    train_docs = [
        json.loads(line)["text"]
        for line in (tmp_path / "bundle" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert counts == {"train": len(train_docs), "test": TEST_PROBLEMS} and len(train_docs) > 290
    assert all(item["question"] in doc for item, doc in zip(eval_items, test_docs, strict=True))
    assert not {item["question"] for item in eval_items} & {
        doc.split("\n")[0].removeprefix("Question: ") for doc in train_docs
    }


def test_the_fix_gets_a_new_cache_and_the_unfixed_cache_is_caught(experiment: ModuleType, tmp_path: Path) -> None:
    report = run_experiment(experiment.build_steps(train_problems=300, test_problems=TEST_PROBLEMS), tmp_path)
    assert report.ok
    analysis = next(Path(s.output_path) for s in report.steps if s.name == "case_contam/analysis")
    results = read_json(analysis / "results.json")
    unfixed, fixed = results["versions"]["unfixed"], results["versions"]["fixed"]
    assert unfixed["eval_items_matched"] == TEST_PROBLEMS and unfixed["contaminated_docs"] >= TEST_PROBLEMS
    assert fixed["eval_items_matched"] <= 1 and unfixed["docs"] - fixed["docs"] == TEST_PROBLEMS
    assert results["cache_paths_differ"] and unfixed["cache"] != fixed["cache"]
    assert results["hashes"]["tootsie"]["unfixed"] != results["hashes"]["tootsie"]["fixed"]
    assert results["marin_style_fix_keeps_the_path"] and (analysis / "figure.png").stat().st_size > 10_000


def test_marin_style_versioning_serves_the_stale_contaminated_output(tmp_path: Path) -> None:
    bundle = Step(
        "case_contam/bundle", write_math_bundle, MathBundleConfig(train_problems=200, test_problems=TEST_PROBLEMS)
    )
    stale = Step("case_contam/math-docs", bundle_documents, MarinStyleBundleDocsConfig(bundle.ref()))
    first = run_experiment([stale], tmp_path)
    fixed = Step(
        "case_contam/math-docs", bundle_documents, MarinStyleBundleDocsConfig(bundle.ref(), drop_files=(TEST_FILE,))
    )
    second = run_experiment([fixed], tmp_path)
    before, after = ({s.name: s for s in run.steps}["case_contam/math-docs"] for run in (first, second))
    # Same path, and the executor finds it finished: the "fix" never runs and the test items stay in the documents.
    assert after.output_path == before.output_path and after.status == Status.SUCCESS
    assert after.reason.startswith("skip")
    docs = Path(after.output_path)
    eval_file = next(Path(s.output_path) for s in second.steps if s.name == "case_contam/bundle") / EVAL_FILE
    questions = [json.loads(line)["question"] for line in eval_file.read_text(encoding="utf-8").splitlines()]
    assert (
        read_json(docs / STATS_FILE)["dropped"] == []
        and sum(any(q in text for q in questions) for text in _texts(docs)) == TEST_PROBLEMS
    )
    inline = EngineConfig(workers=1, progress=False)
    normalize(NormalizeConfig(inputs=(str(docs),), engine=inline), str(tmp_path / "normalized"))
    stats = decontaminate(
        DecontaminateConfig(
            input=str(tmp_path / "normalized"), eval_files=(str(eval_file),), eval_field="question", engine=inline
        ),
        str(tmp_path / "contam"),
    )
    assert stats["eval_items_matched"] == TEST_PROBLEMS
