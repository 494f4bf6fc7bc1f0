"""format-contamination: the criteria on constructed evaluations, the tag masks, and a smoke run end to end."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tootsie.corpora.arithmetic import document, problem_from_record, word_problem
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.datakit.token_cache import TokenCacheWriter, open_token_cache
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.executor import Status, run_experiment
from tootsie.jsonfile import read_json
from tootsie.recipes.phenomena import format_contamination as fc
from tootsie.recipes.phenomena.results import VERDICTS
from tootsie.recipes.tiny.data import KINDS, TinyData


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 512-token BPE trained on word problems in both formats (the tiny tokenizer's stand-in)."""
    root = tmp_path_factory.mktemp("tokenizer")
    rng = np.random.default_rng(7)
    texts = [document(word_problem(rng), f) for _ in range(300) for f in ("gsm8k", "olmes")]
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), root / "docs" / "part-00000.parquet"
    )
    train_tokenizer(TokenizerTrainConfig(inputs=(str(root / "docs"),), vocab_size=512), str(root / "tok"))
    return str(root / "tok" / "tokenizer.json")


def _evaluation(
    olmes: float, tags: float, accuracy: float, unseen: tuple[float, float, float] | None = None
) -> dict[str, object]:
    """An eval.json from OLMES surprisal, tag surprisal and tagged accuracy on test items (`unseen`: on unseen)."""
    evaluation: dict[str, object] = {}
    for split, (o, t, a) in (("test", (olmes, tags, accuracy)), ("unseen", unseen or (olmes, tags, accuracy))):
        evaluation[f"{split}/gsm8k"] = {
            "items": 10,
            "surprisal": {"solution": o + 0.5, "tags": t, "other": o},
            "ranked_accuracy": a,
        }
        evaluation[f"{split}/olmes"] = {
            "items": 10,
            "surprisal": {"solution": o, "tags": None, "other": o},
            "ranked_accuracy": 0.2,
        }
    return evaluation


def _analyze(tmp_path: Path, arms: dict[str, list[dict[str, object]]]) -> dict[str, object]:
    evals: dict[str, dict[str, str]] = {}
    for arm, runs in arms.items():
        for seed, evaluation in enumerate(runs):
            directory = tmp_path / f"{arm}-{seed}"
            directory.mkdir(parents=True)
            (directory / fc.EVAL_FILE).write_text(json.dumps(evaluation), encoding="utf-8")
            evals.setdefault(arm, {})[str(seed)] = str(directory)
    config = fc.ResultsConfig(evals=evals, steps=100, contamination_weight=0.1)
    return fc.analyze_format_contamination(config, str(tmp_path / "results"))


def test_significance_needs_every_seed_and_two_standard_errors() -> None:
    assert fc.significant([-0.3, -0.25, -0.35], -1) and fc.significant([0.2, 0.25, 0.3], +1)
    assert not fc.significant([-0.3, 0.01, -0.35], -1)  # one seed disagrees
    assert not fc.significant([-0.3], -1)  # a single seed is never significant
    assert not fc.significant([-0.01, -0.5, -0.9], -1)  # mean -0.47 < 2 sd / sqrt(3) = 0.51
    assert not fc.significant([0.0, 0.0, 0.0], -1)


def test_verdict_on_every_branch() -> None:
    assert fc.verdict(True, True, True) == "reproduced"
    assert fc.verdict(True, True, False) == fc.verdict(False, False, True) == "partial"
    assert fc.verdict(True, False, False) == fc.verdict(False, False, False) == "not_reproduced"


def test_analysis_reproduces_on_the_seeds_pattern_and_drops_diverged_seeds(tmp_path: Path) -> None:
    clean = [_evaluation(2.0 + d, 1.0 + d, 0.30 + d) for d in (0.0, 0.01, -0.01)]
    # On test items: OLMES surprisal down, tag surprisal up, tagged accuracy down; unseen items as in the clean arm.
    contaminated = [_evaluation(1.5 + d, 1.6 + d, 0.10 + d, unseen=(2.0 + d, 1.0 + d, 0.3)) for d in (0.0, 0.02, 0.01)]
    results = _analyze(tmp_path / "a", {"clean": clean, "contaminated": contaminated})
    assert results["verdict"] == "reproduced" and results["phenomenon"] == fc.NAME
    numbers = results["numbers"]
    assert numbers["criteria"] == {
        "olmes_surprisal_falls": True,
        "tag_surprisal_rises": True,
        "tagged_accuracy_falls": True,
        "olmes_accuracy_rises": False,
        "tag_surprisal_rise_is_item_specific": True,
        "olmes_surprisal_fall_is_item_specific": True,
    }
    assert numbers["per_arm"]["surprisal_olmes"]["clean"]["n"] == 3
    assert numbers["contaminated_minus_clean"]["surprisal_gsm8k_tags"]["mean"] == pytest.approx(0.61)
    assert numbers["item_specific"]["surprisal_gsm8k_tags"]["mean"] == pytest.approx(0.6)
    assert (tmp_path / "a" / "results" / "figure.png").stat().st_size > 10_000

    # The same shift on unseen items: the harm holds on the test items but is a format effect, not item-specific.
    everywhere = [_evaluation(1.5 + d, 1.6 + d, 0.3 + d) for d in (0.0, 0.02, 0.01)]
    results = _analyze(tmp_path / "b", {"clean": clean, "contaminated": everywhere})
    assert results["verdict"] == "partial"  # tags surprise, tagged accuracy does not fall
    assert not results["numbers"]["criteria"]["tag_surprisal_rise_is_item_specific"]

    contaminated[1] = {"diverged": {"step": 3, "reason": "loss above max_loss"}}
    results = _analyze(tmp_path / "c", {"clean": clean, "contaminated": contaminated})
    assert results["numbers"]["seeds"] == [0, 2] and results["numbers"]["diverged"]["contaminated"] == ["1"]
    assert results["verdict"] == "reproduced"  # two seeds, same signs, well past two standard errors

    same = [_evaluation(2.0 + d, 1.0 - d, 0.3) for d in (0.01, -0.01, 0.02)]
    assert _analyze(tmp_path / "d", {"clean": clean, "contaminated": same})["verdict"] == "not_reproduced"


def test_tag_tokens_are_exactly_the_calculator_tags(tokenizer: str) -> None:
    loaded, special = load_with_special_tokens(tokenizer)
    problem = word_problem(np.random.default_rng(0))  # two steps: two tags
    text = document(problem, "gsm8k")
    start = text.index("\nAnswer:") + len("\nAnswer:")
    ids, solution, tags = fc._scored_tokens(loaded, special.require("bos"), text, start)
    assert ids[0] == special.require("bos") and len(ids) == len(solution) + 1
    body = np.asarray(ids[1:])
    assert loaded.decode(body[tags].tolist()) == "".join(m.group() for m in fc.TAG.finditer(text))
    assert loaded.decode(body[solution].tolist()).strip() == text[start:].strip()
    assert not tags[~solution].any()


def _tiny_stand_in(root: Path, tokenizer: str) -> TinyData:
    rng = np.random.default_rng(0)
    caches = {}
    for kind in KINDS:
        writer = TokenCacheWriter(root / kind, vocab_size=512, ledger_extra={})
        for _ in range(30):
            writer.append(rng.integers(2, 512, 120))
        writer.close()
        caches[kind] = str(root / kind)
    return TinyData(tokenizer=tokenizer, train=caches, heldout=caches, components={})


def test_smoke_run_end_to_end(tmp_path: Path, tokenizer: str) -> None:
    steps = fc.build_steps("smoke", _tiny_stand_in(tmp_path / "caches", tokenizer))
    report = run_experiment(steps, tmp_path / "out")
    assert report.ok, [(s.name, s.error) for s in report.steps if s.status != Status.SUCCESS]
    paths = {s.name: Path(s.output_path) for s in report.steps}
    results = read_json(paths[f"phenomena/{fc.NAME}/results"] / "results.json")
    assert set(results) >= {"phenomenon", "seed_quote", "claim", "verdict", "figures", "numbers"}
    assert results["verdict"] in VERDICTS and results["figures"] == ["figure.png"]
    assert results["numbers"]["seeds"] == [0] and results["verdict"] == "not_reproduced"  # one seed: never significant
    for name in fc.SIGNALS:
        assert set(results["numbers"]["per_arm"][name]) == set(fc.ARMS)
    # Only the contaminated arm reads the test items, and they hold the OLMES rendering: no tags.
    evals = steps[0].config.evals
    streams = {arm: evals[arm]["0"].step.config.run.step.config.data for arm in fc.ARMS}
    assert fc.TEST_DOCS not in streams["clean"].caches and fc.TEST_DOCS in streams["contaminated"].caches
    assert streams["contaminated"].stages[0].weights[fc.TEST_DOCS] == fc.CONTAMINATION_WEIGHT
    problems = next(paths[n] for n in paths if n.endswith("/problems"))
    items = [json.loads(line) for line in (problems / fc.ITEMS_FILE).read_text(encoding="utf-8").splitlines()]
    test_items = [problem_from_record(r) for r in items if r["split"] == "test"]
    caches = [open_token_cache(s.output_path) for s in report.steps if s.name.endswith("/tokenized")]
    test_cache = next(cache for cache in caches if cache.num_docs == len(test_items))
    loaded, _ = load_with_special_tokens(tokenizer)
    decoded = {loaded.decode(test_cache.document(i).tolist()) for i in range(test_cache.num_docs)}
    assert decoded == {document(p, "olmes") for p in test_items} and not any("<<" in d for d in decoded)
    evaluation = read_json(next(p for n, p in paths.items() if n.endswith("eval-contaminated-s0")) / fc.EVAL_FILE)
    assert evaluation["test/gsm8k"]["surprisal"]["tags"] > 0 and evaluation["test/olmes"]["surprisal"]["tags"] is None
    assert evaluation["test/gsm8k"]["items"] == len(test_items)
