"""The dashboard in a real headless Chromium while a tiny model trains: the plotted step advances on a live page.

Chromium is driven over the DevTools protocol on a pipe (`tests/report/devtools.py`).
`make test` installs Debian's chromium when it is missing
(scripts/ensure_chromium.sh); elsewhere the test skips with the reason, and
under CI=true it fails instead.
"""

import json
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import STRICT_SKIPS
from tests.report.devtools import DevTools
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.report.dashboard.registry import RunRegistry
from tootsie.report.dashboard.runs import root_labels
from tootsie.report.dashboard.server import start_in_thread
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig

STEP_SECONDS = 0.04
"""A pause after every training step, so the tiny run (milliseconds a step) trains for the whole test."""
WAIT_SECONDS = 120
"""Longest wait for one condition (the first compiled steps on a loaded 2-core machine, the page's first plot)."""


class _Stop(Exception):
    """Raised by the pacing hook to end the training run when the test is done."""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = "chromium is not installed (make test installs it: scripts/ensure_chromium.sh, as root with apt-get)"
        if STRICT_SKIPS:
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _config(make_cache) -> TrainConfig:
    rng = np.random.default_rng(0)
    documents = [rng.integers(2, 40, size=40).tolist() for _ in range(40)]
    data = MixtureConfig(
        caches={"noise": make_cache("noise", documents, 40)},
        stages=(MixtureStage(0, {"noise": 1.0}),),
        seq_len=16,
        batch_schedule=BatchSchedule.constant(4),
    )
    return TrainConfig(
        model=LlamaConfig(vocab_size=40, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=1),
        data=data,
        num_steps=2000,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=5, decay_steps=20, total_steps=2000),
        checkpoints=CheckpointConfig(every_steps=1000),
    )


def _wait(condition, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value is not None and value is not False:
            return value
        time.sleep(0.2)
    raise AssertionError(f"waited {WAIT_SECONDS} s for {what}")


PLOTTED = "document.querySelector('#runs tr[data-run=\"runs/live\"]')?.dataset.plottedStep"
"""The training run's last plotted step, from its row in the runs table."""


def _api_step(url: str, run_id: str) -> int:
    with urllib.request.urlopen(url + "api/runs", timeout=10) as response:
        rows = {row["id"]: row for row in json.loads(response.read())}
    return rows[run_id]["step"]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_live_page_plots_a_training_run_overlaid_on_a_finished_one(make_cache, tmp_path: Path) -> None:
    chromium = _chromium()
    root = tmp_path / "runs"
    finished = root / "reference"
    finished.mkdir(parents=True)
    finished.joinpath("metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "loss": 3.7 - 0.002 * s, "tokens": 64 * (s + 1), "lr": 1e-2, "phase": "stable"})
            + "\n"
            for s in range(200)
        )
    )
    finished.joinpath("config.json").write_text(json.dumps({"num_steps": 200, "model": {}}))
    stop = threading.Event()
    errors: list[BaseException] = []

    def pace(state: object) -> dict[str, float]:
        if stop.is_set():
            raise _Stop
        time.sleep(STEP_SECONDS)
        return {}

    def train() -> None:
        try:
            run_training(_config(make_cache), str(root / "live"), hooks=(pace,))
        except _Stop:
            pass
        except BaseException as error:  # reported by the test thread
            errors.append(error)

    trainer = threading.Thread(target=train, daemon=True)
    trainer.start()
    dashboard = start_in_thread(RunRegistry(root_labels([root])))
    browser = DevTools(chromium, tmp_path / "profile")
    try:
        page = browser.open_page(dashboard.url)

        def plotted(at_least: int) -> int | None:
            """The live run's last plotted step (its table row's data-plotted-step) once it reaches `at_least`."""
            assert not errors, errors
            step = int(page(f"Number({PLOTTED} ?? -1)"))
            return step if step >= at_least else None

        first = _wait(lambda: plotted(0), "the page's first plot of the training run")
        first_api = _api_step(dashboard.url, "runs/live")
        second = _wait(lambda: plotted(first + 1), "the plotted step to advance on the same page")
        time.sleep(2.0)
        second_api = _api_step(dashboard.url, "runs/live")
        assert second > first and second_api > first_api
        assert int(page("Number(document.body.dataset.polls)")) >= 2
        panels = page("[...document.querySelectorAll('[data-panel]')].map(e => e.dataset.panel).join(' ')").split()
        assert {"loss", "grad_norm", "update_norm", "lr", "throughput", "adam_mu", "adam_nu", "lm_head"} <= set(panels)
        legend = page("document.querySelector('[data-panel=loss]').innerText")
        assert "live smoothed" in legend and "reference smoothed" in legend  # both runs overlaid
        assert page("document.querySelectorAll('.heatmap[data-run=\"runs/live\"] canvas').length") == 1
        statuses = page("[...document.querySelectorAll('#runs td.status')].map(e => e.textContent).join(' ')")
        assert statuses == "running done"
    finally:
        stop.set()
        browser.close()
        dashboard.close()
        trainer.join(timeout=WAIT_SECONDS)
    assert not errors, errors
