"""The report's MoE panels on synthetic metrics: drawn for an MoE run, absent for a dense one, blocks numbered right."""

import json
from pathlib import Path

from tootsie.report.moe_panels import moe_panels
from tootsie.report.panels import Timeline
from tootsie.report.run_report import write_report

MOE_TITLES = (
    "MoE expert load per block (share of routed slots × experts)",
    "MoE drops and balance: dropped fraction and max expert load",
    "MoE router: load-balancing loss, router entropy and z-loss",
)
STEPS, BLOCKS, EXPERTS, DENSE, TOKENS = 20, 3, 4, 1, 64


def _record(step: int, moe: bool) -> dict[str, object]:
    """A step of a run; an MoE run's first MoE block collapses onto expert 0 over the run."""
    record: dict[str, object] = {"step": step, "loss": 4.0 - 0.05 * step, "lr": 1e-3, "phase": "stable"}
    record["tokens"] = TOKENS * (step + 1)
    if moe:
        busy = 0.25 + 0.5 * step / (STEPS - 1)  # expert 0's share in block 0: even, then three times even
        collapsing = [busy, *[(1 - busy) / (EXPERTS - 1)] * (EXPERTS - 1)]
        record |= {
            "moe/expert_load": [collapsing, *[[1 / EXPERTS] * EXPERTS for _ in range(BLOCKS - 1)]],
            "moe/dropped_fraction": 0.1 * step / STEPS,
            "moe/max_load": (busy + (BLOCKS - 1) / EXPERTS) / BLOCKS,
            "moe/load_balancing_loss": 1.0 + step / STEPS,
            "moe/router_z_loss": 4.0 - 0.1 * step,
            "moe/router_entropy": 1.38 - 0.02 * step,
        }
    return record


def _run(directory: Path, moe: bool) -> Path:
    directory.mkdir(parents=True)
    lines = (json.dumps(_record(step, moe)) + "\n" for step in range(STEPS))
    (directory / "metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    model = {"kind": "moe", "num_experts": EXPERTS, "dense_layers": DENSE} if moe else {"kind": "llama"}
    (directory / "config.json").write_text(json.dumps({"num_steps": STEPS, "model": model}), encoding="utf-8")
    return directory


def test_an_moe_run_gets_its_panels_and_a_dense_run_beside_it_draws_nothing_on_them(tmp_path: Path) -> None:
    moe, dense = _run(tmp_path / "moe", moe=True), _run(tmp_path / "dense", moe=False)
    result = write_report([moe, dense], tmp_path / "compare.html")
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert all(result["panels"][title] for title in MOE_TITLES)
    assert result["traces"][MOE_TITLES[0]] == ["moe"] * 4  # four snapshots of the one MoE run
    assert result["traces"][MOE_TITLES[1]] == ["moe"] * 2 and result["traces"][MOE_TITLES[2]] == ["moe"] * 3
    # the latest step's extremes, blocks numbered after the dense block: block 1 collapsed onto expert 0
    assert f"<td>moe</td><td>{STEPS - 1}</td><td>{DENSE}</td><td>0 (75.0%)</td><td>1 (8.3%)</td><td>25.0%</td>" in page
    assert f"<td>{DENSE + BLOCKS - 1}</td><td>0 (25.0%)</td>" in page and f"<td>{DENSE + BLOCKS}</td>" not in page


def test_against_tokens_the_snapshots_are_named_by_tokens(tmp_path: Path) -> None:
    result = write_report(_run(tmp_path / "moe", moe=True), tmp_path / "tokens.html", x="tokens")
    page = (tmp_path / "tokens.html").read_text(encoding="utf-8")
    assert result["traces"][MOE_TITLES[0]] == ["moe"] * 4
    assert "<th>tokens</th><th>block</th>" in page and f"<td>moe</td><td>{TOKENS * STEPS}</td><td>{DENSE}</td>" in page


def test_runs_without_moe_metrics_get_no_moe_panels() -> None:
    dense = [_record(step, moe=False) for step in range(STEPS)]
    assert moe_panels({"dense": dense, "other": dense[:5]}, Timeline((), (), ()), {}) == ()
