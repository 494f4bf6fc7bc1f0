"""The dashboard's RL panels in a real headless Chromium: drawn for an RL run's metrics, not for a pretraining run's.

Synthetic finished runs (no training), so the page has its data on the first
poll; Chromium is found and driven as in `test_dashboard_browser.py`.
"""

import json
import time
from pathlib import Path

import pytest

from tests.report.devtools import DevTools
from tests.report.test_dashboard_browser import _chromium
from tests.report.test_rl_panels import BOUND, EVERY, STEPS, _records
from tootsie.report.dashboard.registry import RunRegistry
from tootsie.report.dashboard.runs import root_labels
from tootsie.report.dashboard.server import start_in_thread

WAIT_SECONDS = 60
RL_PANELS = {
    "rl_reward",
    "rl_reward_std",
    "rl_kl",
    "rl_clip",
    "rl_advantage",
    "rl_entropy",
    "rl_length",
    "rl_truncated",
}
GROUPED = ("rl/reward_mean", "rl/heldout_exact_match", "rl/kl", "rl/kl_bound", "rl/entropy", "rl/truncated_fraction")
"""Metrics drawn on the RL panels, so none of them gets a generic panel of its own."""


def _write(directory: Path, kind: str) -> None:
    directory.mkdir(parents=True)
    lines = (json.dumps(record) + "\n" for record in _records(kind))
    directory.joinpath("metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    directory.joinpath("config.json").write_text(json.dumps({"num_steps": STEPS, "model": {}}), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_page_draws_rl_panels_for_the_rl_runs_only(tmp_path: Path) -> None:
    chromium = _chromium()
    root = tmp_path / "runs"
    _write(root / "rl", "rl")
    _write(root / "distill", "distill")
    _write(root / "pretrain", "pretrain")
    dashboard = start_in_thread(RunRegistry(root_labels([root])))
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        page = browser.open_page(dashboard.url)

        deadline = time.monotonic() + WAIT_SECONDS
        while page("document.body.dataset.lastStep") != str(STEPS - 1):
            assert time.monotonic() < deadline, "the page never plotted the runs"
            time.sleep(0.2)
        panels = set(page("[...document.querySelectorAll('[data-panel]')].map(e => e.dataset.panel).join(' ')").split())
        assert RL_PANELS <= panels and not any(f"extra:{key}" in panels for key in GROUPED)
        assert "extra:rl/ratio_mean" in panels  # an RL metric no RL panel names still gets a panel of its own
        kl = page("document.querySelector('[data-panel=rl_kl]').innerText")
        assert "rl rl/kl_bound" in kl and "distill rl/reverse_kl" in kl and "pretrain" not in kl
        reward = page("document.querySelector('[data-panel=rl_reward]').innerText")
        assert "rl rl/heldout_exact_match" in reward and "pretrain" not in reward
        series = (
            "(() => {{ const c = state.charts.get('{panel}').chart, i = c.series.findIndex(s => s.label === '{label}');"
            " return {{ values: [...new Set(c.data[i].filter(v => v != null))], dash: c.series[i].dash || null,"
            " points: c.series[i].points.show(c, i) }}; }})()"  # uPlot holds `show` as a function of the series
        )
        bound = page(series.format(panel="rl_kl", label="rl rl/kl_bound"))
        assert bound == {"values": [BOUND], "dash": [6, 4], "points": False}  # a dashed line at the logged bound
        heldout = page(series.format(panel="rl_reward", label="rl rl/heldout_exact_match"))
        assert len(heldout["values"]) == STEPS // EVERY and heldout["points"] is True
    finally:
        browser.close()
        dashboard.close()
