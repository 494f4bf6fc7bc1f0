"""The demo end to end at tiny scale: every step succeeds, BPB drops, a rerun runs nothing.

The steps come from the package (`tootsie.demos.stdlib_demo`); `experiments/demo.py`
is a thin file over it, checked here to build the same steps.
"""

import json
from pathlib import Path

import pytest

from tootsie.demos.stdlib_demo import TINY, DemoSettings, build_steps
from tootsie.executor import build_graph, load_experiment, run_experiment

DEMO_FILE = Path(__file__).resolve().parents[1] / "experiments" / "demo.py"


def test_the_experiment_file_builds_the_packaged_demo() -> None:
    from_file = [node.id for node in build_graph(load_experiment(DEMO_FILE), "/out").nodes]
    packaged = [node.id for node in build_graph(build_steps(DemoSettings()), "/out").nodes]
    assert from_file == packaged and len(packaged) == 26
    assert packaged != [node.id for node in build_graph(build_steps(TINY), "/out").nodes]


@pytest.mark.slow
def test_tiny_demo_trains_evaluates_and_skips_on_rerun(tmp_path) -> None:
    steps = build_steps(TINY)
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
    report = (summary_dir / "report.html").read_text(
        encoding="utf-8"
    )  # both phases' mixtures and the offline BPB table
    assert "<td>pretrain</td><td>0</td><td>0–11</td><td>0</td><td>50.0%</td><td>50.0%</td>" in report
    assert "<td>cooldown</td><td>0</td><td>12–15</td><td>0</td><td>30.0%</td><td>70.0%</td>" in report
    assert (
        all(f"<tr><td>{label}</td>" in report for label in ("init", "pretrain", "final"))
        and "Train loss (raw and smoothed)" in report
    )

    second = run_experiment(build_steps(TINY), tmp_path)
    assert second.ok and not any(s.reason.startswith("run") for s in second.steps)
