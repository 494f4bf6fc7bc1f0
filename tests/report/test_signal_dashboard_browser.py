"""The dashboard's instability-signal panels in a real headless Chromium: one attention-logit line per layer,
the output-logit and embedding panels, and none of them left to the catch-all panels.

Synthetic finished runs, driven as in `test_moe_dashboard_browser.py`.
"""

import json
import time
from pathlib import Path

import pytest

from tests.report.devtools import DevTools
from tests.report.test_dashboard_browser import _chromium
from tests.report.test_signal_panels import LAYERS, STEPS, _record
from tootsie.report.dashboard.registry import RunRegistry
from tootsie.report.dashboard.runs import root_labels
from tootsie.report.dashboard.server import start_in_thread

WAIT_SECONDS = 60


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_page_draws_a_line_per_layer_for_the_attention_logit_and_the_output_logit_panel(tmp_path: Path) -> None:
    chromium = _chromium()
    run = tmp_path / "runs" / "spiky"
    run.mkdir(parents=True)
    run.joinpath("metrics.jsonl").write_text(
        "".join(json.dumps(_record(step, signals=True)) + "\n" for step in range(STEPS)), encoding="utf-8"
    )
    run.joinpath("config.json").write_text(json.dumps({"num_steps": STEPS, "model": {}}), encoding="utf-8")
    dashboard = start_in_thread(RunRegistry(root_labels([tmp_path / "runs"])))
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        page = browser.open_page(dashboard.url)
        deadline = time.monotonic() + WAIT_SECONDS
        while page("document.body.dataset.lastStep") != str(STEPS - 1):
            assert time.monotonic() < deadline, "the page never plotted the run"
            time.sleep(0.2)
        panels = set(page("[...document.querySelectorAll('[data-panel]')].map(e => e.dataset.panel).join(' ')").split())
        assert {"attn_logit", "output_logits", "embed"} <= panels
        assert not any(panel.startswith("extra:") and ("logit" in panel or "embed" in panel) for panel in panels)
        legend = page("document.querySelector('[data-panel=attn_logit]').innerText")
        assert all(f"layer {layer}" in legend for layer in range(LAYERS)) and f"layer {LAYERS}" not in legend
        assert "aux/log_z_max" in page("document.querySelector('[data-panel=output_logits]').innerText")
    finally:
        browser.close()
        dashboard.close()
