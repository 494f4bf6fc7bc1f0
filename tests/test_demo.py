"""The demo end to end at tiny scale: every step succeeds, BPB drops, a rerun runs nothing."""

import importlib.util
import json
from pathlib import Path

import pytest

from tootsie.executor import run_experiment

DEMO_FILE = Path(__file__).resolve().parents[1] / "experiments" / "demo.py"


def _tiny_steps():
    spec = importlib.util.spec_from_file_location("demo_experiment_for_tests", DEMO_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_steps(module.TINY)


@pytest.mark.slow
def test_tiny_demo_trains_evaluates_and_skips_on_rerun(tmp_path) -> None:
    steps = _tiny_steps()
    first = run_experiment(steps, tmp_path)
    assert first.ok, [(s.name, s.status, s.error) for s in first.steps]
    assert all(s.reason.startswith("run") for s in first.steps)

    outputs = {s.name: Path(s.output_path) for s in first.steps}
    bpb = json.loads((outputs["demo/eval/bpb"] / "bpb.json").read_text())
    for source in ("code", "prose"):
        assert bpb["final"][source] < bpb["init"][source] - 0.1, bpb
    assert set(bpb) == {"init", "pretrain", "pretrain_ema", "final", "final_ema"}
    assert bpb["final_ema"]["macro_avg"] != bpb["final"]["macro_avg"]
    summary_dir = outputs["demo/summary"]
    records = [json.loads(line) for line in (summary_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(16))
    assert {"step", "loss", "grad_norm", "lr", "tokens", "tokens_per_s"} <= set(records[0])
    assert (summary_dir / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (summary_dir / "report.html").read_text(encoding="utf-8")  # both phases' mixtures and the offline BPB table
    assert "<td>pretrain</td><td>0</td><td>0–11</td><td>0</td><td>50.0%</td><td>50.0%</td>" in report
    assert "<td>cooldown</td><td>0</td><td>12–15</td><td>0</td><td>30.0%</td><td>70.0%</td>" in report
    assert all(f"<tr><td>{label}</td>" in report for label in ("init", "pretrain", "final")) and "Train loss (raw and smoothed)" in report

    second = run_experiment(_tiny_steps(), tmp_path)
    assert second.ok and not any(s.reason.startswith("run") for s in second.steps)
