"""The lm-eval adapter against hand computations from a tiny random model's logits, and end to end through lm-eval."""

from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.datakit.chat_templates import LLAMA3_TEMPLATE
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_bpe
from tootsie.errors import TootsieError
from tootsie.eval.lm_eval_tasks import LocalTask, builtin_tasks, write_tasks
from tootsie.eval.lm_scoring import Scorer, bucket_length
from tootsie.models.llama import LlamaConfig, LlamaModel

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install 'tootsie[lmeval]')")
from tootsie.eval.lm_eval_adapter import TaskSuite, TootsieLM, flatten_results  # noqa: E402 - needs lm_eval

VOCAB = 300
WIDTH = 80
BATCH = 4
TEXT = "def area(width, height):\n    return width * height\n\nclass Error(Exception):\n    pass\n"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    docs = tmp_path_factory.mktemp("docs")
    texts = [TEXT.replace("area", f"area{i}") for i in range(50)] + ["The quick brown fox jumps over the lazy dog."] * 5
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), docs / "part-00000.parquet"
    )
    return train_bpe(TokenizerTrainConfig(inputs=(str(docs),), vocab_size=VOCAB))


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_dim=16,
        intermediate_dim=32,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        initializer_std=0.5,
    )
    return LlamaModel(config, key=jax.random.PRNGKey(3))


@eqx.filter_jit
def _logprobs(model: LlamaModel, tokens: jax.Array) -> jax.Array:
    return jax.nn.log_softmax(model(tokens)[0], axis=-1)


def log_softmax(model: LlamaModel, tokens: list[int]) -> np.ndarray:
    """Log-softmax of the logits at every position of one sequence, run right-padded to WIDTH.

    Padding on the right is exact under the causal mask, and one WIDTH means one compile.
    """
    return np.asarray(_logprobs(model, jnp.asarray([tokens + [0] * (WIDTH - len(tokens))])))[: len(tokens)]


def direct(model: LlamaModel, context: list[int], continuation: list[int]) -> tuple[float, bool]:
    """Sum of log-softmax at the continuation's positions, straight from the model's logits."""
    sequence = context + continuation
    logprobs = log_softmax(model, sequence[:-1])
    positions = range(len(context) - 1, len(sequence) - 1)
    total = sum(float(logprobs[p, t]) for p, t in zip(positions, continuation))
    return total, all(int(np.argmax(logprobs[p])) == t for p, t in zip(positions, continuation))


def hand_greedy(model: LlamaModel, context: list[int], steps: int, eos: int) -> list[int]:
    tokens, generated = list(context), []
    for _ in range(steps):
        generated.append(int(np.argmax(log_softmax(model, tokens)[-1])))
        tokens.append(generated[-1])
        if generated[-1] == eos:
            break
    return generated


def requests(*args: tuple) -> list[SimpleNamespace]:
    return [SimpleNamespace(args=a) for a in args]


def test_bucket_lengths_are_powers_of_two_capped() -> None:
    assert [bucket_length(n, 100) for n in (1, 16, 17, 33, 64, 65, 99)] == [16, 16, 32, 64, 64, 100, 100]


def test_right_padding_does_not_change_logits(model) -> None:
    tokens = list(range(5, 25))
    assert np.allclose(log_softmax(model, tokens), np.asarray(_logprobs(model, jnp.asarray([tokens]))), atol=1e-5)


def test_loglikelihood_equals_direct_computation(model, tokenizer) -> None:
    lm = TootsieLM(model, tokenizer, max_length=64, batch_size=BATCH)
    pairs = [
        ("def area(width,", " height):"),
        ("class Error", "(Exception):"),
        ("The quick brown", " fox"),
        ("", "def"),
        ("x = ", "1"),
        ("    return width", " * height\n"),
    ]
    results = lm.loglikelihood(requests(*pairs))
    for (context, continuation), (logprob, greedy) in zip(pairs, results):
        context_ids, continuation_ids = (
            lm._encode_pair(context, continuation)
            if context
            else ([lm.prefix_token_id], lm.tok_encode(continuation, add_special_tokens=False))
        )
        assert context_ids[0] == lm.prefix_token_id and continuation_ids
        expected, expected_greedy = direct(model, context_ids, continuation_ids)
        assert logprob == pytest.approx(expected, abs=1e-4) and greedy == expected_greedy
    context_ids = lm.tok_encode("def area")
    (_, greedy), (_, not_greedy) = lm.scorer.continuation_logprobs(
        [
            (context_ids, hand_greedy(model, context_ids, 3, -1)),
            (context_ids, [hand_greedy(model, context_ids, 1, -1)[0] + 1]),
        ]
    )
    assert greedy and not not_greedy


def test_a_token_merged_across_the_boundary_is_scored(model, tokenizer) -> None:
    lm = TootsieLM(model, tokenizer, max_length=64, batch_size=BATCH)
    context_ids, continuation_ids = lm._encode_pair("def area(width, height)", ":")
    assert lm.tok_decode(context_ids + continuation_ids) == "def area(width, height):" and continuation_ids
    assert lm.tok_decode(continuation_ids).endswith(":")


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=40),
    st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=8),
)
def test_scorer_left_truncates_to_max_length(model, context: list[int], continuation: list[int]) -> None:
    ((logprob, greedy),) = Scorer(model, max_length=24, batch_size=BATCH).continuation_logprobs(
        [(context, continuation)]
    )
    kept = (context + continuation)[-25:]
    expected, expected_greedy = direct(model, kept[: len(kept) - len(continuation)], continuation)
    assert logprob == pytest.approx(expected, abs=1e-4) and greedy == expected_greedy


def test_rolling_loglikelihood_is_the_full_sequence_when_it_fits(model, tokenizer) -> None:
    lm = TootsieLM(model, tokenizer, max_length=64, batch_size=BATCH)
    ids = lm.tok_encode(TEXT, add_special_tokens=False)
    assert len(ids) < 64
    (rolling,) = lm.loglikelihood_rolling(requests((TEXT,)))
    assert rolling == pytest.approx(direct(model, [lm.prefix_token_id], ids)[0], abs=1e-4)


def test_rolling_windows_are_disjoint_and_add_up(model, tokenizer) -> None:
    window = 16
    lm = TootsieLM(model, tokenizer, max_length=window, batch_size=BATCH)
    ids = lm.tok_encode(TEXT * 2, add_special_tokens=False)
    assert len(ids) > 2 * window and len(ids) % window
    sequence = [lm.prefix_token_id, *ids]  # window k predicts ids[16k:16k+16] from the 16 tokens before each
    expected = 0.0
    for start in range(0, len(ids), window):
        end = min(start + window, len(ids))
        first = max(0, end - window)  # the last window takes a full window of inputs, predicting only its new tokens
        expected += direct(model, sequence[first : start + 1], ids[start:end])[0]
    (rolling,) = lm.loglikelihood_rolling(requests((TEXT * 2,)))
    assert rolling == pytest.approx(expected, abs=1e-3)


def test_greedy_generation_is_argmax_decoding_and_honours_stops(model, tokenizer) -> None:
    lm = TootsieLM(model, tokenizer, max_length=64, batch_size=BATCH)
    contexts = ["def area(", "class", "The quick"]
    hand = [hand_greedy(model, lm.tok_encode(c), 6, lm.eot_token_id) for c in contexts]
    texts = lm.generate_until(requests(*[(c, {"until": [], "max_gen_toks": 6}) for c in contexts]))
    assert texts == [lm.tok_decode(ids) for ids in hand]
    full = texts[0]
    stop = full[len(full) // 2]
    (cut,) = lm.generate_until(requests(("def area(", {"until": [stop], "max_gen_toks": 6, "do_sample": False})))
    assert cut == full.split(stop)[0] and stop not in cut
    calls = []
    generated = lm.scorer.greedy_generate(
        [lm.tok_encode("def area(")], [6], lambda i, ids: calls.append(len(ids)) or len(ids) == 2
    )
    assert generated == [hand[0][:2]] and calls == [1, 2]
    with pytest.raises(TootsieError, match="greedily"):
        lm.generate_until(requests(("x", {"do_sample": True, "temperature": 0.7})))


def test_local_task_records_are_checked(tmp_path) -> None:
    with pytest.raises(ValueError, match="record 1 lacks"):
        LocalTask("t", "multiple_choice", ({"context": "a", "choices": ["b"], "answer": 0}, {"context": "a"}))
    with pytest.raises(ValueError, match="not an index"):
        LocalTask("t", "multiple_choice", ({"context": "a", "choices": ["b"], "answer": 1},))
    syntax, lines, zen = builtin_tasks()
    assert len(zen.records) == 19 and zen.records[0]["text"] == "Beautiful is better than ugly."
    assert {r["answer"] for r in syntax.records} == {0, 1, 2, 3}
    assert [r["choices"][r["answer"]] for r in syntax.records[:3]] == [":", ", *args, **kwargs):", " sys"]
    written = write_tasks([syntax], tmp_path)
    assert (written / "tootsie_pysyntax.yaml").is_file() and len(
        (written / "tootsie_pysyntax.jsonl").read_text().splitlines()
    ) == 20


def test_flatten_results_names_metrics_and_filters() -> None:
    flat = flatten_results(
        {"t": {"alias": "t", "acc,none": 0.5, "acc_stderr,none": "N/A", "exact_match,strict": 1.0, "sample_len": 3}}
    )
    assert flat == {"t": {"acc": 0.5, "exact_match/strict": 1.0}}


@pytest.mark.slow
def test_simple_evaluate_on_a_local_multiple_choice_task(model, tokenizer, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(
        lm_eval.evaluator, "get_git_commit_hash", lambda: None
    )  # simple_evaluate shells out to `git describe`
    docs = [
        {"context": "def area(width, height)", "choices": [":", ";", " {"], "answer": 0},
        {"context": "class Error", "choices": ["(Exception):", "[x]", " ="], "answer": 0},
        {"context": "The quick brown", "choices": [" fox", " dog", " cat"], "answer": 1},
        {"context": "    return width", "choices": [" * height", " +", "!"], "answer": 2},
    ]
    task_dir = write_tasks(
        [LocalTask("tiny_mc", "multiple_choice", tuple(docs), target_delimiter="")], tmp_path / "tasks"
    )
    lm = TootsieLM(model, tokenizer, max_length=64, batch_size=BATCH)
    output = lm_eval.simple_evaluate(
        model=lm,
        tasks=["tiny_mc"],
        task_manager=lm_eval.tasks.TaskManager(include_path=str(task_dir), include_defaults=False),
        log_samples=False,
    )
    scores = [[lm.loglikelihood(requests((d["context"], choice)))[0][0] for choice in d["choices"]] for d in docs]
    expected_acc = np.mean([int(np.argmax(s)) == d["answer"] for s, d in zip(scores, docs)])
    assert output["results"]["tiny_mc"]["acc,none"] == pytest.approx(expected_acc)
    suite = TaskSuite(["tiny_mc", "tootsie_zen"], tmp_path / "work", include_paths=[str(task_dir)])
    metrics = suite.evaluate(lm, limit=4)
    assert metrics["tiny_mc"]["acc"] == pytest.approx(expected_acc) and metrics["tiny_mc"]["samples"] == 4
    zen = [r["text"] for r in builtin_tasks()[2].records[:4]]
    nats = sum(lm.loglikelihood_rolling(requests(*[(t,) for t in zen])))
    assert metrics["tootsie_zen"]["bits_per_byte"] == pytest.approx(
        -nats / np.log(2) / sum(len(t.encode()) for t in zen), rel=1e-5
    )
    with pytest.raises(TootsieError, match="unknown lm-eval tasks"):
        TaskSuite(["no_such_task"], tmp_path / "work")


def test_chat_template_renders_requests(model, tokenizer) -> None:
    lm = TootsieLM(model, tokenizer, max_length=64, batch_size=BATCH, chat_template=LLAMA3_TEMPLATE)
    text = lm.apply_chat_template([{"role": "user", "content": "def area"}])
    assert text.startswith("<|bos|><|start_header_id|>user") and text.endswith("assistant<|end_header_id|>\n\n")
    assert lm.tok_encode(text)[0] == lm.bos_id and lm.tok_encode(text)[1] != lm.bos_id
    assert lm.generator.turn_strings == ("<|eot_id|>",)
    with pytest.raises(TootsieError, match="no chat template"):
        TootsieLM(model, tokenizer, max_length=64).apply_chat_template([])
