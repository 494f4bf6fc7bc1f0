"""DPO end to end, in process: the reference step is content-addressed and reused; a tiny run learns its pairs, and
the preference carries over to held-out conversations with other kinds of rejected replies."""

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
from tootsie.train.loading import init_model, load_model
from tootsie.train.objectives import DPOObjective
from tootsie.train.schedule import WSDConfig
from tootsie.train.state import TrainState, build_optimizer, save_state

SEQ_LEN = 128
PAIRS = 8
HELD_OUT = 12
KINDS = ("refusal", "truncated", "shuffled", "another reply")
"""The rejected replies, in turn: each kind is 2 of the training pairs and 3 of the held-out ones."""


def _pairs(numbers: range, held_out: bool) -> list[dict[str, str]]:
    """`What is n + 1?` answered `It is {n + 1}.` (a preference a tiny model can pick up in a few steps), rejected
    replies cycling through KINDS; held-out pairs refuse, truncate and shuffle differently from the training ones."""
    refusals = ("I cannot help with that.", "Ask someone else.") if held_out else ("I refuse.", "I will not say.")
    lines = []
    for index, n in enumerate(numbers):
        rejected = {
            "refusal": refusals[index // len(KINDS) % len(refusals)],
            "truncated": "It" if held_out else "It is",
            "shuffled": f"is It {n + 1}." if held_out else f"{n + 1} It is.",
            "another reply": f"It is {numbers[(index + 1) % len(numbers)] + 1}.",
        }[KINDS[index % len(KINDS)]]
        lines.append({"prompt": f"What is {n} + 1?", "chosen": f"It is {n + 1}.", "rejected": rejected})
    return lines


def _tokenize_pairs(tmp_path: Path, name: str, lines: list[dict[str, str]]) -> tuple[str, dict]:
    """The pairs as a preference cache under `tmp_path/name` (llama3 template); its path and ledger."""
    source = tmp_path / f"{name}.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in lines), encoding="utf-8")
    config = PreferenceTokenizeConfig(str(source), str(tmp_path / "tok"), chat_template="llama3", max_tokens=SEQ_LEN)
    ledger = tokenize_preferences(config, str(tmp_path / name))
    assert ledger["pairs"] == len(lines)
    return str(tmp_path / name), ledger


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
    cache, ledger = _tokenize_pairs(tmp_path, "cache", _pairs(range(PAIRS), held_out=False))
    heldout, _ = _tokenize_pairs(tmp_path, "heldout", _pairs(range(50, 50 + HELD_OUT), held_out=True))
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
    reference, policy = load_model(model, str(reference_run)), load_model(model, str(tmp_path / "dpo"))
    metrics = preference_metrics(pair_scores(reference, cache, SEQ_LEN)[0], pair_scores(policy, cache, SEQ_LEN)[0], 0.5)
    assert metrics["policy_accuracy"] > metrics["reference_accuracy"]  # on the training pairs
    assert metrics["reward_accuracy"] >= 0.75 and metrics["reward_margin"] > 0
    assert np.mean([r["preference_accuracy"] for r in records[-3:]]) > records[0]["preference_accuracy"]

    # Held-out conversations: the implicit reward prefers the chosen reply (measured 12 of 12, mean margin 1.7),
    # per kind of rejected reply too, bar "another reply": telling n + 1 from another conversation's number takes
    # arithmetic that 12 steps do not teach, so those pairs only count in the totals. Whole-reply log-probs rank
    # truncated replies first in both models, so the policy's accuracy only has to hold its ground (measured 0.42
    # -> 0.75 here; in trials with other seeds the two tied).
    reference_scores, policy_scores = (
        pair_scores(reference, heldout, SEQ_LEN)[0],
        pair_scores(policy, heldout, SEQ_LEN)[0],
    )
    assert np.isfinite(policy_scores).all()
    held = preference_metrics(reference_scores, policy_scores, beta=0.5)
    assert held["reward_accuracy"] >= 0.75 and held["reward_margin"] > 0, held
    assert held["policy_accuracy"] >= held["reference_accuracy"], held
    policy_gap, reference_gap = (scores[:, 0] - scores[:, 1] for scores in (policy_scores, reference_scores))
    margins = 0.5 * (policy_gap - reference_gap)  # each pair's reward margin, as preference_metrics averages them
    for offset, kind in enumerate(KINDS[:3]):
        assert margins[offset :: len(KINDS)].mean() > 0, (kind, margins.tolist())
    # the CLI's held-out figure reads the same numbers
    evaluation = InLoopEvalConfig(heldout={"pairs": heldout}, tokenizer=str(tmp_path / "tok" / "tokenizer.json"))
    (tmp_path / "dpo.yaml").write_text(dump_config(replace(dpo, eval=evaluation)), encoding="utf-8")
    assert (
        main(["dpo", "--evaluate", "--config", str(tmp_path / "dpo.yaml"), "--out", str(tmp_path / "dpo"), "--json"])
        == 0
    )
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["pairs"]
    assert printed["pairs"] == HELD_OUT
    assert printed["policy_accuracy"] == pytest.approx(held["policy_accuracy"])
    assert printed["reward_margin"] == pytest.approx(held["reward_margin"], rel=1e-4)
