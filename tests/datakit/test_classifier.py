"""The quality classifier: hashed features, a safe model file, held-out accuracy on two real corpora, classify."""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from tests.datakit.real_corpora import license_texts, stdlib_docstrings, write_documents
from tootsie.datakit.classifier_model import MODEL_FILE, HashedLinearModel, load_classifier, save_classifier
from tootsie.datakit.classify import SCORE_COLUMN, ClassifyConfig, classify
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.hashed_features import FeatureConfig, featurize
from tootsie.datakit.stats import STATS_FILE, StageStats
from tootsie.datakit.train_classifier import TrainClassifierConfig, roc_auc, train_classifier, usable
from tootsie.errors import TootsieError
from tootsie.executor import Step, run_experiment
from tootsie.executor.manifest import read_manifest
from tootsie.executor.verify import verify_experiment

ENGINE = EngineConfig(workers=1, retries=0, progress=False)


def _per_doc(texts: list[str | None], config: FeatureConfig) -> list[list[int]]:
    features = featurize(texts, config)
    return [sorted(features.buckets[features.docs == d].tolist()) for d in range(len(texts))]


def test_features_are_words_punctuation_and_bigrams_within_a_document() -> None:
    config = FeatureConfig(bucket_bits=20)
    features = featurize(["Hello, world!", "", None, " a  b ", "x"], config)
    # hello , world ! + 3 bigrams; nothing for "" or None; a b + "a b"; x
    assert features.counts.tolist() == [7, 0, 0, 3, 1]
    assert features.buckets.min() >= 0 and features.buckets.max() < config.buckets
    alone = _per_doc(["Hello, world!"], config) + _per_doc(["x"], config)
    together = _per_doc(["Hello, world!", "x"], config)
    assert together == alone  # no bigram spans two documents, and hashing does not depend on the batch
    assert _per_doc(["HELLO ,world !"], config) == alone[:1]  # lower-cased, punctuation split off
    assert _per_doc(["a b"], FeatureConfig(bigrams=False))[0] != _per_doc(["a b"], config)[0]


def test_roc_auc_matches_counting_pairs_with_ties() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 60).astype(np.float64)
    labels = rng.integers(0, 2, 60).astype(np.int32)
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert roc_auc(scores, labels) == pytest.approx(pairs / (len(pos) * len(neg)))


def test_usable_drops_repeats_and_texts_in_both_classes() -> None:
    stats = StageStats()
    keep = usable(["a", "a", "b", "c", "c"], [1, 1, 1, 1, 0], stats)
    assert keep.tolist() == [True, False, True, False, False]
    assert stats.to_json() == {"total": 5, "kept": 2, "dropped": {"conflicting_label": 2, "duplicate": 1}}


def test_model_file_round_trips_and_foreign_files_are_refused(tmp_path) -> None:
    config = FeatureConfig(bucket_bits=10)
    model = HashedLinearModel(config, np.random.default_rng(0).normal(size=1024).astype(np.float32), -0.25)
    save_classifier(model, tmp_path / MODEL_FILE)
    loaded = load_classifier(tmp_path)  # the directory or the file
    assert loaded.features == config and loaded.bias == -0.25
    np.testing.assert_array_equal(loaded.weights, model.weights)
    texts = ["some words here", "other words"]
    np.testing.assert_array_equal(loaded.scores(texts), model.scores(texts))
    assert HashedLinearModel(config, np.zeros(1024, np.float32), 0.0).scores(texts).tolist() == [0.5, 0.5]
    # The same model is the same bytes: safetensors orders a several-key header at random on every save.
    saved = set()
    for attempt in range(6):
        save_classifier(model, tmp_path / f"again-{attempt}.safetensors", extra={"positive": "p", "negative": "n"})
        saved.add((tmp_path / f"again-{attempt}.safetensors").read_bytes())
    assert len(saved) == 1

    save_file({"weights": np.zeros(1024, np.float32)}, str(tmp_path / "other.safetensors"), metadata={"format": "x"})
    with pytest.raises(TootsieError, match="format 'x'"):
        load_classifier(tmp_path / "other.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(TootsieError, match="not a safetensors file"):
        load_classifier(tmp_path / "junk.safetensors")
    with pytest.raises(TootsieError, match="not found"):
        load_classifier(tmp_path / "missing")


@pytest.mark.timeout(120)
def test_separates_stdlib_docstrings_from_license_texts_on_heldout_documents(tmp_path) -> None:
    """Must show (issue 17): two real corpora, held-out accuracy >= 0.95; training is deterministic."""
    licenses = license_texts()
    docstrings = stdlib_docstrings(len(licenses))
    assert len(licenses) >= 100 and len(docstrings) == len(licenses), (len(licenses), len(docstrings))
    positive = write_documents(docstrings, tmp_path / "docstrings", per_shard=100)
    negative = write_documents(licenses, tmp_path / "licenses", per_shard=100)
    config = TrainClassifierConfig(positive=(str(positive),), negative=(str(negative),), heldout_fraction=0.3)
    stats = train_classifier(config, str(tmp_path / "model"))
    print(json.dumps(stats))
    assert stats["heldout_docs"] >= 60 and stats["train_docs"] + stats["heldout_docs"] == stats["kept"]
    assert stats["accuracy"] >= 0.95 and stats["auc"] >= 0.98
    assert json.loads((tmp_path / "model" / STATS_FILE).read_text())["accuracy"] == stats["accuracy"]

    again = train_classifier(config, str(tmp_path / "again"))
    assert again["accuracy"] == stats["accuracy"]
    np.testing.assert_array_equal(
        load_classifier(tmp_path / "again").weights, load_classifier(tmp_path / "model").weights
    )
    reseeded = train_classifier(
        TrainClassifierConfig(positive=config.positive, negative=config.negative, heldout_fraction=0.3, seed=1),
        str(tmp_path / "reseeded"),
    )
    assert reseeded["accuracy"] >= 0.95

    scored = classify(
        ClassifyConfig(input=str(negative), model=str(tmp_path / "model"), engine=ENGINE), str(tmp_path / "attr")
    )
    assert scored["docs"] == len(licenses) and scored["shards"] == 3 and scored["docs_per_second"] > 0
    assert json.loads((tmp_path / "attr" / "timings.json").read_text())["docs_per_second"] > 0
    assert scored["mean_score"] < 0.3
    model = load_classifier(tmp_path / "model")
    for shard in sorted(negative.glob("part-*.parquet")):
        docs = pq.read_table(shard)
        attributes = pq.read_table(tmp_path / "attr" / shard.name)
        assert attributes.column("id").to_pylist() == docs.column("id").to_pylist()
        np.testing.assert_allclose(
            attributes.column(SCORE_COLUMN).to_numpy(), model.scores(docs.column("text").to_pylist()), rtol=1e-6
        )


def test_training_refuses_a_split_without_both_classes(tmp_path) -> None:
    positive = write_documents(["only one positive document about parsing"], tmp_path / "pos")
    negative = write_documents([f"negative number {i}" for i in range(5)], tmp_path / "neg")
    config = TrainClassifierConfig(positive=(str(positive),), negative=(str(negative),), steps=2)
    with pytest.raises(TootsieError, match="lacks a class"):
        train_classifier(config, str(tmp_path / "model"))
    with pytest.raises(ValueError, match="both classes"):
        TrainClassifierConfig(positive=(), negative=(str(negative),))


@dataclass(frozen=True)
class GoodDocsConfig:
    """How many good documents the step writes."""

    docs: int = 30


def write_good_docs(config: GoodDocsConfig, output_path: str) -> None:
    """The positive class, as a step's output (its path depends on the prefix)."""
    write_documents(
        [f"The function returns the parsed value of line {i}." for i in range(config.docs)], Path(output_path)
    )


def test_train_and_classify_run_as_executor_steps_and_verify_under_another_prefix(tmp_path) -> None:
    good = Step("quality/good", write_good_docs, GoodDocsConfig())
    bad = write_documents([f"buy now click here offer {i} win win" for i in range(30)], tmp_path / "b")
    trained = Step(
        "quality/classifier",
        train_classifier,
        TrainClassifierConfig(positive=(good.ref(),), negative=(str(bad),), heldout_fraction=0.3, steps=20),
    )
    scored = Step("quality/scores", classify, ClassifyConfig(input=str(bad), model=trained.ref(), engine=ENGINE))
    prefix = tmp_path / "prefix"
    first = run_experiment([scored], prefix)
    assert [str(s.status) for s in first.steps] == ["SUCCESS"] * 3
    attributes = pq.read_table(Path(first.steps[2].output_path) / "part-00000.parquet")
    assert attributes.num_rows == 30 and float(np.max(attributes.column(SCORE_COLUMN).to_numpy())) < 0.5
    again = run_experiment([scored], prefix)
    assert all(s.reason.startswith("skip") for s in again.steps)
    model_dir, scores_dir = (Path(step.output_path) for step in first.steps[1:])
    stats = json.loads((scores_dir / STATS_FILE).read_text())
    assert stats["model"] == f"{model_dir.relative_to(prefix)}/{MODEL_FILE}"
    assert stats["model_sha256"] == hashlib.sha256((model_dir / MODEL_FILE).read_bytes()).hexdigest()
    for directory in (model_dir, scores_dir):
        manifest = read_manifest(str(directory))
        assert [e.path for e in manifest.files if e.volatile] == ["timings.json"] and STATS_FILE in manifest.compared
        assert not {"seconds", "docs_per_second", "train_seconds"} & set(
            json.loads((directory / STATS_FILE).read_text())
        )

    report = verify_experiment([scored], prefix, scratch=tmp_path / "scratch", keep=True)
    verdicts = {verdict.name: verdict for verdict in report.steps}
    assert verdicts["quality/scores"].identical and verdicts["quality/scores"].volatile == ("timings.json",)
    assert verdicts["quality/classifier"].differing == ()
    rerun = Path(verdicts["quality/classifier"].rerun_path)
    assert json.loads((rerun / STATS_FILE).read_text()) == json.loads((model_dir / STATS_FILE).read_text())
    with safe_open(str(rerun / MODEL_FILE), "np") as fresh, safe_open(str(model_dir / MODEL_FILE), "np") as recorded:
        assert fresh.metadata() == recorded.metadata()  # the positive step named as `quality/good-<hash>`
        assert json.loads(fresh.metadata()["tootsie"])["positive"] == repr(
            (str(Path(first.steps[0].output_path).relative_to(prefix)),)
        )
        for name in ("weights", "bias"):
            np.testing.assert_array_equal(fresh.get_tensor(name), recorded.get_tensor(name))
