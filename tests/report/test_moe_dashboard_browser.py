"""The dashboard's MoE panels in a real headless Chromium: drawn for an MoE run's metrics, not for a dense run's.

Synthetic finished runs (no training), so the page has its data on the first
poll; Chromium is found and driven as in `test_dashboard_browser.py`.
"""

import json
import time
from pathlib import Path

import pytest

from tests.report.devtools import DevTools
from tests.report.test_dashboard_browser import _chromium
from tests.report.test_moe_panels import STEPS, _record
from tootsie.report.dashboard.registry import RunRegistry
from tootsie.report.dashboard.runs import root_labels
from tootsie.report.dashboard.server import start_in_thread

WAIT_SECONDS = 60
MOE_PANELS = {"moe_drops", "moe_balance", "moe_entropy", "moe_z"}


def _write(directory: Path, moe: bool) -> None:
    directory.mkdir(parents=True)
    lines = (json.dumps(_record(step, moe)) + "\n" for step in range(STEPS))
    directory.joinpath("metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    directory.joinpath("config.json").write_text(json.dumps({"num_steps": STEPS, "model": {}}), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_page_draws_moe_panels_and_the_expert_load_heatmap_for_the_moe_run_only(tmp_path: Path) -> None:
    chromium = _chromium()
    root = tmp_path / "runs"
    _write(root / "moe", moe=True)
    _write(root / "dense", moe=False)
    dashboard = start_in_thread(RunRegistry(root_labels([root])))
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        page = browser.open_page(dashboard.url)

        deadline = time.monotonic() + WAIT_SECONDS
        while page("document.body.dataset.lastStep") != str(STEPS - 1):
            assert time.monotonic() < deadline, "the page never plotted the runs"
            time.sleep(0.2)
        panels = set(page("[...document.querySelectorAll('[data-panel]')].map(e => e.dataset.panel).join(' ')").split())
        assert MOE_PANELS <= panels and not any(panel.startswith("extra:moe/") for panel in panels)
        legend = page("document.querySelector('[data-panel=moe_drops]').innerText")
        assert "moe/max_load" in legend and "dense" not in legend  # the dense run logged no MoE signal
        heatmaps = "document.querySelectorAll('.heatmap[data-kind=\"expert-load\"]')"
        assert page(f"[...{heatmaps}].map(e => e.dataset.run).join(' ')") == "runs/moe"
        title = page(f"{heatmaps}[0].querySelector('h2').textContent")
        assert f"step {STEPS - 1}: 3 blocks" in title and "4 experts" in title and "up to 3.0×" in title
        readout = page(
            f"(() => {{ const c = {heatmaps}[0].querySelector('canvas'), b = c.getBoundingClientRect();"
            " c.onmousemove({clientX: b.left + 1, clientY: b.top + 1});"
            " return c.parentElement.querySelector('.readout').textContent; })()"
        )
        assert readout == f"step {STEPS - 1}, MoE block 0, expert 0: 75.0% of routed slots (3.00× even)"
    finally:
        browser.close()
        dashboard.close()
