"""The report of a real tiny run that rewound past a junk data window shows the rewind."""

import json
import re

import numpy as np
import pytest

from tests.train.test_rewind import JUNK_START, JUNK_STEPS, WATCH, _cache
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.report.run_report import write_report
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import WSDConfig

STEPS = 48


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_real_rewound_run_shows_its_rewind_in_the_report(tmp_path) -> None:
    rng = np.random.default_rng(0)
    good = _cache(tmp_path, "good", [[int(v) for v in (np.arange(30) * 3 + k) % 37 + 2] for k in range(40)])
    junk = _cache(tmp_path, "junk", [rng.integers(2, 40, size=30).tolist() for _ in range(40)])
    stages = (
        MixtureStage(0, {"good": 1.0}),
        MixtureStage(JUNK_START, {"junk": 1.0}),
        MixtureStage(JUNK_START + JUNK_STEPS, {"good": 1.0}),
    )
    config = TrainConfig(
        model=LlamaConfig(vocab_size=40, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1),
        data=MixtureConfig(
            caches={"good": good, "junk": junk}, stages=stages, seq_len=16, batch_schedule=BatchSchedule.constant(4)
        ),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=4, decay_steps=12, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=4, every_minutes=None),
        ema=None,
        rewind=WATCH,
    )
    run_training(config, str(tmp_path / "run"))
    [event] = json.loads((tmp_path / "run" / "rewinds.json").read_text())["rewinds"]
    result = write_report(tmp_path / "run")
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    start, end = event["skipped_data_steps"]
    row = f"<td>{event['spike_step']}</td><td>{event['detected_at']}</td><td>{event['to_step']}</td>"
    assert f"<td>run</td>{row}<td>[{start}, {end})</td>" in page and "1 rewind(s) (rewinds.json)" in page
    assert result["runs"]["run"]["rewinds"][0]["from_step"] == JUNK_START + WATCH.delay
    heatmap = re.search(r"run: (\d+) layers × (\d+) steps", page)
    assert heatmap is not None and heatmap.groups() == ("2", str(STEPS))  # every logged signal is drawn
    assert all(
        result["panels"][title] for title in ("Optimizer moments: Adam first and second moment norms", "lm_head norm")
    )
