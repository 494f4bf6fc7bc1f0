"""Signal extraction: named scalar series, the per-layer norm matrix, MoE expert loads and the rewind record."""

import json
import math

import pytest

from tootsie.errors import TootsieError
from tootsie.monitor.signals import REWINDS_FILE, expert_loads, layer_norms, read_rewinds, series


def _records() -> list[dict[str, object]]:
    return [
        {"step": 0, "loss": 3.1, "adam/mu_norm": 0.5, "layer_update_norms": [0.2, 0.3], "eval/bpb/code": 2.0},
        {"step": 1, "loss": None, "adam/mu_norm": 0.6, "layer_update_norms": [0.1, "inf"]},
        {"step": 2, "loss": 2.9, "lm_head_norm": 7.0, "layer_update_norms": [0.05]},
        {"loss": 1.0},  # no step: left out
    ]


def test_a_series_is_finite_and_in_step_order() -> None:
    steps, values, skipped = series(list(reversed(_records())), "loss")
    assert steps.tolist() == [0, 2] and values.tolist() == [3.1, 2.9] and skipped == 2  # a null, a record without step
    steps, values, skipped = series(_records(), "adam/mu_norm")
    assert steps.tolist() == [0, 1] and values.tolist() == [0.5, 0.6] and skipped == 0


def test_layer_norms_are_layers_by_steps_with_gaps_as_nan() -> None:
    layers = layer_norms(_records())
    assert layers is not None and layers.values.shape == (2, 3) and layers.steps.tolist() == [0, 1, 2]
    assert layers.values[0].tolist() == [0.2, 0.1, 0.05]
    assert layers.values[1, 0] == 0.3 and math.isnan(layers.values[1, 1]) and math.isnan(layers.values[1, 2])
    assert layers.layer(1).steps.tolist() == [0] and layers.layer(1).values.tolist() == [0.3]
    assert layer_norms([{"step": 0, "loss": 1.0}]) is None


def test_expert_loads_are_evenly_spaced_steps_ending_at_the_latest_with_damage_as_nan() -> None:
    records = [{"step": s, "moe/expert_load": [[s / 10, 1 - s / 10], [0.5, 0.5]]} for s in range(10)]
    records[9]["moe/expert_load"] = [[0.9, None], [0.5]]  # damaged entries: NaN, not a dropped step
    records.append({"step": 10, "moe/expert_load": [0.5, 0.5]})  # a flat list is not a [layers][experts] matrix
    records.append({"step": 11, "loss": 1.0})
    loads = expert_loads(list(reversed(records)), count=4)
    assert [load.step for load in loads] == [0, 3, 6, 9] and loads[1].shares.tolist() == [[0.3, 0.7], [0.5, 0.5]]
    latest = expert_loads(records)[0]
    assert latest.step == 9 and latest.num_experts == 2 and math.isnan(latest.shares[0, 1])
    assert math.isnan(latest.shares[1, 1]) and latest.shares[1, 0] == 0.5
    assert expert_loads(records, count=50)[-1].step == 9 and len(expert_loads(records, count=50)) == 10
    assert expert_loads(_records()) == ()


def test_rewinds_are_read_with_their_skipped_window(tmp_path) -> None:
    assert read_rewinds(tmp_path) == ()
    event = {"spike_step": 32, "height": 1.0, "baseline": 2.0, "detected_at": 41, "to_step": 28}
    (tmp_path / REWINDS_FILE).write_text(json.dumps({"rewinds": [{**event, "skipped_data_steps": [28, 42]}]}))
    [rewind] = read_rewinds(tmp_path)
    assert rewind.window == (28, 41) and rewind.skipped_data_steps == (28, 42)
    assert rewind.to_json() == {"spike_step": 32, "from_step": 41, "to_step": 28, "skipped_data_steps": [28, 42]}
    (tmp_path / REWINDS_FILE).write_text(json.dumps({"rewinds": [event]}))
    with pytest.raises(TootsieError, match="rewinds.json is not a rewind record"):
        read_rewinds(tmp_path)
