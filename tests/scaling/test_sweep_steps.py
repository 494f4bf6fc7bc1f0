"""A sweep run's eval step writes the same `run.json` under any prefix: no absolute path, no clock time."""

import json
from pathlib import Path

import pytest

from tests.eval.tiny_checkpoint import TINY_MODEL, RandomCheckpointConfig, tokenizer_and_cache, write_random_checkpoint
from tests.two_prefixes import run_under_two_prefixes
from tootsie.executor import Step
from tootsie.executor.manifest import differing
from tootsie.executor.metadata import INFO_FILE
from tootsie.jsonfile import read_json
from tootsie.scaling.preregister import training_start
from tootsie.scaling.runs import RUN_FILE, load_runs
from tootsie.scaling.sweep_steps import RunEvalConfig, evaluate_run


@pytest.mark.timeout(300)
def test_run_record_names_the_training_output_portably_and_its_start_is_read_from_the_training_step(tmp_path) -> None:
    tokenizer, cache = tokenizer_and_cache(tmp_path / "inputs")
    trained = Step("sweep/train/r1", write_random_checkpoint, RandomCheckpointConfig())
    config = RunEvalConfig(
        name="r1",
        compute=1e9,
        params=1000,
        tokens=320,
        flops=1e9,
        model=TINY_MODEL,
        checkpoint=trained.ref(),
        heldout={"code": cache},
        tokenizer=tokenizer,
        seq_len=32,
        max_sequences=2,
    )
    scored = Step("sweep/eval/r1", evaluate_run, config)
    (graph, out, left), (_, _, right) = run_under_two_prefixes(scored, tmp_path)
    assert differing(left, right) == [] and left.compared.keys() == {RUN_FILE} and not left.volatile_patterns
    record = json.loads((out / RUN_FILE).read_text())
    assert record["checkpoint"] == graph.node(trained).id and record["loss"] > 0
    assert "train_started_at" not in record
    [run] = load_runs([out]).runs
    started = read_json(Path(graph.node(trained).output_path) / INFO_FILE)
    assert started is not None and training_start(run) == started["start_time"]
