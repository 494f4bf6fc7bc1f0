"""Shared by the toy-scale case studies: the tiny training setup, metric series, and figure files.

Each case study (`case_shuffle`, `case_contamination`, `case_qk_norm`) trains
the tiny model of `tootsie.recipes.tiny.scale` on the tiny data's token caches and
ends with an analysis step that writes `figure.png` and `results.json`.
"""

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from jaxtyping import Float, Int64
from matplotlib.figure import Figure

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.data.permutation import permutation_config
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig
from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.trackers import METRICS_FILE
from tootsie.recipes.tiny.data import TINY_VOCAB
from tootsie.recipes.tiny.scale import TINY_SEQ_LEN, TINY_SHAPE

CASE_MODEL = LlamaConfig(vocab_size=TINY_VOCAB, **TINY_SHAPE)
"""The case studies' Llama: the tiny recipes' shape, plain RoPE, no QK-norm."""
CASE_BATCH = 16
"""Sequences per step (of TINY_SEQ_LEN tokens)."""
FIGURE_FILE, RESULTS_FILE = "figure.png", "results.json"


def mixture(
    caches: Mapping[str, str], weights: Mapping[str, float], seed: int = 0, permutation: str = "feistel"
) -> MixtureConfig:
    """A one-stage mixture of `caches` at the case studies' sequence length and batch size.

    `permutation` is a registered kind (default options).
    """
    return MixtureConfig(
        caches=dict(caches),
        stages=(MixtureStage(0, dict(weights)),),
        seq_len=TINY_SEQ_LEN,
        batch_schedule=BatchSchedule.constant(CASE_BATCH),
        seed=seed,
        permutation=permutation_config(permutation),
    )


def metric_series(run_dir: str | Path, name: str) -> tuple[Int64[np.ndarray, " n"], Float[np.ndarray, " n"]]:
    """Steps and values of one finite metric from a run's metrics.jsonl."""
    points = [
        (r["step"], r[name])
        for r in read_metrics(Path(run_dir) / METRICS_FILE).records
        if isinstance(r.get(name), (int, float)) and np.isfinite(r[name])
    ]
    steps, values = zip(*points) if points else ((), ())
    return np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)


def trailing_mean(values: Float[np.ndarray, " n"], window: int) -> Float[np.ndarray, " n"]:
    """Mean of the last `window` values at each point (fewer at the start)."""
    sums = np.cumsum(np.concatenate([[0.0], values]))
    starts = np.maximum(np.arange(1, len(values) + 1) - window, 0)
    return (sums[1:] - sums[starts]) / (np.arange(1, len(values) + 1) - starts)


def save_figure(figure: Figure, path: Path) -> None:
    """Write a PNG atomically (temp name, then rename)."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    figure.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def write_results(output_path: str, results: dict[str, object], figure: Figure) -> dict[str, object]:
    """`results.json` and `figure.png` under `output_path`; return the results."""
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    save_figure(figure, out / FIGURE_FILE)
    write_json_atomic(out / RESULTS_FILE, results)
    return results
