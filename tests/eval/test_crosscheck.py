"""`tootsie eval crosscheck`: tootsie's adapter and lm-eval's `hf` model agree item by item on a tiny random
checkpoint and its HF export; a planted difference is caught with its reason; ties are counted apart.

One CLI run (export, three log-likelihood tasks and one generation task, 4 documents each) is shared by the
end-to-end tests; the comparison rules are also checked on hand-made samples in lm-eval's logged layout.
"""

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.eval.tiny_checkpoint import TEXTS, RandomCheckpointConfig, write_random_checkpoint
from tootsie.cli.main import main
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.errors import TootsieError
from tootsie.eval.benchmark_rows import write_benchmark_rows
from tootsie.eval.crosscheck import TOLERANCE, CrosscheckConfig, compare_item, compare_task, run_crosscheck
from tootsie.release.hf_export import export_hf

TASKS = ("arc_easy", "boolq", "winogrande", "gsm8k")
LIMIT = 4
CONTRACT = ("task", "items", "agree", "max_abs_loglik_diff", "metric_tootsie", "metric_hf")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """A random tiny Llama checkpoint, its tokenizer, its HF export and 6 made-up rows per split of TASKS."""
    root = tmp_path_factory.mktemp("crosscheck")
    table = pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS})
    write_table_atomic(table, root / "docs" / "part-00000.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(root / "docs"),), vocab_size=300), str(root / "tok"))
    write_random_checkpoint(RandomCheckpointConfig(), str(root / "run"))
    write_benchmark_rows(root / "data", TASKS, rows=6)
    return {"root": root, "run": root / "run", "tokenizer": root / "tok" / "tokenizer.json", "data": root / "data"}


@pytest.fixture(scope="module")
def record(tiny) -> dict:
    """`tootsie eval crosscheck ... --json` on TASKS: the CLI exports the checkpoint and runs both paths."""
    argv = ["eval", "crosscheck", "--checkpoint", str(tiny["run"]), "--suite", ",".join(TASKS)]
    argv += ["--tasks", ",".join(TASKS), "--data-dir", str(tiny["data"]), "--tokenizer", str(tiny["tokenizer"])]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--limit", str(LIMIT), "--max-gen-toks", "8", "--quiet", "--json"]) == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.mark.timeout(240)
def test_both_paths_agree_on_every_item(record) -> None:
    rows = {row["task"]: row for row in record["tasks"]}
    assert list(rows) == list(TASKS)
    for name, row in rows.items():
        assert set(CONTRACT) <= set(row), row
        assert row["items"] == LIMIT and row["agree"] + row["ties"] == LIMIT and not row["disagreements"], row
        assert row["metric_tootsie"] == row["metric_hf"], row
        assert row["seconds_tootsie"] > 0 and row["seconds_hf"] > 0
        if name == "gsm8k":
            assert row["max_abs_loglik_diff"] is None  # generation: texts compared, no log-likelihoods
            assert row["generated_chars"] > 0  # the texts compared are not empty
        else:
            assert 0 <= row["max_abs_loglik_diff"] < TOLERANCE, row
    assert record["items"] == LIMIT * len(TASKS) and record["agreement"] == 1.0
    assert record["tolerance"] == TOLERANCE and record["max_gen_toks"] == 8


@pytest.mark.timeout(240)
def test_a_perturbed_path_is_caught_with_its_reason(tiny, record, monkeypatch, tmp_path) -> None:
    from tootsie.eval.lm_eval_adapter import TootsieLM

    real_loglikelihood, real_generate = TootsieLM._loglikelihood_tokens, TootsieLM.generate_until

    def shifted(self, requests, disable_tqdm=False, **kwargs):  # the first request of each call moves by 0.5 nats
        results = real_loglikelihood(self, requests, disable_tqdm, **kwargs)
        return [(results[0][0] + 0.5, results[0][1]), *results[1:]]

    def garbled(self, requests, disable_tqdm=False):  # every generation gains a suffix
        return [text + " planted" for text in real_generate(self, requests, disable_tqdm)]

    monkeypatch.setattr(TootsieLM, "_loglikelihood_tokens", shifted)
    monkeypatch.setattr(TootsieLM, "generate_until", garbled)
    export_hf(tiny["run"], tmp_path / "hf", tokenizer=tiny["tokenizer"])
    config = CrosscheckConfig(str(tiny["run"]), "arc_easy,gsm8k", str(tiny["data"]), limit=2, max_gen_toks=8)
    rows = {row["task"]: row for row in run_crosscheck(config, tmp_path / "hf", tiny["tokenizer"])["tasks"]}
    (loglik,) = rows["arc_easy"]["disagreements"]
    assert any("log-likelihoods differ by 0.5" in reason for reason in loglik["reasons"]), loglik
    assert rows["arc_easy"]["max_abs_loglik_diff"] == pytest.approx(0.5, abs=TOLERANCE)
    assert rows["arc_easy"]["agree"] == 1 and rows["arc_easy"]["agreement"] == 0.5
    assert len(rows["gsm8k"]["disagreements"]) == 2 and rows["gsm8k"]["agree"] == 0
    assert all(
        "generations differ" in d["reasons"][0] and "planted" in d["reasons"][0] for d in rows["gsm8k"]["disagreements"]
    )


def _choice_sample(lls: list[float], arguments: tuple = ("ctx",)) -> dict:
    """A multiple-choice document as lm-eval logs it: one (log-likelihood, is-greedy) per choice."""
    return {
        "arguments": arguments,
        "resps": [[(ll, False)] for ll in lls],
        "filtered_resps": [(ll, False) for ll in lls],
    }


def test_close_top_two_choices_are_a_tie_not_a_disagreement() -> None:
    ours, theirs = _choice_sample([-1.0, -1.0004, -3.0]), _choice_sample([-1.0003, -1.0001, -3.0])
    verdict = compare_item("multiple_choice", ours, theirs, TOLERANCE)
    assert verdict == {"status": "tie", "reasons": [], "max_abs_diff": pytest.approx(3e-4)}
    clear = compare_item("multiple_choice", _choice_sample([-1.0, -2.0]), _choice_sample([-1.0002, -2.0]), TOLERANCE)
    assert clear["status"] == "agree"
    counts = compare_task(
        [
            ("t:0", "multiple_choice", ours, theirs, None),
            ("t:1", "multiple_choice", ours, _choice_sample([-1.0, -1.5, -3.0]), None),
        ],
        TOLERANCE,
    )
    assert (counts["items"], counts["agree"], counts["ties"], counts["agreement"]) == (2, 0, 1, 0.0)
    assert counts["disagreements"][0]["item"] == "t:1"


def test_acc_norm_scores_per_character_and_ties_scale_with_it() -> None:
    weights = 1.0 / np.array([1.0, 10.0])  # a 1-character and a 10-character choice
    ours, theirs = _choice_sample([-2.0, -5.0]), _choice_sample([-2.0, -5.0])
    assert compare_item("multiple_choice", ours, theirs, TOLERANCE, weights)["status"] == "agree"
    # per character the choices score -2.0 and -0.5: far apart, so a 0.01-nat move is a disagreement by value
    moved = compare_item("multiple_choice", ours, _choice_sample([-2.0, -5.01]), TOLERANCE, weights)
    assert moved["status"] == "disagree" and "log-likelihoods differ" in moved["reasons"][0]


def test_different_prompts_and_greedy_flags_are_disagreements() -> None:
    ours = {"arguments": ("a",), "resps": [[(-1.0, True)]], "filtered_resps": [(-1.0, True)]}
    theirs = {"arguments": ("b",), "resps": [[(-1.0, False)]], "filtered_resps": [(-1.0, False)]}
    verdict = compare_item("loglikelihood", ours, theirs, TOLERANCE)
    assert verdict["status"] == "disagree" and len(verdict["reasons"]) == 2
    text = compare_item(
        "generate_until", {"arguments": (), "resps": [["x = 1"]]}, {"arguments": (), "resps": [["x = 2"]]}, TOLERANCE
    )
    assert text["status"] == "disagree" and text["max_abs_diff"] is None


def test_config_refuses_tasks_outside_the_suite_and_bad_settings(tiny) -> None:
    with pytest.raises(ValueError, match=r"tasks \['gsm8k'\] are not in suite"):
        CrosscheckConfig("run", "arc_easy,boolq", "data", tasks=("gsm8k",))
    with pytest.raises(ValueError, match="tolerance must be positive"):
        CrosscheckConfig("run", "arc_easy", "data", tolerance=0.0)
    with pytest.raises(ValueError, match="max_gen_toks must be in"):
        CrosscheckConfig("run", "arc_easy", "data", max_gen_toks=4096)
    with pytest.raises(TootsieError, match="not a Hugging Face export"):
        run_crosscheck(
            CrosscheckConfig(str(tiny["run"]), "arc_easy", str(tiny["data"])), tiny["root"], tiny["tokenizer"]
        )


def test_humaneval_is_compared_never_executed_and_budgets_are_capped(tmp_path) -> None:
    from tootsie.eval.benchmarks import BENCHMARKS
    from tootsie.eval.crosscheck import _crosscheck_config
    from tootsie.eval.suite import plan_runs

    write_benchmark_rows(tmp_path, ("humaneval",), rows=2)
    (run,) = plan_runs((BENCHMARKS["humaneval"],), tmp_path, "lm-eval", tmp_path / "cache")
    assert run.config["filter_list"] and run.config["generation_kwargs"]["max_gen_toks"] == 1024  # the suite's
    config = _crosscheck_config(run.config, executes_code=True, max_gen_toks=64)
    assert "filter_list" not in config and config["unsafe_code"] is False
    assert [m["metric"] for m in config["metric_list"]] == ["exact_match"]
    assert config["generation_kwargs"]["max_gen_toks"] == 64
    assert (
        _crosscheck_config(run.config, executes_code=True, max_gen_toks=None)["generation_kwargs"]
        == (run.config["generation_kwargs"])
    )
