"""Paloma's layout and definitions: a made-up mirror read, scored against a hand computation, bad layouts refused."""

import gzip
import json
import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from tests.eval.paloma_fixtures import train_fixture_tokenizer, write_gz_jsonl, write_mirror
from tests.eval.tiny_checkpoint import TINY_MODEL, RandomCheckpointConfig, write_random_checkpoint
from tootsie.cli.main import main
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.errors import TootsieError
from tootsie.eval.bpb_suite import suite_layout
from tootsie.eval.paloma import (
    PalomaDocument,
    PreparedSource,
    discover_sources,
    evaluate_source,
    is_paloma_mirror,
    prepare_mirror,
    prepare_source,
    read_documents,
    rolling_windows,
    score_rows,
    summarize_source,
)
from tootsie.models.llama import LlamaModel

SEQ_LEN = 8


@eqx.filter_jit
def forward(model: LlamaModel, inputs: jax.Array) -> jax.Array:
    """Logits of one document's tokens, on its own."""
    return model(inputs, jnp.zeros_like(inputs))


@pytest.fixture(scope="module")
def mirror_and_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("paloma")
    return write_mirror(root), train_fixture_tokenizer(root)


def test_the_release_layout_is_read_with_its_subdomains(mirror_and_tokenizer, tmp_path) -> None:
    mirror, _ = mirror_and_tokenizer
    assert is_paloma_mirror(mirror) and suite_layout(str(mirror)) == "paloma"
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "code.jsonl").write_text('{"text": "x"}\n')
    assert not is_paloma_mirror(tmp_path / "flat") and suite_layout(str(tmp_path / "flat")) == "folders"
    sources = discover_sources(mirror)
    assert sorted(sources) == ["c4_100_domains", "c4_en", "dolma_100_subreddits"]
    assert [p.name for p in sources["c4_100_domains"]] == ["val_00.jsonl.gz", "val_01.jsonl.gz"]
    assert [p.name for p in discover_sources(mirror, "test", ["c4_en"])["c4_en"]] == ["test.jsonl.gz"]
    # no `subdomain` field: the source is its one subdomain; with it, records group by it whatever file they are in
    assert {d.subdomain for d in read_documents("c4_en", sources["c4_en"])} == {"c4_en"}
    reddit = read_documents("dolma_100_subreddits", sources["dolma_100_subreddits"])
    assert [d.subdomain for d in reddit] == ["r_depression", "r_python", "r_depression", "r_python"]
    capped = read_documents("dolma_100_subreddits", sources["dolma_100_subreddits"], max_documents=1)
    assert [(d.subdomain, d.text) for d in capped] == [(d.subdomain, d.text) for d in reddit[:2]]


@pytest.mark.parametrize("length", [0, 1, 7, 8, 9, 16, 23])
def test_windows_are_lm_evals_rolling_windows_made_disjoint(length: int) -> None:
    """catwalk's `predict_chunk_perplexity` (Paloma's inference) uses exactly these lm-eval functions."""
    tokens = list(range(100, 100 + length))
    expected = [
        (list(context), list(targets))
        for context, targets in map(make_disjoint_window, get_rolling_token_windows(tokens, 7, SEQ_LEN, 1))
    ]
    # lm-eval's disjoint form is (context, scored targets); the model's input is context + scored targets[:-1]
    windows = rolling_windows(tokens, 7, SEQ_LEN)
    assert [(inputs[: first + 1], targets[first:]) for inputs, targets, first in windows] == expected
    assert all(inputs[1:] == targets[:-1] and len(inputs) <= SEQ_LEN for inputs, targets, _ in windows)
    assert sum(len(targets) - first for _, targets, first in windows) == length


def _hand_figures(
    model: LlamaModel, texts_by_subdomain: dict[str, list[str]], tokenizer: str, seq_len: int
) -> dict[str, tuple[float, float]]:
    """Per-subdomain BPB and token perplexity from per-token log-probs, one unbatched forward pass per window."""
    tok, special = load_with_special_tokens(tokenizer)
    figures = {}
    for subdomain, texts in texts_by_subdomain.items():
        nats, tokens, num_bytes = 0.0, 0, 0
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            tokens, num_bytes = tokens + len(ids), num_bytes + len(text.encode("utf-8"))
            padded = [special.require("bos"), *ids]  # padded[j + 1] is ids[j]
            for start in range(0, len(ids), seq_len):
                end = min(start + seq_len, len(ids))
                first = max(0, end - seq_len)  # the window: the seq_len tokens before its last target
                inputs = np.zeros((1, seq_len), dtype=np.int32)  # right-padded: causal, so the pad changes nothing
                inputs[0, : end - first] = padded[first:end]
                logits = np.asarray(forward(model, jnp.asarray(inputs)), dtype=np.float64)[0]
                top = logits.max(-1, keepdims=True)
                logprobs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
                nats -= sum(logprobs[j - first, padded[j + 1]] for j in range(start, end))
        figures[subdomain] = (nats / math.log(2) / num_bytes, math.exp(nats / tokens))
    return figures


@pytest.mark.parametrize("seq_len", [SEQ_LEN, 64])
def test_figures_equal_a_hand_computation_and_macro_is_the_mean_over_subdomains(
    mirror_and_tokenizer, seq_len: int
) -> None:
    mirror, tokenizer = mirror_and_tokenizer
    model = LlamaModel(TINY_MODEL, key=jax.random.PRNGKey(0))
    prepared = prepare_mirror(mirror, tokenizer, seq_len)
    long_windows = len(set(prepared["c4_en"].segments[prepared["c4_en"].position_document == 0].tolist()))
    assert long_windows > 1  # the long document spans several windows
    windows = len(set(prepared["c4_100_domains"].segments.ravel().tolist()) - {-1})
    assert windows >= 4 and (prepared["c4_100_domains"].inputs.shape[0] < windows) == (seq_len == 64)  # packed
    results = {name: evaluate_source(model, source, batch_size=4) for name, source in prepared.items()}
    for name, result in results.items():  # several batches per source, the last one padded
        texts: dict[str, list[str]] = {}
        for document in read_documents(name, discover_sources(mirror, "val", [name])[name]):
            texts.setdefault(document.subdomain, []).append(document.text)
        hand = _hand_figures(model, texts, tokenizer, seq_len)
        assert sorted(result["subdomains"]) == sorted(hand)
        for subdomain, (bpb, ppl) in hand.items():
            assert math.isclose(result["subdomains"][subdomain]["bpb"], bpb, rel_tol=1e-5), (name, subdomain)
            assert math.isclose(result["subdomains"][subdomain]["ppl_token"], ppl, rel_tol=1e-5), (name, subdomain)
        assert math.isclose(result["macro_bpb"], float(np.mean([b for b, _ in hand.values()])), rel_tol=1e-5)
        assert math.isclose(result["macro_ppl_token"], float(np.mean([p for _, p in hand.values()])), rel_tol=1e-5)
    # with unequal subdomains, macro (each subdomain weighs the same) and micro (each byte does) differ
    c4_domains = results["c4_100_domains"]
    assert not math.isclose(c4_domains["macro_bpb"], c4_domains["micro_bpb"], rel_tol=1e-9)


def test_macro_and_micro_on_the_worked_example() -> None:
    """The module docstring's example: subdomains at 1.0 bpb over 100 bytes and 3.0 over 300 give 2.0 and 2.5."""
    source = PreparedSource(
        name="s",
        subdomains=("a", "b"),
        inputs=np.zeros((1, 2), np.int32),
        targets=np.zeros((1, 2), np.int32),
        segments=np.array([[0, 1]]),
        mask=np.ones((1, 2), np.float32),
        position_subdomain=np.array([[0, 1]]),
        position_document=np.array([[0, 1]]),
        bytes=np.array([100, 300]),
        tokens=np.array([50, 100]),
        documents=np.array([1, 1]),
    )
    result = summarize_source(source, np.array([[100 * math.log(2), 900 * math.log(2)]]))
    assert math.isclose(result["macro_bpb"], 2.0) and math.isclose(result["micro_bpb"], 2.5)
    assert math.isclose(result["subdomains"]["a"]["ppl_token"], math.exp(100 * math.log(2) / 50))


def test_a_document_is_never_concatenated_with_another(mirror_and_tokenizer) -> None:
    _, tokenizer = mirror_and_tokenizer
    model = LlamaModel(TINY_MODEL, key=jax.random.PRNGKey(1))
    alone = PalomaDocument("a", "The cat sat on the mat by the door, twice over.")
    documents = [PalomaDocument("a", "Rain."), alone, PalomaDocument("b", "Cells divide by mitosis in water.")]
    together = prepare_source("s", documents, tokenizer, 64)
    single = prepare_source("s", [alone], tokenizer, 64)
    assert together.inputs.shape[0] == 1  # the three documents' windows share one row, as separate segments
    # every window holds one document's tokens: its scored targets are a run of that document's ids, in order
    tok, _ = load_with_special_tokens(tokenizer)
    for window in set(together.segments.ravel().tolist()) - {-1}:
        scored = (together.segments == window) & (together.mask > 0)
        (number,) = set(together.position_document[scored].tolist())
        ids = tok.encode(documents[number].text, add_special_tokens=False).ids
        assert together.targets[scored].tolist() == ids  # each is shorter than one window
    # so a document's loss does not depend on its neighbours in the row
    together_nats = score_rows(model, together)[together.position_document == 1].sum()
    assert math.isclose(together_nats, score_rows(model, single).sum(), rel_tol=1e-6)  # shared attention: ~1e-4


def test_bad_layouts_get_errors_naming_the_path_and_what_was_expected(mirror_and_tokenizer, tmp_path) -> None:
    mirror, tokenizer = mirror_and_tokenizer
    with pytest.raises(TootsieError, match=r"Paloma mirror .*nowhere not found"):
        discover_sources(tmp_path / "nowhere")
    with pytest.raises(TootsieError, match=r"source 'gab': no val/\*\.jsonl\.gz files under .*gab.*<source>/val/"):
        discover_sources(mirror, "val", ["gab"])
    with pytest.raises(TootsieError, match=r"source name '\.\./c4_en' is not a folder name"):
        discover_sources(mirror, "val", ["../c4_en"])
    with pytest.raises(TootsieError, match="split 'train' is not one of"):
        discover_sources(mirror, "train")
    bad = tmp_path / "bad"
    (bad / "c4_en" / "val").mkdir(parents=True)
    (bad / "c4_en" / "val" / "val.jsonl.gz").write_text("version https://git-lfs.github.com/spec/v1\n")
    with pytest.raises(TootsieError, match=r"cannot read Paloma file .*val\.jsonl\.gz.*git lfs pull"):
        read_documents("c4_en", discover_sources(bad)["c4_en"])
    write_gz_jsonl(bad / "c4_en" / "val" / "val.jsonl.gz", [{"text": "ok"}, {"id": "no text"}])
    with pytest.raises(TootsieError, match=r"val\.jsonl\.gz:2: a Paloma record needs a string `text`"):
        read_documents("c4_en", discover_sources(bad)["c4_en"])
    write_gz_jsonl(bad / "c4_en" / "val" / "val.jsonl.gz", [["a", "list"]])  # type: ignore[list-item]
    with pytest.raises(TootsieError, match=r"val\.jsonl\.gz:1: a Paloma record is a JSON object"):
        read_documents("c4_en", discover_sources(bad)["c4_en"])
    with gzip.open(bad / "c4_en" / "val" / "val.jsonl.gz", "wt") as out:
        out.write(json.dumps({"text": "fine"}) + "\n{not json\n")
    with pytest.raises(TootsieError, match="cannot read Paloma file"):
        read_documents("c4_en", discover_sources(bad)["c4_en"])
    with pytest.raises(TootsieError, match="layout 'flat' is not one of"):
        suite_layout(str(mirror), "flat")


def test_bpb_suite_reads_a_paloma_mirror(mirror_and_tokenizer, tmp_path, capsys) -> None:
    mirror, tokenizer = mirror_and_tokenizer
    write_random_checkpoint(RandomCheckpointConfig(seed=2), str(tmp_path / "run"))
    argv = ["eval", "bpb-suite", "--checkpoint", str(tmp_path / "run"), "--suite", str(mirror)]
    argv += ["--tokenizer", tokenizer, "--seq-len", str(SEQ_LEN), "--subsets", "c4_en,dolma_100_subreddits", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["layout"] == "paloma" and result["split"] == "val" and result["step"] == 5
    assert sorted(result["bpb"]) == ["c4_en", "dolma_100_subreddits"]
    model = LlamaModel(TINY_MODEL, key=jax.random.PRNGKey(2))
    expected = evaluate_source(
        model, prepare_mirror(mirror, tokenizer, SEQ_LEN, sources=["dolma_100_subreddits"])["dolma_100_subreddits"]
    )
    reddit = result["sources"]["dolma_100_subreddits"]
    assert math.isclose(reddit["macro_bpb"], expected["macro_bpb"], rel_tol=1e-6)
    assert reddit["subdomains"]["r_python"]["documents"] == 2
    assert result["bpb"]["dolma_100_subreddits"] == reddit["macro_bpb"]
    assert main([*argv[:-3], "--subsets", "gab"]) == 2
    assert "source 'gab'" in capsys.readouterr().err
    assert main([*argv, "--max-sequences", "3"]) == 2  # a folders-layout flag would do nothing here: refused
    assert "--max-sequences: only the folders layout reads this" in capsys.readouterr().err


def test_the_first_token_is_predicted_from_bos_or_from_eos_as_paloma_does(mirror_and_tokenizer) -> None:
    _, tokenizer = mirror_and_tokenizer
    _, special = load_with_special_tokens(tokenizer)
    documents = [PalomaDocument("a", "Rain fell on the town all day long, and then some more.")]
    for prefix in ("bos", "eos"):
        prepared = prepare_source("s", documents, tokenizer, SEQ_LEN, prefix_token=prefix)
        assert prepared.inputs[0, 0] == special.require(prefix) and prepared.mask[0, 0] == 1.0
        later = prepared.inputs[1:][prepared.mask[1:] > 0].tolist()  # later windows start inside the text
        assert prepared.inputs.shape[0] > 1 and special.require(prefix) not in later
    assert special.require("bos") != special.require("eos")
    with pytest.raises(TootsieError, match="prefix_token 'pad' is not one of"):
        prepare_source("s", documents, tokenizer, SEQ_LEN, prefix_token="pad")
