"""DPO end to end, in process: the reference step is content-addressed and reused; a tiny run learns its pairs."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.datakit.llama3_tokenizer import build_llama3_tokenizer
from tootsie.cli.main import main
from tootsie.configfile import dump_config
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.data.sequences import DocumentConfig
from tootsie.datakit.preference_data import PreferenceTokenizeConfig, tokenize_preferences
from tootsie.eval.preference_eval import preference_metrics
from tootsie.eval.reference_logprobs import pair_scores, reference_logprobs_step
from tootsie.eval.training import run_training
from tootsie.executor import run_experiment, step_hash
from tootsie.models.llama import LlamaConfig
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.train.checkpoint import wait_for_checkpoints
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig, WarmStartConfig
from tootsie.train.dpo import REFERENCE_RECORD_FILE
from tootsie.train.objectives import DPOObjective
from tootsie.train.schedule import WSDConfig
from tootsie.train.trainer import TrainState, build_optimizer, init_model, load_model, save_state

SEQ_LEN = 128
PAIRS = 8


def _config(model: LlamaConfig, cache: str, **overrides: object) -> TrainConfig:
    data = MixtureConfig(
        caches={"pairs": cache},
        stages=(MixtureStage(0, {"pairs": 1.0}),),
        seq_len=SEQ_LEN,
        batch_schedule=BatchSchedule.constant(4),
        packing=DocumentConfig(),
    )
    schedule = WSDConfig(peak_lr=3e-3, warmup_steps=1, decay_steps=2, total_steps=12)
    fields = {"model": model, "data": data, "num_steps": 12, "schedule": schedule, "ema": None}
    return TrainConfig(**(fields | {"checkpoints": CheckpointConfig(every_steps=12, every_minutes=None)} | overrides))


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_reference_step_is_content_addressed_and_dpo_raises_preference_accuracy(tmp_path: Path, capsys) -> None:
    build_llama3_tokenizer(tmp_path / "tok")
    # a preference a tiny model can pick up in a few steps: answer the question rather than refuse
    lines = [
        {"prompt": f"What is {n} + 1?", "chosen": f"It is {n + 1}.", "rejected": "I refuse."} for n in range(PAIRS)
    ]
    source = tmp_path / "pairs.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in lines), encoding="utf-8")
    cache = str(tmp_path / "cache")
    config = PreferenceTokenizeConfig(str(source), str(tmp_path / "tok"), chat_template="llama3", max_tokens=SEQ_LEN)
    ledger = tokenize_preferences(config, cache)
    assert ledger["pairs"] == PAIRS
    model = LlamaConfig(
        vocab_size=ledger["vocab_size"], hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=1
    )
    # the reference: a fresh model's checkpoint (the SFT model in the demo)
    base = _config(model, cache)
    params = init_model(base)
    reference_run = tmp_path / "reference-run"
    save_state(reference_run, TrainState(params, build_optimizer(base).init(params), None, 0), base, "permanent")
    wait_for_checkpoints()

    step = reference_logprobs_step("dpo-reference", model, str(reference_run), cache, SEQ_LEN)
    first = run_experiment([step], tmp_path / "prefix")
    record = Path(first.steps[0].output_path) / REFERENCE_RECORD_FILE
    written = record.stat().st_mtime_ns
    again = reference_logprobs_step("dpo-reference", model, str(reference_run), cache, SEQ_LEN)
    assert step_hash(again) == step_hash(step)
    second = run_experiment([again], tmp_path / "prefix")
    assert second.steps[0].output_path == first.steps[0].output_path and record.stat().st_mtime_ns == written
    # the same checkpoint path with other weights is another reference: a new hash, a new output path
    changed = tmp_path / "changed-run"
    shutil.copytree(reference_run, changed)
    before = step_hash(reference_logprobs_step("dpo-reference", model, str(changed), cache, SEQ_LEN))
    tensor = max(
        (p for p in changed.rglob("*") if p.is_file() and not p.name.startswith(".")), key=lambda p: p.stat().st_size
    )
    tensor.write_bytes(tensor.read_bytes()[:-1] + bytes([tensor.read_bytes()[-1] ^ 1]))
    after = step_hash(reference_logprobs_step("dpo-reference", model, str(changed), cache, SEQ_LEN))
    assert before != after

    dpo = _config(
        model,
        cache,
        objective=DPOObjective(reference=first.steps[0].output_path, beta=0.5),
        warm_start=WarmStartConfig(str(reference_run), load_optimizer=False, reset_step=True),
    )
    run_training(dpo, str(tmp_path / "dpo"))
    records = [json.loads(line) for line in (tmp_path / "dpo" / METRICS_FILE).read_text().splitlines()]
    assert records[0]["loss"] == pytest.approx(np.log(2.0), abs=1e-3)  # policy = reference at step 0: margin 0
    assert all(
        {"reward_margin", "preference_accuracy", "chosen_reward", "rejected_reward"} <= r.keys() for r in records
    )
    reference_scores, _ = pair_scores(load_model(model, str(reference_run)), cache, SEQ_LEN)
    policy_scores, _ = pair_scores(load_model(model, str(tmp_path / "dpo")), cache, SEQ_LEN)
    metrics = preference_metrics(reference_scores, policy_scores, beta=0.5)
    assert metrics["policy_accuracy"] > metrics["reference_accuracy"]
    assert metrics["reward_accuracy"] >= 0.75 and metrics["reward_margin"] > 0
    assert np.mean([r["preference_accuracy"] for r in records[-3:]]) > records[0]["preference_accuracy"]
    assert np.isfinite(policy_scores).all()
    # the CLI's held-out figure reads the same numbers (here the training pairs stand in for held-out ones)
    evaluation = InLoopEvalConfig(heldout={"pairs": cache}, tokenizer=str(tmp_path / "tok" / "tokenizer.json"))
    (tmp_path / "dpo.yaml").write_text(dump_config(replace(dpo, eval=evaluation)), encoding="utf-8")
    assert (
        main(["dpo", "--evaluate", "--config", str(tmp_path / "dpo.yaml"), "--out", str(tmp_path / "dpo"), "--json"])
        == 0
    )
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["pairs"]
    assert printed["pairs"] == PAIRS
    assert printed["policy_accuracy"] == pytest.approx(metrics["policy_accuracy"])
    assert printed["reward_margin"] == pytest.approx(metrics["reward_margin"], rel=1e-4)
