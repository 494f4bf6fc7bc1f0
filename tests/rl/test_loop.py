"""The RL loop end to end at the demo's test size: rollouts as the train loop's data, shards, metrics, resume.

`tootsie rl example-config --tiny` builds a tiny SFT'd policy (seconds); each
run here is 3 iterations of RLOO on it. The kill tests SIGKILL a real
`tootsie train --config rl.yaml` process mid-rollout and mid-update
(`TOOTSIE_FAULT=rl:<point>:1`) and rerun it: rollouts, losses and final
weights must equal an uninterrupted run's bit for bit.
"""

import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.processes import communicate
from tootsie.cli import main as cli_main
from tootsie.configfile import dump_config
from tootsie.data.source import SuppliedRows
from tootsie.demos.rl_demo import TINY, rl_example
from tootsie.errors import TootsieError
from tootsie.rl.buffer import RolloutBuffer, trained_groups
from tootsie.rl.codec import TokenizerCodec
from tootsie.rl.config import RLConfig, RLEvaluation
from tootsie.rl.evaluate import evaluate_rl, heldout_scores, paired_bootstrap
from tootsie.rl.loop import load_rl_config, run_rl
from tootsie.rl.rollout_store import list_shards, read_rollouts
from tootsie.train.checkpoint import list_checkpoints, read_tensors
from tootsie.train.faults import FAULT_ENV
from tootsie.train.loading import load_model
from tootsie.train.objectives import NextTokenObjective
from tootsie.train.rl_objectives import DistillObjective

STRICT_DTYPES = False
"""The train loop runs as training does (tests/rl/conftest.py)."""
ITERATIONS = TINY.iterations
TIMING = ("step_seconds", "tokens_per_s", "rl/tokens_per_s", "rl/rollout_seconds", "mfu")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> str:
    """Where the demo's SFT'd policy (and teacher) are built, once for the module."""
    return str(tmp_path_factory.mktemp("rl-prefix"))


@pytest.fixture(scope="module")
def config(prefix) -> RLConfig:
    """The tiny example config over its SFT'd policy."""
    return rl_example(prefix, TINY)


@pytest.fixture(scope="module")
def config_file(config, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rl-config") / "rl.yaml"
    path.write_text(dump_config(config))
    return path


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _train(config_file: Path, out: Path, fault: str | None = None) -> int:
    env = {key: value for key, value in os.environ.items() if key != FAULT_ENV}
    env |= {FAULT_ENV: fault} if fault else {}
    command = [sys.executable, "-m", "tootsie.cli.main", "train", "--config", str(config_file), "--out", str(out)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = communicate(process, timeout=300)
    assert fault is not None or process.returncode == 0, err[-3000:]
    return process.returncode


def test_each_iteration_samples_stores_and_logs(config, tmp_path, caplog) -> None:
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="tootsie.rl.buffer"):
        state = run_rl(config, out)
    assert state.step == ITERATIONS
    records = _records(out)
    assert [r["step"] for r in records] == list(range(ITERATIONS))
    for record in records:
        for name in ("rl/kl", "rl/truncated_fraction", "rl/entropy", "rl/clip_fraction", "rl/advantage_std"):
            assert name in record, name
        assert ("rl/reward_mean" in record) == (record["rl/counted_fraction"] > 0)
        assert record["rl/kl_bound"] == config.rl.kl_bound
    shards = list_shards(out / "rollouts")
    assert [(i, seed) for i, seed, _ in shards] == [(i, 0) for i in range(ITERATIONS)]
    for iteration, _, path in shards:
        batch, provenance = read_rollouts(path)
        assert provenance.policy_step == iteration and provenance.environment == "arithmetic"
        assert len(batch.task_ids) == config.train.data.batch_size
        assert batch.task_ids[0] == f"arithmetic/train/0/{config.rl.first_task + iteration * TINY.prompts}"
    # the tiny policy rarely stops within 12 tokens: the log says so instead of scoring 0 silently
    if any(r["rl/truncated_fraction"] > 0.5 for r in records):
        assert "hit max_new_tokens" in caplog.text
    # a temporary checkpoint per iteration, only the newest kept, and the final permanent one
    assert [step for step, _ in list_checkpoints(out / "checkpoints")] == [ITERATIONS]
    result = evaluate_rl(config, out)
    expected = {"exact_match_before", "exact_match_after", "greedy_exact_match_after", "interval", "kl_max", "kl_bound"}
    assert set(result) >= expected
    low, high = result["interval"]
    assert low <= result["difference"] <= high
    assert list(result)[-1] == "interval"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("point", ["mid-rollout", "mid-update"])
def test_a_run_killed_mid_iteration_resumes_bit_identically(config_file, tmp_path_factory, point) -> None:
    root = tmp_path_factory.getbasetemp() / "rl-straight"
    if not (root / "checkpoints").is_dir():
        _train(config_file, root)
    out = tmp_path_factory.mktemp(f"rl-{point}") / "run"
    assert _train(config_file, out, f"rl:{point}:1") == -signal.SIGKILL
    shards = [i for i, _, _ in list_shards(out / "rollouts")]
    assert shards == ([0] if point == "mid-rollout" else [0, 1])
    _train(config_file, out)
    strip = [{k: v for k, v in r.items() if k not in TIMING} for r in _records(out)]
    assert strip == [{k: v for k, v in r.items() if k not in TIMING} for r in _records(root)]
    for (_, _, a), (_, _, b) in zip(list_shards(out / "rollouts"), list_shards(root / "rollouts"), strict=True):
        ours, theirs = read_rollouts(a)[0], read_rollouts(b)[0]
        assert np.array_equal(ours.tokens, theirs.tokens)
        assert np.array_equal(ours.policy_logprobs, theirs.policy_logprobs)
    final = {s: p for s, p in list_checkpoints(out / "checkpoints")}[ITERATIONS]
    expected = {s: p for s, p in list_checkpoints(root / "checkpoints")}[ITERATIONS]
    ours, theirs = read_tensors(final, "model"), read_tensors(expected, "model")
    assert sorted(ours) == sorted(theirs)
    assert all(np.array_equal(ours[name], theirs[name]) for name in theirs)


def test_minibatches_split_each_iterations_rollouts_into_updates(config, tmp_path) -> None:
    rows = config.train.data.batch_size
    schedule = replace(config.train.schedule, total_steps=4)
    train = replace(config.train, num_steps=4, schedule=schedule, data=replace(config.train.data, batch_size=rows // 2))
    split = replace(config, train=train, rl=replace(config.rl, updates_per_iteration=2, minibatches=2))
    assert split.prompts_per_iteration == config.prompts_per_iteration and split.iterations == 2
    out = tmp_path / "run"
    assert run_rl(split, out).step == 4
    shards = list_shards(out / "rollouts")
    assert [i for i, _, _ in shards] == [0, 1]
    assert all(len(read_rollouts(path)[0].task_ids) == rows for _, _, path in shards)
    buffer = RolloutBuffer(split, out)
    whole = buffer.iteration_rows(1).tokens
    first, second = buffer.batch(2).tokens, buffer.batch(3).tokens
    assert np.array_equal(np.concatenate([first, second]), whole)
    assert np.array_equal(buffer.batch(3, worker=1, num_workers=2).tokens, whole[rows * 3 // 4 :])
    with pytest.raises(ValueError, match="divide updates_per_iteration"):
        replace(config.rl, minibatches=2)


def test_extra_prompts_train_the_groups_with_an_advantage_first(config, tmp_path) -> None:
    advantages = np.array([0, 0, 0, 0, 1, -1, 0, 0, 0, 0, 0, 0, 0.5, 0, -0.5, 0], np.float32)
    assert trained_groups(advantages, 4, 2).tolist() == [1, 3]
    assert trained_groups(advantages, 4, 3).tolist() == [0, 1, 3]
    assert trained_groups(np.zeros(8, np.float32), 4, 1).tolist() == [0]
    wider = replace(config, rl=replace(config.rl, prompts=2 * config.prompts_per_iteration))
    out = tmp_path / "run"
    run_rl(replace(wider, train=replace(wider.train, num_steps=1)), out)
    batch, _ = read_rollouts(list_shards(out / "rollouts")[0][2])
    assert len(batch.task_ids) == 2 * config.train.data.batch_size
    # only the trained rows' log-probs were computed, and those rows are what the update got
    buffer = RolloutBuffer(wider, out)
    trained = buffer.trained_rows(buffer.advantages(batch))
    assert np.flatnonzero(batch.scored).tolist() == trained.tolist()
    assert len(trained) == config.train.data.batch_size
    width = min(batch.tokens.shape[1], config.train.data.seq_len)
    served = buffer.batch(0).rollout_logprobs[:, :width]
    assert np.array_equal(served, batch.policy_logprobs[trained][:, :width])
    assert 0 <= _records(out)[0]["rl/informative_groups"] <= 1
    with pytest.raises(TootsieError, match="samples fewer groups"):
        replace(config, rl=replace(config.rl, prompts=1))


def test_the_example_config_round_trips_and_a_changed_rl_section_is_refused(config, config_file, tmp_path) -> None:
    assert load_rl_config(config_file) == config
    out = tmp_path / "run"
    short = replace(config, train=replace(config.train, num_steps=1))
    run_rl(short, out)
    changed = replace(short, rl=replace(short.rl, kl_bound=9.0))
    with pytest.raises(TootsieError, match="kl_bound"):
        run_rl(changed, out)


def test_distillation_trains_on_the_students_own_samples(prefix, tmp_path) -> None:
    config = rl_example(prefix, TINY, distill=True)
    assert isinstance(config.train.objective, DistillObjective)
    run_rl(config, tmp_path / "distill")
    records = _records(tmp_path / "distill")
    assert len(records) == ITERATIONS
    for record in records:
        assert record["rl/reverse_kl"] == record["loss"] >= 0.0
        assert "rl/truncated_fraction" in record  # the student's rollouts are sampled and logged as RL's are
    assert records[0]["rl/reverse_kl"] > 0  # a different (larger) teacher
    result = evaluate_rl(config, tmp_path / "distill")
    assert 0 <= result["teacher_exact_match"] <= 1
    assert result["reverse_kl_before"] > 0 and result["reverse_kl_after"] > 0


def test_the_rl_command_prints_trains_and_evaluates(prefix, tmp_path, capsys) -> None:
    assert cli_main.main(["rl", "--example-config", "--tiny", "--prefix", prefix, "--json"]) == 0
    config_file = tmp_path / "rl.json"
    config_file.write_text(capsys.readouterr().out)
    out = str(tmp_path / "run")
    assert cli_main.main(["rl", "--config", str(config_file), "--out", out, "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["step"] == ITERATIONS
    assert cli_main.main(["rl", "--evaluate", "--config", str(config_file), "--out", out, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result)[:1] == ["step"] and list(result)[-1] == "interval"
    assert result["heldout_tasks"] == TINY.heldout_tasks


def test_bad_rl_configs_name_the_fix(config) -> None:
    with pytest.raises(TootsieError, match="multiple of rl.rollout.group_size"):
        replace(config, train=replace(config.train, data=SuppliedRows(seq_len=64, batch_size=7)))
    with pytest.raises(TootsieError, match="objective must be"):
        replace(config, train=replace(config.train, objective=NextTokenObjective()))
    with pytest.raises(TootsieError, match="warm_start is unset"):
        replace(config, train=replace(config.train, warm_start=None))


def test_sampled_heldout_scores_are_seeded_and_greedy_is_reported_beside_them(config) -> None:
    codec = TokenizerCodec.load(config.rl.tokenizer)
    model = load_model(config.train.model, config.train.warm_start.checkpoint)
    first, again = (heldout_scores(model, config, codec, 1.0, 3) for _ in range(2))
    assert first.shape == (TINY.heldout_tasks,) and np.array_equal(first, again)
    assert set(np.unique(first * 3)) <= {0.0, 1.0, 2.0, 3.0}
    with pytest.raises(ValueError, match="greedy"):
        RLEvaluation(temperature=0.0, samples=4)


def test_paired_bootstrap_brackets_the_difference() -> None:
    rng = np.random.default_rng(1)
    before = rng.random(400) < 0.3
    after = before | (rng.random(400) < 0.3)
    low, high = paired_bootstrap(before, after, 2000, 0.95)
    assert 0 < low < (after.mean() - before.mean()) < high
    assert paired_bootstrap(before, before, 500, 0.95) == (0.0, 0.0)
