"""`tootsie eval suite` on generated fixtures in each benchmark's Hub schema, with a tiny random model, and with a
stand-in model that writes each document's known answer (or a wrong one), so the generation tasks' scoring is shown
to give exactly 1 and 0."""

import json

import jax
import numpy as np
import pyarrow as pa
import pytest

from tests.eval.benchmark_fixtures import ROWS, fixture_rows, fixture_texts, write_fixtures
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_bpe
from tootsie.errors import TootsieError
from tootsie.eval import code_sandbox
from tootsie.eval.benchmark_data import MANIFEST_FILE, benchmark_files, mirror, record_files
from tootsie.eval.benchmarks import BENCHMARKS
from tootsie.eval.code_sandbox import run_program, sandbox_unavailable
from tootsie.models.llama import LlamaConfig, LlamaModel

pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install 'tootsie[lmeval]')")
from lm_eval.api.instance import Instance  # noqa: E402 - needs lm_eval
from lm_eval.api.model import LM  # noqa: E402 - needs lm_eval

from tootsie.eval import suite  # noqa: E402 - needs lm_eval
from tootsie.eval.lm_eval_adapter import TootsieLM  # noqa: E402 - needs lm_eval
from tootsie.eval.suite import run_suite  # noqa: E402 - needs lm_eval

VOCAB = 400


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("benchmarks")
    write_fixtures(directory)
    return directory


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> TootsieLM:
    docs = tmp_path_factory.mktemp("docs")
    texts = fixture_texts()
    write_table_atomic(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), docs / "part-0.parquet")
    tokenizer = train_bpe(TokenizerTrainConfig(inputs=(str(docs),), vocab_size=VOCAB))
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=1
    )
    model = LlamaModel(config, key=jax.random.PRNGKey(0))
    return TootsieLM(model, tokenizer, max_length=64, batch_size=8)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_every_suite_task_runs_end_to_end_in_both_formats(lm, data_dir, tmp_path) -> None:
    names = tuple(BENCHMARKS)  # all 19: core, reasoning and the six marin-base added, each at its stock shot count
    result = run_suite(lm, ",".join(names), data_dir, tmp_path, prompt_format="both", limit=1, show_prompts=1)
    rows = {(row["task"], row["prompt_format"]): row for row in result["results"]}
    with_olmes = {name for name in names if BENCHMARKS[name].olmes}
    assert with_olmes == {"arc_easy", "arc_challenge", "hellaswag", "gsm8k", "mmlu"}
    assert set(rows) == {(name, "lm-eval") for name in names} | {(name, "olmes") for name in with_olmes}
    refused = sandbox_unavailable()
    for (name, _), row in rows.items():
        assert set(row) >= {"task", "metric", "value", "stderr", "n", "prompt_format"}
        if name == "humaneval" and refused:
            continue  # skipped below, after every other task is checked
        assert 0.0 <= row["value"] <= 1.0, row
        assert row["n"] == (len(BENCHMARKS["bbh"].subtasks) if name == "bbh" else 1), row
    assert rows[("gsm8k", "lm-eval")]["metric"] == "exact_match/strict-match"
    assert rows[("mmlu", "olmes")]["metric"] == "acc"
    json.dumps(result)  # the --json payload
    prompts = result["prompts"]
    (stock,) = prompts["gsm8k/lm-eval/gsm8k"]
    (olmes,) = prompts["gsm8k/olmes/gsm8k_olmes"]
    question = f"Question: {fixture_rows('gsm8k', 'test')[0]['question']}\nAnswer:"
    assert stock.endswith(question) and olmes.endswith(question) and stock != olmes
    assert stock.count("Question:") == 6 and "#### " in stock  # 5 shots from the train split + the document
    assert olmes.count("Question:") == 9 and olmes.count("So the answer is") == 8 and "####" not in olmes
    (arc_mc,) = prompts["arc_easy/olmes/arc_easy_olmes"]
    options = fixture_rows("arc_easy", "test")[0]["choices"]["text"]
    assert arc_mc.endswith("".join(f"\n {'ABCDE'[i]}. {text}" for i, text in enumerate(options)) + "\nAnswer:")
    if refused:
        pytest.skip(f"HumanEval was refused, not run: {refused}")


def test_suite_accuracy_equals_a_hand_computation(lm, data_dir, tmp_path) -> None:
    result = run_suite(lm, "arc_easy", data_dir, tmp_path, prompt_format="lm-eval")
    (row,) = result["results"]
    docs = [json.loads(line) for line in (data_dir / "allenai/ai2_arc/ARC-Easy/test.jsonl").read_text().splitlines()]
    norm_hits = []
    for doc in docs:
        context = f"Question: {doc['question']}\nAnswer:"
        choices = doc["choices"]["text"]
        scores = np.array([score for score, _ in lm.loglikelihood(_requests(context, choices))])
        answer = doc["choices"]["label"].index(doc["answerKey"])
        norm_hits.append(int(np.argmax(scores / np.array([len(c) for c in choices]))) == answer)
    assert row["metric"] == "acc_norm" and row["n"] == ROWS
    assert row["value"] == pytest.approx(np.mean(norm_hits))
    assert row["stderr"] == pytest.approx(np.std(norm_hits, ddof=1) / np.sqrt(ROWS))


def _requests(context: str, choices: list[str]) -> list:
    from types import SimpleNamespace

    return [SimpleNamespace(args=(context, f" {choice}")) for choice in choices]


def test_a_missing_file_refuses_with_the_mirror_command(tmp_path) -> None:
    write_fixtures(tmp_path, ("gsm8k",))
    (tmp_path / "openai/gsm8k/main/train.jsonl").unlink()
    with pytest.raises(
        TootsieError, match=r"missing .*openai/gsm8k/main/train\.jsonl .*tootsie eval mirror gsm8k --out"
    ):
        benchmark_files(tmp_path, BENCHMARKS["gsm8k"])
    for name in BENCHMARKS:
        with pytest.raises(TootsieError, match=f"tootsie eval mirror {name} --out"):
            benchmark_files(tmp_path / "empty", BENCHMARKS[name])


def test_the_manifest_checks_every_file_it_lists(tmp_path) -> None:
    files = write_fixtures(tmp_path, ("arc_easy", "boolq"))
    (tmp_path / MANIFEST_FILE).unlink()  # write_fixtures records every file; list only ARC's two
    record_files(tmp_path, files[:2])
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert sorted(manifest["files"]) == ["allenai/ai2_arc/ARC-Easy/test.jsonl", "allenai/ai2_arc/ARC-Easy/train.jsonl"]
    assert benchmark_files(tmp_path, BENCHMARKS["arc_easy"])["ARC-Easy"]["test"] == files[0]
    with pytest.raises(TootsieError, match="not listed in"):
        benchmark_files(tmp_path, BENCHMARKS["boolq"])
    files[1].write_text("".join(files[1].read_text().splitlines(keepends=True)[:-1]))  # a truncated copy
    with pytest.raises(TootsieError, match="train.jsonl has sha256 .* but manifest.json records"):
        benchmark_files(tmp_path, BENCHMARKS["arc_easy"])


def test_mirror_offline_says_it_needs_the_network(tmp_path) -> None:
    with pytest.raises(
        TootsieError, match="could not download allenai/ai2_arc config 'ARC-Easy' split 'test'.*network"
    ):
        mirror([BENCHMARKS["arc_easy"]], tmp_path)
    assert not (tmp_path / MANIFEST_FILE).exists()


def test_mirror_fetches_every_split_of_all_nineteen_and_records_their_sha256(tmp_path, monkeypatch) -> None:
    import datasets

    asked = []

    def hub(repo: str, name: str | None, split: str) -> datasets.Dataset:
        asked.append((repo, name, split))
        configs = {b.name: {subtask.config for subtask in b.subtasks} for b in BENCHMARKS.values() if b.repo == repo}
        made_up = next(benchmark for benchmark, names in configs.items() if (name or "default") in names)
        return datasets.Dataset.from_list(fixture_rows(made_up, split, 3))

    monkeypatch.setattr(datasets, "load_dataset", hub)
    entries = mirror(list(BENCHMARKS.values()), tmp_path)
    assert len(entries) == len(asked) == sum(len(b.subtasks) * len(b.splits) for b in BENCHMARKS.values())
    for repo, name, split in (
        ("hails/agieval-lsat-ar", None, "test"),
        ("tau/commonsense_qa", None, "validation"),
        ("tau/commonsense_qa", None, "train"),
        ("aps/super_glue", "copa", "validation"),
        ("lighteval/winograd_wsc", "wsc273", "test"),
        ("Idavidrein/gpqa", "gpqa_main", "train"),
        ("TIGER-Lab/MMLU-Pro", None, "test"),
        ("TIGER-Lab/MMLU-Pro", None, "validation"),
    ):
        assert (repo, name, split) in asked
    for benchmark in BENCHMARKS.values():  # each file read back and checked against the manifest's sha256
        assert all(len(files) == len(benchmark.splits) for files in benchmark_files(tmp_path, benchmark).values())
    assert entries["Idavidrein/gpqa/gpqa_main/train.jsonl"]["rows"] == 3


def test_code_runs_sandboxed_without_network() -> None:
    if sandbox_unavailable():
        pytest.skip(f"the HumanEval sandbox is unavailable here: {sandbox_unavailable()}")
    assert run_program("assert sum([1, 2]) == 3")
    assert not run_program("assert sum([1, 2]) == 4")
    interfaces = "[line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]]"
    assert run_program(f"assert {interfaces} == ['lo'], {interfaces}")
    assert not run_program("x = bytearray(2 ** 31)")  # over the 1 GiB address-space limit
    assert run_program("import os\nassert os.getcwd().split('/')[-1].startswith('tootsie-sandbox-')")


NO_SANDBOX = "the `unshare` command (util-linux) is not installed, so code would run with network access"
"""What `sandbox_unavailable()` says on a machine without util-linux (stood in for by monkeypatching)."""


def test_code_is_refused_without_a_sandbox(monkeypatch) -> None:
    monkeypatch.setattr(code_sandbox, "sandbox_unavailable", lambda: NO_SANDBOX)
    with pytest.raises(TootsieError, match="refusing to execute model-written code: the `unshare` command"):
        run_program("pass")


def _cut(text: str, until: list[str]) -> str:
    """`text` up to the first stop string, as a model's generation is cut."""
    return text[: min((text.find(stop) for stop in until if stop in text), default=len(text))]


def known_completion(request: Instance, right: bool) -> str:
    """The document's canonical answer (or, not `right`, a wrong one) written as the task's filter expects it.

    GSM8K: the rationale and `#### N` (OLMES: `So the answer is N.`), N off by one when wrong; MATH: the boxed answer
    between `$`s, as hendrycks_math's `process_results` reads it; BBH: `So the answer is T.` with the other truth
    value when wrong; HumanEval: the canonical body, or one returning a - b.
    """
    doc, task = request.doc, str(request.task_name)
    if task.startswith("gsm8k"):
        rationale, _, number = doc["answer"].rpartition("\n#### ")
        number = number if right else str(int(number) + 1)
        return f" {rationale} So the answer is {number}." if task == "gsm8k_olmes" else f" {rationale}\n#### {number}"
    if task == "hendrycks_math500":
        return f" Adding gives ${doc['answer'] if right else int(doc['answer']) + 1}$."
    if task.startswith("bbh_"):
        target = doc["target"] if right else {"True": "False", "False": "True"}[doc["target"]]
        return f" Evaluate the inner bracket first. So the answer is {target}."
    if task == "humaneval":
        return doc["canonical_solution"] if right else "    return a - b\n"
    raise AssertionError(f"no known completion for task {task!r}")


class KnownAnswers(LM):
    """An lm-eval model whose generations are `known_completion`s, cut at each request's stop strings."""

    def __init__(self, right: bool) -> None:
        super().__init__()
        self.right = right

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        return [_cut(known_completion(r, self.right), r.args[1]["until"]) for r in requests]

    def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        raise AssertionError("the generation tasks request no log-likelihoods")

    def loglikelihood_rolling(self, requests: list[Instance], disable_tqdm: bool = False) -> list[float]:
        raise AssertionError("the generation tasks request no log-likelihoods")


GENERATION = ("gsm8k", "math500", "bbh", "humaneval")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_generation_tasks_score_known_answers_one_and_wrong_answers_zero(data_dir, tmp_path) -> None:
    if sandbox_unavailable():
        pytest.skip(f"HumanEval's scoring needs the sandbox, unavailable here: {sandbox_unavailable()}")
    for right in (True, False):
        result = run_suite(KnownAnswers(right), ",".join(GENERATION), data_dir, tmp_path, prompt_format="both")
        rows = {(row["task"], row["prompt_format"]): row for row in result["results"]}
        assert set(rows) == {(name, "lm-eval") for name in GENERATION} | {("gsm8k", "olmes")}
        for row in rows.values():
            assert row["value"] == (1.0 if right else 0.0), row
            assert row["n"] == (len(BENCHMARKS["bbh"].subtasks) if row["task"] == "bbh" else 1) * ROWS, row


def test_without_a_sandbox_humaneval_is_a_refused_row_and_the_rest_runs(data_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(suite, "sandbox_unavailable", lambda: NO_SANDBOX)
    result = run_suite(KnownAnswers(right=True), "gsm8k,humaneval", data_dir, tmp_path, limit=1)
    gsm8k, humaneval = result["results"]
    assert gsm8k["task"] == "gsm8k" and gsm8k["value"] == 1.0
    assert humaneval["task"] == "humaneval" and humaneval["value"] is None and humaneval["n"] == 0
    assert humaneval["refused"] == f"code execution is not sandboxed here: {NO_SANDBOX}"
