"""Loss-spike diagnosis, following the curve-reading guide's flowchart.

A spike is a run of steps whose train loss sits above the recent baseline by
more than `k_sigma` robust standard deviations (median and MAD over the
previous `window` finite points, so earlier spikes do not inflate the band).
Each spike is then classified:

- `recoverable`: within `horizon` steps after it, the loss is back inside the
  pre-spike band (the guide's "spike and recover": keep going);
- `plateau`: the loss settled at a level above the band (a new, worse
  plateau: rewind, or change something);
- `unresolved`: the metrics end before `horizon` steps have passed.

When gradient or update norms are logged, the spike records whether a norm
spiked first and by how many steps (`norm_led`, `lead_steps`): norms leading
the loss point at the optimizer, a loss-only spike at the data. When the
per-layer update norms are logged, it also names the layer that led
(`layer_led`): of the layers whose norm left its own rolling band within
`norm_lookback` steps before the loss spike, the one that left first, ties
broken by the largest rise over its own baseline (`layer_rise`, a ratio), and
how many steps before the loss it left (`layer_lead_steps`); None when no
layer left its band. When the run logged each layer's largest attention logit
(`aux/attn_logit_max`), the same rule names the layer whose attention logits
left their band first (`attn_layer_led`, `attn_layer_lead_steps`,
`attn_layer_rise`): attention-logit growth leading a spike is the failure
QK-norm prevents.

Example: a flat 3.0 curve with a 3-step bump to 5.0 at step 100 that returns to
3.0 is one `recoverable` spike at 100 with height 2.0; a jump that stays at
3.5 is a `plateau`.
"""

from dataclasses import dataclass, field

import numpy as np

from tootsie.monitor.metrics_log import MetricsRead
from tootsie.monitor.signals import ATTN_LOGIT_MAX, LayerNorms, layer_norms, series

NORM_SERIES = ("grad_norm", "update_norm")


@dataclass(frozen=True)
class SpikeConfig:
    """Thresholds of the spike detector and classifier."""

    window: int = 50
    """Previous finite points that define the baseline band."""
    k_sigma: float = 6.0
    """A point is a spike when above median + k_sigma * robust sigma."""
    min_relative_height: float = 0.02
    """...and above the median by at least this fraction of it (ignores noise on very flat curves)."""
    horizon: int = 50
    """Steps after a spike within which the loss must rejoin the band to count as recoverable."""
    settle: int = 10
    """Consecutive in-band points needed to call the loss back."""
    norm_lookback: int = 20
    """How many steps before a loss spike a norm spike may start and still count as leading it."""

    def __post_init__(self) -> None:
        if min(self.window, self.horizon, self.settle, self.norm_lookback) < 1 or self.k_sigma <= 0:
            raise ValueError(f"window, horizon, settle, norm_lookback must be >= 1 and k_sigma > 0, got {self}")


@dataclass(frozen=True)
class Spike:
    """One detected spike."""

    step: int
    height: float
    kind: str
    norm_led: bool | None
    lead_steps: int | None
    end_step: int
    baseline: float
    details: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The JSON fields of the spike report."""
        return {
            "step": self.step,
            "height": self.height,
            "kind": self.kind,
            "norm_led": self.norm_led,
            "lead_steps": self.lead_steps,
            "end_step": self.end_step,
            "baseline": self.baseline,
            **self.details,
        }


def _outliers(values: np.ndarray, config: SpikeConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per point: above the band?, the baseline median and the robust sigma before it."""
    above = np.zeros(len(values), dtype=bool)
    medians = np.full(len(values), np.nan)
    sigmas = np.full(len(values), np.nan)
    history: list[float] = []
    run: list[float] = []
    for i, value in enumerate(values):
        if len(history) >= min(config.window, 10):
            recent = np.array(history[-config.window :])
            median = float(np.median(recent))
            sigma = 1.4826 * float(np.median(np.abs(recent - median))) + 1e-12
            medians[i], sigmas[i] = median, sigma
            above[i] = value > median + config.k_sigma * sigma and value - median > config.min_relative_height * abs(
                median
            )
        if above[i]:
            run.append(value)
            if len(run) >= config.horizon:  # a level held this long is the new baseline, not a spike
                history.extend(run)
                run = []
        else:
            history.append(value)
            run = []
    return above, medians, sigmas


def _events(above: np.ndarray) -> list[tuple[int, int]]:
    """Index ranges [start, end] of consecutive outlier points."""
    events, start = [], None
    for i, flag in enumerate(above):
        if flag and start is None:
            start = i
        if not flag and start is not None:
            events.append((start, i - 1))
            start = None
    if start is not None:
        events.append((start, len(above) - 1))
    return events


def _classify(
    steps: np.ndarray, values: np.ndarray, start: int, end: int, median: float, sigma: float, config: SpikeConfig
) -> str:
    """Recoverable if `settle` consecutive points rejoin the pre-spike band within the horizon."""
    band = median + max(3 * sigma, config.min_relative_height * abs(median))
    after = np.flatnonzero((steps > steps[end]) & (steps <= steps[start] + config.horizon + config.settle))
    inside = values[after] <= band
    for i in range(len(after) - config.settle + 1):
        if inside[i : i + config.settle].all():
            return "recoverable"
    return "unresolved" if steps[-1] < steps[start] + config.horizon else "plateau"


def _first_norm_spike(norms: dict[str, tuple[np.ndarray, np.ndarray]], step: int, config: SpikeConfig) -> int | None:
    """The earliest norm-spike step within the lookback before (or at) a loss spike, over every norm series."""
    earliest = None
    for norm_steps, norm_above in norms.values():
        hits = norm_steps[norm_above & (norm_steps <= step) & (norm_steps >= step - config.norm_lookback)]
        if len(hits):
            earliest = int(hits.min()) if earliest is None else min(earliest, int(hits.min()))
    return earliest


def _layer_bands(
    layers: LayerNorms | None, config: SpikeConfig
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per layer, once per report: its logged steps, finite values, band outliers and baseline medians."""
    bands = []
    for index in range(layers.num_layers if layers is not None else 0):
        layer = layers.layer(index)
        above, medians, _ = _outliers(layer.values, config)
        bands.append((layer.steps, layer.values, above, medians))
    return bands


def _layer_lead(
    bands: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    step: int,
    config: SpikeConfig,
    name: str = "layer",
) -> dict[str, object]:
    """The layer whose signal left its own band first (then rose most) in the lookback before `step`.

    Keys `<name>_led`, `<name>_lead_steps`, `<name>_rise`.
    """
    best: tuple[int, float, int] | None = None  # (first outlier step, -rise, layer): min() picks the leader
    for index, (steps, values, above, medians) in enumerate(bands):
        inside = (steps <= step) & (steps >= step - config.norm_lookback)
        hits = steps[inside & above]
        if not len(hits):
            continue
        rise = float(np.nanmax(values[inside & above] / medians[inside & above]))
        best = min(best or (int(hits.min()), -rise, index), (int(hits.min()), -rise, index))
    if best is None:
        return {f"{name}_led": None, f"{name}_lead_steps": None, f"{name}_rise": None}
    return {f"{name}_led": best[2], f"{name}_lead_steps": step - best[0], f"{name}_rise": -best[1]}


def find_spikes(metrics: MetricsRead, config: SpikeConfig = SpikeConfig(), loss: str = "loss") -> dict[str, object]:
    """The spike report of a metrics file: spikes, the EMA gap if logged, and what was skipped."""
    steps, values, skipped = series(metrics.records, loss)
    above, medians, sigmas = _outliers(values, config)
    norms = {}
    for name in NORM_SERIES:
        norm_steps, norm_values, _ = series(metrics.records, name)
        if len(norm_values):
            norms[name] = (norm_steps, _outliers(norm_values, config)[0])
    bands = _layer_bands(layer_norms(metrics.records), config)
    attention_bands = _layer_bands(layer_norms(metrics.records, ATTN_LOGIT_MAX), config)
    spikes = []
    for start, end in _events(above):
        peak = start + int(np.argmax(values[start : end + 1]))
        led_at = _first_norm_spike(norms, int(steps[start]), config) if norms else None
        lead = None if led_at is None else int(steps[start]) - led_at
        spikes.append(
            Spike(
                step=int(steps[start]),
                height=float(values[peak] - medians[start]),
                kind=_classify(steps, values, start, end, medians[start], sigmas[start], config),
                norm_led=None if not norms else bool(lead is not None and lead > 0),
                lead_steps=lead,
                end_step=int(steps[end]),
                baseline=float(medians[start]),
                details={
                    **_layer_lead(bands, int(steps[start]), config),
                    **(
                        _layer_lead(attention_bands, int(steps[start]), config, "attn_layer") if attention_bands else {}
                    ),
                },
            )
        )
    report: dict[str, object] = {
        "spikes": [s.to_json() for s in spikes],
        "points": int(len(values)),
        "skipped": {
            "unparseable_lines": metrics.skipped_lines,
            f"non_finite_{loss}": skipped,
            "step_gaps": _gaps(steps),
        },
    }
    ema_gap = _ema_gap(metrics.records)
    if ema_gap:
        report["ema_gap"] = ema_gap
    return report


def _gaps(steps: np.ndarray) -> int:
    """Steps missing between the first and last logged step."""
    return int(steps[-1] - steps[0] + 1 - len(steps)) if len(steps) else 0


def _ema_gap(records: list[dict[str, object]]) -> list[dict[str, float]]:
    """(step, raw - EMA) for every record that logged both an eval metric and its EMA twin (`x` and `x_ema`)."""
    gaps = []
    for record in records:
        for key, value in record.items():
            twin = record.get(f"{key}_ema")
            if (
                isinstance(value, (int, float))
                and isinstance(twin, (int, float))
                and isinstance(record.get("step"), int)
            ):
                gaps.append({"step": record["step"], "metric": key, "gap": float(value) - float(twin)})
    return gaps
