"""The signals a run logs, read back from its records: what the report, the spike detector and the dashboard use.

Pure functions from metric records (the lines of `metrics.jsonl`) to arrays,
so every reader takes the same fields the same way: a scalar series by name
(`loss`, `grad_norm`, `adam/mu_norm`, `eval/bpb/code`, ...; `SCALAR_SIGNALS`
names the fixed ones for the dashboard), the per-layer update norms as a
layers × steps matrix, an MoE run's per-layer expert loads at a few steps
(`expert_loads`), and the rewinds a run performed (`rewinds.json`, with
its one writer), with the train steps each one re-ran on fresh data (its
skipped-data window).

Example: records `{"step": 0, "loss": 3.1, "layer_update_norms": [0.2, 0.3]}`
and `{"step": 1, "loss": 2.9, "layer_update_norms": [0.1, 0.4]}` give
`series(..., "loss")` = steps [0, 1], values [3.1, 2.9] (none skipped) and
`layer_norms(...)` = steps [0, 1], values [[0.2, 0.1], [0.3, 0.4]].
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tootsie.configfile import to_plain
from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json, write_json_atomic

REWINDS_FILE = "rewinds.json"
"""A run's rewind events (`{"rewinds": [...]}`), written by `write_rewinds` (`tootsie.train.rewind` calls it)."""
LAYER_NORMS = "layer_update_norms"
"""The per-layer update norms the trainer logs every step (a list, one value per layer)."""
SCALAR_SIGNALS: dict[str, str] = {
    "loss": "train loss (nats/token)",
    "grad_norm": "gradient norm before clipping",
    "update_norm": "norm of the update the optimizer applied",
    "lm_head_norm": "norm of the output projection (the embedding when tied)",
    "embed_norm": "norm of the token embedding matrix",
    "aux/logit_max": "the largest output logit of the step (what z-loss bounds)",
    "aux/log_z_max": "the largest log-partition log Z of the step",
    "aux/log_z": "mean log-partition log Z (z-loss pulls it to 0)",
    "adam/mu_norm": "norm of Adam's first moment",
    "adam/nu_norm": "norm of Adam's second moment",
    "muon/momentum_norm": "norm of Muon's momentum",
    "clip_update/threshold": "update-clipping threshold",
    "lr": "learning rate",
    "tokens": "tokens trained on after the step",
    "tokens_per_s": "throughput",
    "mfu": "model FLOP utilization",
    "step_seconds": "wall time of the step",
    "moe/load_balancing_loss": "MoE load-balancing loss E·Σ f_i·P_i, mean over MoE layers (1.0 = uniform load)",
    "moe/router_z_loss": "MoE router z-loss: mean squared logsumexp of the router logits, mean over MoE layers",
    "moe/dropped_fraction": "share of routed token-slots dropped at expert capacity, mean over MoE layers",
    "moe/max_load": "the busiest expert's share of routed slots, mean over MoE layers (1/E = uniform)",
    "moe/router_entropy": "mean entropy of the router distribution in nats, mean over MoE layers (log E = uniform)",
}
"""The scalar series with a fixed name and what each is (the dashboard lists them); `eval/...` are found by prefix."""

ATTN_LOGIT_MAX = "aux/attn_logit_max"
"""Each layer's largest pre-softmax attention logit in a step (a list, one value per layer; `models.llama`)."""
EXPERT_LOAD = "moe/expert_load"
"""An MoE run's per-step expert loads: a [layers][experts] list, each expert's share of its layer's routed slots."""

Records = list[dict[str, object]]


@dataclass(frozen=True)
class Series:
    """One signal: the logged steps in order and their finite values."""

    steps: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class LayerNorms:
    """Per-layer update norms: `values[layer, i]` at `steps[i]`, NaN where a step logged none or a non-finite one."""

    steps: np.ndarray
    values: np.ndarray

    @property
    def num_layers(self) -> int:
        """Rows of the matrix."""
        return int(self.values.shape[0])

    def layer(self, index: int) -> Series:
        """One layer's finite values as a series."""
        keep = np.isfinite(self.values[index])
        return Series(self.steps[keep], self.values[index][keep])


@dataclass(frozen=True)
class ExpertLoad:
    """Each MoE layer's expert shares at one step: `shares[layer, expert]`, NaN where an entry was damaged."""

    step: int
    shares: np.ndarray

    @property
    def num_experts(self) -> int:
        """Columns of the matrix (1/num_experts is the uniform share)."""
        return int(self.shares.shape[1])


@dataclass(frozen=True)
class Rewind:
    """One rewind: a plateau spike found at `from_step` sent the run back to `to_step`, skipping data steps."""

    spike_step: int
    from_step: int
    """The step at which the plateau was final and the run went back (`detected_at` in `rewinds.json`)."""
    to_step: int
    """The checkpoint step the run restarted from."""
    skipped_data_steps: tuple[int, int]
    """Data steps `[start, end)` never trained on again."""

    @property
    def window(self) -> tuple[int, int]:
        """Train steps `[to_step, from_step]`: trained once on the skipped data, then re-run on fresh data."""
        return self.to_step, self.from_step

    def to_json(self) -> dict[str, object]:
        """Plain fields, for a JSON API."""
        return to_plain(self)


def series(records: Records, name: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Steps and values of a metric, sorted by step, finite only; also how many records had it non-finite."""
    points, skipped = {}, 0
    for record in records:
        value, step = record.get(name), record.get("step")
        if not isinstance(step, int) or value is None or isinstance(value, (list, dict, str)):
            skipped += value is not None or name in record
            continue
        if not math.isfinite(float(value)):
            skipped += 1
            continue
        points[step] = float(value)
    steps = np.array(sorted(points), dtype=np.int64)
    return steps, np.array([points[s] for s in steps], dtype=np.float64), skipped


def layer_norms(records: Records, key: str = LAYER_NORMS) -> LayerNorms | None:
    """A per-layer signal (the update norms unless `key` names another) as a layers × steps matrix, None when no
    record logged it.

    The layer count is the longest list logged; shorter or damaged entries leave NaN.
    """
    rows = {
        r["step"]: r[key] for r in records if isinstance(r.get("step"), int) and isinstance(r.get(key), (list, tuple))
    }
    if not rows:
        return None
    steps = np.array(sorted(rows), dtype=np.int64)
    matrix = np.full((max(len(v) for v in rows.values()), len(steps)), np.nan)
    for column, step in enumerate(steps):
        for layer, value in enumerate(rows[int(step)]):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                matrix[layer, column] = float(value)
    return LayerNorms(steps, matrix)


def _is_matrix(value: object) -> bool:
    """A non-empty list of lists with at least one entry (the shape of `moe/expert_load`)."""
    rows = value if isinstance(value, (list, tuple)) else ()
    return bool(rows) and all(isinstance(row, (list, tuple)) for row in rows) and any(rows)


def expert_loads(records: Records, count: int = 1, key: str = EXPERT_LOAD) -> tuple[ExpertLoad, ...]:
    """Up to `count` logged expert-load matrices, evenly spaced over the steps that logged one and ending at the latest.

    Only the chosen records are parsed, so a long run costs a scan, not a steps × layers × experts array.
    Records whose value is not a list of lists are left out; short rows or non-finite entries leave NaN.
    """
    by_step = {r["step"]: r[key] for r in records if isinstance(r.get("step"), int) and _is_matrix(r.get(key))}
    logged = sorted(by_step.items(), key=lambda item: item[0])
    if not logged or count < 1:
        return ()
    picks = sorted({int(i) for i in np.linspace(len(logged) - 1, 0, min(count, len(logged))).round()})
    loads = []
    for index in picks:
        step, rows = logged[index]
        matrix = np.full((len(rows), max(len(row) for row in rows)), np.nan)
        for layer, row in enumerate(rows):
            for expert, value in enumerate(row):
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    matrix[layer, expert] = float(value)
        loads.append(ExpertLoad(int(step), matrix))
    return tuple(loads)


def read_rewinds(directory: str | Path) -> tuple[Rewind, ...]:
    """The rewinds recorded in `directory/rewinds.json`, oldest first; none when the file is absent."""
    path = Path(directory) / REWINDS_FILE
    payload = read_json(path)
    if payload is None:
        return ()
    try:
        return tuple(
            Rewind(
                int(e["spike_step"]),
                int(e["detected_at"]),
                int(e["to_step"]),
                (int(e["skipped_data_steps"][0]), int(e["skipped_data_steps"][1])),
            )
            for e in payload["rewinds"]
        )
    except (KeyError, TypeError, IndexError, ValueError) as error:
        raise TootsieError(
            f"{path} is not a rewind record ({error!r}); expected"
            ' {"rewinds": [{"spike_step", "detected_at", "to_step", "skipped_data_steps": [start, end]}]}'
            " as tootsie.train.rewind writes it; move the file away to report the run without its rewinds"
        ) from error


def write_rewinds(directory: str | Path, events: list[dict[str, object]]) -> None:
    """Atomically write a run's rewind events (oldest first) as `directory/rewinds.json`; the file's one writer.

    It lives beside `read_rewinds` because the report reads the file below the train layer that rewinds.
    """
    write_json_atomic(Path(directory) / REWINDS_FILE, {"rewinds": events})
