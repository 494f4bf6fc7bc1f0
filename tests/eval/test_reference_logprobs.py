"""The reference log-prob step: a checkpoint or cache named by its content hashes the same wherever it lies."""

import json
import shutil

import numpy as np
import pytest

from tests.datakit.llama3_tokenizer import build_llama3_tokenizer
from tests.eval.tiny_checkpoint import RandomCheckpointConfig, write_random_checkpoint
from tests.two_prefixes import run_under_two_prefixes
from tootsie.datakit.preference_data import PreferenceTokenizeConfig, tokenize_preferences
from tootsie.eval.reference_logprobs import DigestedDirectory, reference_logprobs_step
from tootsie.executor import Step, run_experiment, step_hash
from tootsie.executor.manifest import differing, read_manifest
from tootsie.models.llama import LlamaConfig
from tootsie.train.dpo import REFERENCE_LOGPROBS_FILE, REFERENCE_RECORD_FILE

SEQ_LEN = 128


@pytest.fixture(scope="module")
def cache_and_model(tmp_path_factory) -> tuple[str, LlamaConfig]:
    root = tmp_path_factory.mktemp("pairs")
    build_llama3_tokenizer(root / "tok")
    pairs = [{"prompt": f"What is {n} + 1?", "chosen": f"It is {n + 1}.", "rejected": "I refuse."} for n in range(4)]
    (root / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    config = PreferenceTokenizeConfig(
        str(root / "pairs.jsonl"), str(root / "tok"), chat_template="llama3", max_tokens=SEQ_LEN
    )
    ledger = tokenize_preferences(config, str(root / "cache"))
    model = LlamaConfig(
        vocab_size=ledger["vocab_size"], hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1
    )
    return str(root / "cache"), model


@pytest.mark.timeout(300)
def test_a_copied_checkpoint_and_cache_give_the_same_hash_and_bytes(cache_and_model, tmp_path) -> None:
    cache, model = cache_and_model
    write_random_checkpoint(RandomCheckpointConfig(model=model), str(tmp_path / "here" / "run"))
    shutil.copytree(tmp_path / "here", tmp_path / "elsewhere" / "moved")
    shutil.copytree(cache, tmp_path / "elsewhere" / "cache")
    here = reference_logprobs_step("dpo-reference", model, str(tmp_path / "here" / "run"), cache, SEQ_LEN)
    there = reference_logprobs_step(
        "dpo-reference",
        model,
        str(tmp_path / "elsewhere" / "moved" / "run"),
        str(tmp_path / "elsewhere" / "cache"),
        SEQ_LEN,
    )
    assert isinstance(here.config.checkpoint, DigestedDirectory) and step_hash(here) == step_hash(there)
    outputs = []
    for step, prefix in ((here, tmp_path / "a"), (there, tmp_path / "b")):
        report = run_experiment([step], prefix)
        assert report.ok, [(s.name, s.error) for s in report.steps]
        outputs.append(report.steps[0].output_path)
    assert differing(*(read_manifest(out) for out in outputs)) == []
    record = json.loads((tmp_path / "a" / f"dpo-reference-{step_hash(here)}" / REFERENCE_RECORD_FILE).read_text())
    assert record["checkpoint"] is None and record["cache"] is None and record["checkpoint_step"] == 5
    assert record["checkpoint_sha256"] == here.config.checkpoint.sha256 and str(tmp_path) not in json.dumps(record)


@pytest.mark.timeout(300)
def test_a_checkpoint_from_a_step_is_named_by_its_step_under_any_prefix(cache_and_model, tmp_path) -> None:
    cache, model = cache_and_model
    trained = Step("reference/run", write_random_checkpoint, RandomCheckpointConfig(model=model))
    step = reference_logprobs_step("reference/logprobs", model, trained.ref(), cache, SEQ_LEN)
    (graph, out, left), (_, _, right) = run_under_two_prefixes(step, tmp_path)
    assert differing(left, right) == []
    record = json.loads((out / REFERENCE_RECORD_FILE).read_text())
    assert record["checkpoint"] == f"{graph.node(trained).id}/checkpoints/step-000005"
    assert record["checkpoint_sha256"] is None and record["cache_sha256"] == step.config.cache.sha256
    assert record["pairs"] == 4 and np.isfinite(np.load(out / REFERENCE_LOGPROBS_FILE)).all()
