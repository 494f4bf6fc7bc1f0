"""`release` on executor records: phases through warm starts, mixture manifest, model card, metrics history."""

import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.release.conftest import LLAMA, make_checkpoint
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.chat_templates import CHATML_TEMPLATE
from tootsie.errors import TootsieError
from tootsie.release.hf_chat import FROM_FLAG, FROM_NOWHERE
from tootsie.release.manifest import component_tokens
from tootsie.release.release import release
from tootsie.release.run_history import run_history

BATCH_TOKENS = 4 * 8  # the fake run's batch size × seq_len


def test_history_follows_the_warm_start_and_cuts_the_earlier_phase(fake_run) -> None:
    history = run_history(fake_run.prefix)  # the prefix: the final training step is found
    pretrain, cooldown = history.phases
    assert (pretrain.name, pretrain.start_step, pretrain.end_step) == (
        "pretrain",
        0,
        10,
    )  # cut where the cooldown branched off
    assert (cooldown.name, cooldown.start_step, cooldown.end_step) == ("cooldown", 10, 30)
    assert (pretrain.start_tokens, pretrain.end_tokens, cooldown.end_tokens) == (
        0,
        10 * BATCH_TOKENS,
        30 * BATCH_TOKENS,
    )
    assert [c.revision for c in pretrain.checkpoints] == ["step-10-tokens-320"]  # step 20 is not in the lineage
    assert [c.step for c in cooldown.checkpoints] == [20, 30] and history.final.revision == "step-30-tokens-960"
    assert [r["step"] for r in pretrain.metrics()] == list(range(10))
    assert run_history(fake_run.paths["fake/train/cooldown"]).final == history.final


def test_release_writes_manifest_card_metrics_and_hf_folder(fake_run, tmp_path) -> None:
    summary = release(fake_run.prefix, tmp_path / "release")
    out = tmp_path / "release"
    assert {
        "README.md",
        "mixture_manifest.json",
        "metrics.jsonl",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "generation_config.json",
    } <= {p.name for p in out.iterdir()}
    assert summary["revision"] == "step-30-tokens-960" and summary["metrics_records"] == 30

    manifest = json.loads((out / "mixture_manifest.json").read_text())
    datasets = {d["name"]: d for d in manifest["datasets"]}
    code = datasets["code"]
    assert code["step"] == fake_run.paths["fake/tokenized/code"].name.replace("code-", "fake/tokenized/code-")
    assert (
        code["hash"] == code["step"].rsplit("-", 1)[1]
        and code["tokens"] == fake_run.cache_tokens["code"]
        and code["documents"] == 7
    )
    assert code["phases"]["pretrain"] == {
        "tokens": 160,
        "epochs": 160 / fake_run.cache_tokens["code"],
        "weights": [0.5],
    }
    assert code["phases"]["cooldown"]["tokens"] == round(0.3 * 20 * BATCH_TOKENS) and code["phases"]["cooldown"][
        "weights"
    ] == [0.3]
    assert [(f["name"], f["documents_removed"]) for f in code["filters"]] == [("quality", 4), ("normalize_guards", 1)]
    assert [(d["name"], d["documents_removed"]) for d in code["dedup"]] == [
        ("fuzzy_duplicate", 2),
        ("exact_content", 3),
    ]
    assert all("prose" not in step["step"] for step in code["lineage"])  # the shared tokenizer does not mix lineages
    assert code["dedup"][0]["settings"]["minhash"]["num_perms"] == 286
    assert manifest["tokenizer"]["step"].startswith("fake/tokenizer-")

    card = (out / "README.md").read_text()
    for expected in (
        "## Architecture",
        "`LlamaForCausalLM`",
        "## Training phases",
        "| *cooldown* | 10 → 30 | 320 → 960 |",
        "### Phase *pretrain* (steps 0 → 10)",
        "**step-30-tokens-960** (this folder)",
        "step-10-tokens-320",
        "## Optimizer and schedule",
        "AdamW(",
        "WSD(",
        "fuzzy_duplicate (−2 docs)",
        "| final_ema | cooldown | ema | 2.5000 | 3.0000 | 2.7500 | 2.8000 |",
        "mixture_manifest.json",
        "commit `abc123`",
    ):
        assert expected in card, expected
    assert "step-20-tokens-640 | pretrain" not in card
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert (
        [r["step"] for r in records] == list(range(30))
        and {r["run"] for r in records[:10]} == {"pretrain"}
        and records[-1]["run"] == "cooldown"
    )


def test_a_chat_release_ships_the_template_and_says_how_to_stop(fake_run, tmp_path) -> None:
    plain = release(fake_run.prefix, tmp_path / "plain")
    assert plain["chat_template"]["origin"] == FROM_NOWHERE
    assert "### Chat" not in (tmp_path / "plain" / "README.md").read_text()

    summary = release(fake_run.prefix, tmp_path / "chat", chat_template="chatml")
    assert summary["chat_template"]["origin"] == FROM_FLAG and summary["chat_template"]["end_of_turn"] == "<|im_end|>"
    card = (tmp_path / "chat" / "README.md").read_text()
    # the fake run's tokenizer has no <|im_end|> token, so the card passes it as a stop string
    assert "`chatml` chat template" in card and 'stop_strings=["<|im_end|>"], tokenizer=tokenizer' in card
    assert json.loads((tmp_path / "chat" / "tokenizer_config.json").read_text())["chat_template"] == CHATML_TEMPLATE


def test_release_with_every_checkpoint_as_a_revision(fake_run, tmp_path) -> None:
    summary = release(fake_run.paths["fake/train/cooldown"], tmp_path / "release", all_checkpoints=True, ema=True)
    assert summary["revisions"] == ["step-10-tokens-320", "step-20-tokens-640"] and summary["weights"] == "ema"
    record = json.loads((tmp_path / "release" / "revisions" / "step-10-tokens-320" / "tootsie_export.json").read_text())
    assert record["step"] == 10 and record["weights"] == "ema" and "/fake/train/pretrain-" in record["checkpoint"]
    assert "[step-10-tokens-320](revisions/step-10-tokens-320)" in (tmp_path / "release" / "README.md").read_text()


def test_a_plain_training_directory_releases_with_what_it_recorded(tmp_path, tokenizer_file) -> None:
    run = tmp_path / "run"
    make_checkpoint(run, LLAMA, step=5, tokens=160)
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 3.0, "eval/bpb/code": 2.0}) + "\n" for s in range(5))
    )
    with pytest.raises(TootsieError, match="pass --tokenizer"):
        release(run, tmp_path / "release")
    summary = release(run, tmp_path / "release", tokenizer=tokenizer_file)
    manifest = json.loads((tmp_path / "release" / "mixture_manifest.json").read_text())
    card = (tmp_path / "release" / "README.md").read_text()
    assert summary["phases"] == [{"name": "run", "steps": [0, 5], "tokens": [0, 160]}] and manifest["datasets"] == []
    assert "was not trained through the executor" in manifest["phases"][0]["note"] and "| run | 4 | 2.0000 |" in card


def test_ambiguous_or_empty_prefixes_are_refused(fake_run, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(TootsieError, match="holds no training run"):
        release(tmp_path / "empty", tmp_path / "out")
    shutil.copytree(fake_run.paths["fake/train/pretrain"], fake_run.prefix / "fake" / "train" / "pretrain-000000000000")
    with pytest.raises(TootsieError, match="holds 2 final training runs"):
        release(fake_run.prefix, tmp_path / "out")


@settings(max_examples=30, deadline=None)
@given(
    starts=st.lists(st.integers(1, 60), max_size=3, unique=True),
    transitions=st.lists(st.integers(0, 6), min_size=3, max_size=3),
    window=st.tuples(st.integers(0, 70), st.integers(1, 30)),
    batch_change=st.integers(1, 70),
)
def test_component_tokens_equal_the_step_by_step_sum(starts, transitions, window, batch_change) -> None:
    starts = sorted(starts)
    stages = [MixtureStage(0, {"a": 1.0, "b": 1.0})]
    for i, (start, following) in enumerate(zip(starts, [*starts[1:], 10**6])):
        stages.append(
            MixtureStage(start, {"a": 0.1 + 0.3 * i, "b": 0.6}, transition_steps=min(transitions[i], following - start))
        )
    mixture = MixtureConfig(
        caches={"a": "/a", "b": "/b"},
        stages=tuple(stages),
        seq_len=8,
        batch_schedule=BatchSchedule(((0, 4), (batch_change, 6))),
    )
    start, end = window[0], window[0] + window[1]
    brute = sum(mixture.weights_at(s) * mixture.batch_schedule.batch_size(s) * 8 for s in range(start, end))
    assert np.allclose(component_tokens(mixture, start, end), brute)
