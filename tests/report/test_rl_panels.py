"""The report's RL panels on synthetic metrics: drawn for an RL run only, the KL bound at its logged value,
records without a reward survive, a distillation run gets its reverse-KL panel."""

import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from tootsie.report import rl_panels as rl
from tootsie.report.panels import Panel, Timeline
from tootsie.report.run_report import write_report

REWARD = "RL reward: mean ± std per iteration, held-out exact match"
KL_TITLE = "RL KL to the reference and its stated bound"
DISTILL_TITLE = "Distillation: reverse KL(student ‖ teacher)"
CLIPPING = "RL clipping: clip fraction and advantage std"
ROLLOUTS = "RL rollouts: entropy, mean completion length and truncated fraction"
RL_TITLES = (REWARD, KL_TITLE, CLIPPING, ROLLOUTS)
STEPS, BOUND, EVERY = 12, 0.05, 4
OVER = (7, 9)
"""Steps whose `rl/kl` is above `BOUND`."""
TIMELINE = Timeline((), (), ())


def _record(step: int, kind: str = "rl") -> dict[str, object]:
    """A step of a run: `kind` "rl" (policy gradient with a KL bound), "distill" or "pretrain"."""
    record: dict[str, object] = {"step": step, "loss": 3.0 - 0.1 * step, "lr": 1e-4, "tokens": 256 * (step + 1)}
    if kind == "pretrain":
        return record
    record |= {
        "rl/entropy": 0.5 - 0.01 * step,
        "rl/mean_length": 14.0 + step,
        "rl/truncated_fraction": 0.02 * step,
        "rl/counted_fraction": 1.0,
        "rl/reward_mean": 0.1 + 0.05 * step,
        "rl/reward_std": 0.3,
        "rl/reason_right": float(step),
        "rl/reason_wrong": float(16 - step),
        "rl/reason_parse_failure": 0.0,
        "rl/reason_truncated": 0.0,
    }
    if kind == "distill":
        return record | {"rl/reverse_kl": 0.4 / (step + 1)}
    kl = 2 * BOUND if step in OVER else BOUND * step / STEPS
    record |= {
        "rl/kl": kl,
        "rl/kl_bound": BOUND,
        "rl/kl_over_bound": float(kl > BOUND),
        "rl/clip_fraction": 0.01 * step,
        "rl/advantage_std": 0.25,
        "rl/ratio_mean": 1.0,
        "rl/pg_loss": 0.0,
    }
    if step % EVERY == EVERY - 1:
        record["rl/heldout_exact_match"] = 0.1 + 0.02 * step
    return record


def _records(kind: str = "rl") -> list[dict[str, object]]:
    return [_record(step, kind) for step in range(STEPS)]


def _run(directory: Path, kind: str) -> Path:
    directory.mkdir(parents=True)
    lines = (json.dumps(record) + "\n" for record in _records(kind))
    (directory / "metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    (directory / "config.json").write_text(json.dumps({"num_steps": STEPS, "model": {}}), encoding="utf-8")
    return directory


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """Panel title → the figure the RL panels drew for it, so a test can read the drawn lines back."""
    drawn: dict[str, Figure] = {}
    real = rl.finished

    def keep(title: str, figure: Figure, *rest: object) -> Panel:
        drawn[title] = figure
        return real(title, figure, *rest)

    monkeypatch.setattr(rl, "finished", keep)
    return drawn


def test_an_rl_run_gets_its_panels_and_a_pretraining_run_beside_it_draws_nothing_on_them(tmp_path: Path) -> None:
    rl_run, pretrain = _run(tmp_path / "rl", "rl"), _run(tmp_path / "pretrain", "pretrain")
    result = write_report([rl_run, pretrain], tmp_path / "compare.html")
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert all(result["panels"][title] for title in RL_TITLES)
    assert result["traces"][REWARD] == ["rl"] * 3  # the std band, the mean and the held-out points
    assert result["traces"][KL_TITLE] == ["rl"]
    assert result["traces"][CLIPPING] == ["rl"] * 2 and result["traces"][ROLLOUTS] == ["rl"] * 3
    assert DISTILL_TITLE not in result["panels"]
    # the outcome counts summed over the run, and the KL summary with the updates above the bound
    right = sum(range(STEPS))
    assert f"<td>rl</td><td>{right} ({100 * right / (16 * STEPS):.1f}%)</td>" in page
    assert f"<td>rl</td><td>{2 * BOUND:.4g}</td><td>{BOUND:g}</td><td>{len(OVER)}</td><td>{STEPS}</td>" in page


def test_runs_without_rl_metrics_get_no_rl_panels(tmp_path: Path) -> None:
    pretrain = _records("pretrain")
    assert rl.rl_panels({"pretrain": pretrain, "other": pretrain[:5]}, TIMELINE) == ()
    result = write_report(_run(tmp_path / "pretrain", "pretrain"), tmp_path / "report.html")
    assert not any(title.startswith(("RL", "Distillation")) for title in result["panels"])


def test_the_kl_bound_is_a_dashed_line_at_the_logged_value_and_the_updates_above_it_are_marked(
    figures: dict[str, Figure],
) -> None:
    panel = rl.kl_panel({"rl": _records()}, TIMELINE)
    assert panel.image is not None and f"the {len(OVER)} update(s) above it" in panel.note
    lines = figures[KL_TITLE].axes[0].lines
    bounds = [line for line in lines if line.get_linestyle() == "--"]
    assert len(bounds) == 1 and set(bounds[0].get_ydata()) == {BOUND}
    marks = [line for line in lines if line.get_marker() == "v"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == list(OVER)


def test_without_a_logged_bound_no_bound_line_is_drawn(figures: dict[str, Figure]) -> None:
    unbounded = [{k: v for k, v in r.items() if k not in ("rl/kl_bound", "rl/kl_over_bound")} for r in _records()]
    panel = rl.kl_panel({"rl": unbounded}, TIMELINE)
    assert "No bound was stated" in panel.note
    assert not [line for line in figures[KL_TITLE].axes[0].lines if line.get_linestyle() == "--"]
    assert panel.table is not None and panel.table.rows[0][2] == "none"


def test_records_without_a_reward_mean_draw_the_rest(figures: dict[str, Figure]) -> None:
    records = [{k: v for k, v in r.items() if k not in ("rl/reward_mean", "rl/reward_std")} for r in _records()]
    records[3] |= {"rl/reward_mean": 0.5}  # one reward without a std: a point without a band
    panels = rl.rl_panels({"rl": records}, TIMELINE)
    assert all(panel.image is not None for panel in panels)
    axis, twin = figures[REWARD].axes
    assert [list(line.get_xdata()) for line in axis.lines] == [[3]] and not axis.collections  # no std, no band
    assert list(twin.lines[0].get_xdata()) == [s for s in range(STEPS) if s % EVERY == EVERY - 1]
    nothing = rl.reward_panel({"rl": [{"step": 0, "rl/kl": 0.01}]}, TIMELINE)
    assert nothing.image is None and "`rl/reward_mean`" in nothing.note


def test_a_distillation_run_gets_its_reverse_kl_panel(tmp_path: Path) -> None:
    result = write_report(_run(tmp_path / "distill", "distill"), tmp_path / "report.html")
    assert result["panels"][DISTILL_TITLE] and result["traces"][DISTILL_TITLE] == ["distill"]
    assert KL_TITLE not in result["panels"]
    assert result["traces"][REWARD] == ["distill"] * 2  # the band and the mean: no held-out points logged
    assert result["panels"][ROLLOUTS]
    assert not result["panels"][CLIPPING]  # distillation logs no policy-gradient figures


def test_an_rl_run_beside_a_distillation_run_shares_one_kl_panel(figures: dict[str, Figure]) -> None:
    panel = rl.kl_panel({"rl": _records(), "distill": _records("distill")}, TIMELINE)
    assert panel.traces == ("rl", "distill") and "`rl/reverse_kl`" in panel.note
    bounds = [
        line for line in figures[panel.title].axes[0].lines if line.get_linestyle() == "--" and not line.get_gid()
    ]
    assert len(bounds) == 1 and set(bounds[0].get_ydata()) == {BOUND}
