"""`tootsie datakit train-classifier`, `classify` and consolidate's score flags keep their JSON contract."""

import json

from tests.datakit.real_corpora import write_documents
from tootsie.cli.main import main

GOOD = "The parser reads each line, checks its fields, and returns a record; errors name the line number."
BAD = "click here buy now free offer click here win win win limited offer buy buy now"


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_train_classify_and_keep_the_top_fraction(tmp_path, capsys) -> None:
    good = write_documents([f"{GOOD} Case {i}." for i in range(40)], tmp_path / "good")
    bad = write_documents([f"{BAD} {i}" for i in range(40)], tmp_path / "bad")
    mixed = write_documents(
        [f"{GOOD} Mixed {i}." for i in range(10)] + [f"{BAD} mixed {i}" for i in range(30)],
        tmp_path / "mixed",
        per_shard=15,
    )
    model = tmp_path / "model"
    args = ["datakit", "train-classifier", "--positive", str(good), "--negative", str(bad), "--out", str(model)]
    assert main([*args, "--heldout-fraction", "0.25", "--steps", "50", "--json"]) == 0
    trained = _last_json(capsys)
    assert {"train_docs", "heldout_docs", "accuracy", "auc"} <= set(trained)
    assert trained["train_docs"] + trained["heldout_docs"] == 80 and trained["accuracy"] == 1.0

    attr = tmp_path / "attr"
    assert (
        main(["datakit", "classify", str(mixed), "--model", str(model), "--out", str(attr), "--workers", "1", "--json"])
        == 0
    )
    scored = _last_json(capsys)
    assert scored["docs"] == 40 and scored["shards"] == 3 and scored["docs_per_second"] > 0

    consolidate = ["datakit", "consolidate", str(mixed), "--workers", "1", "--json"]
    assert main([*consolidate, "--top-fraction", f"{attr}:quality_score=0.25", "--out", str(tmp_path / "top")]) == 0
    assert _last_json(capsys)["output_docs"] == 10  # exactly the 10 good documents
    assert main([*consolidate, "--min-score", f"{attr}:quality_score=0.5", "--out", str(tmp_path / "min")]) == 0
    assert _last_json(capsys)["output_docs"] == 10
    assert main([*consolidate, "--buckets", f"{attr}:quality_score=4:3", "--out", str(tmp_path / "buckets")]) == 0
    assert _last_json(capsys)["output_docs"] == 10

    assert main([*consolidate, "--top-fraction", f"{attr}:quality_score=most", "--out", str(tmp_path / "x")]) == 2
    assert "--top-fraction setting 'most' is not a number" in capsys.readouterr().err
    assert (
        main(["datakit", "classify", str(mixed), "--model", str(tmp_path / "none"), "--out", str(tmp_path / "y")]) == 2
    )
    assert "classifier model not found" in capsys.readouterr().err
