"""The lm-eval step writes the same `lm_eval.json` under any prefix: the checkpoint named portably, timings apart."""

import json

import pytest

from tests.eval.tiny_checkpoint import RandomCheckpointConfig, tokenizer_and_cache, write_random_checkpoint
from tests.two_prefixes import run_under_two_prefixes
from tootsie.eval.lm_eval_step import LM_EVAL_FILE, TIMINGS_FILE, LMEvalConfig, evaluate_lm_tasks
from tootsie.executor import Step
from tootsie.executor.manifest import differing


@pytest.mark.timeout(300)
def test_lm_eval_output_names_the_checkpoint_portably_and_keeps_seconds_volatile(tmp_path) -> None:
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install 'tootsie[lmeval]')")
    tokenizer, _ = tokenizer_and_cache(tmp_path / "inputs")
    trained = Step("lm/train", write_random_checkpoint, RandomCheckpointConfig())
    config = LMEvalConfig(checkpoint=trained.ref(), tokenizer=tokenizer, tasks=("tootsie_zen",), limit=2, max_length=32)
    scored = Step("lm/eval", evaluate_lm_tasks, config)
    (graph, out, left), (_, _, right) = run_under_two_prefixes(scored, tmp_path)
    assert differing(left, right) == [] and left.compared.keys() == {LM_EVAL_FILE}  # no task files with paths
    assert [e.path for e in left.files if e.volatile] == [TIMINGS_FILE]
    result = json.loads((out / LM_EVAL_FILE).read_text())
    assert result["checkpoint"] == f"{graph.node(trained).id}/checkpoints/step-000005" and result["step"] == 5
    assert "seconds" not in result and result["tasks"]["tootsie_zen"]["samples"] == 2
    assert json.loads((out / TIMINGS_FILE).read_text())["seconds"] >= 0
