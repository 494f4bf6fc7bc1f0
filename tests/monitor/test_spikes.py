"""The spike classifier on synthetic curves with known spikes, and on damaged metrics files."""

import json

import numpy as np
import pytest

from tootsie.cli.main import main
from tootsie.monitor.metrics_log import read_metrics
from tootsie.monitor.spikes import find_spikes


def _curve(steps: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    loss = 3.0 + 2.0 * np.exp(-np.arange(steps) / 80) + rng.normal(0, 0.01, steps)
    grad = 1.0 + rng.normal(0, 0.02, steps)
    return loss, grad


def _write(path, loss: np.ndarray, grad: np.ndarray | None = None) -> None:
    lines = [
        json.dumps({"step": i, "loss": float(v), **({"grad_norm": float(grad[i])} if grad is not None else {})})
        for i, v in enumerate(loss)
    ]
    path.write_text("\n".join(lines) + "\n")


def _report(tmp_path, loss, grad=None) -> dict:
    _write(tmp_path / "m.jsonl", loss, grad)
    return find_spikes(read_metrics(tmp_path / "m.jsonl"))


def test_recoverable_spike_led_by_the_gradient_norm(tmp_path) -> None:
    loss, grad = _curve()
    loss[200:203] += 1.0
    grad[197:203] *= 5.0
    [spike] = _report(tmp_path, loss, grad)["spikes"]
    assert spike["step"] == 200 and spike["kind"] == "recoverable"
    assert spike["height"] == pytest.approx(1.0, abs=0.1)
    assert spike["norm_led"] is True and spike["lead_steps"] == 3


def test_plateau_without_a_leading_norm(tmp_path) -> None:
    loss, grad = _curve()
    loss[250:] += 0.6
    [spike] = _report(tmp_path, loss, grad)["spikes"]
    assert spike["step"] == 250 and spike["kind"] == "plateau"
    assert spike["norm_led"] is False and spike["lead_steps"] is None


def test_norms_spiking_with_the_loss_did_not_lead(tmp_path) -> None:
    loss, grad = _curve()
    loss[150:152] += 2.0
    grad[150:152] *= 10.0
    [spike] = _report(tmp_path, loss, grad)["spikes"]
    assert spike["kind"] == "recoverable" and spike["norm_led"] is False and spike["lead_steps"] == 0


def test_spike_at_the_end_is_unresolved_and_no_norms_means_unknown(tmp_path) -> None:
    loss, _ = _curve()
    loss[390:392] += 1.0
    [spike] = _report(tmp_path, loss)["spikes"]
    assert spike["kind"] == "unresolved" and spike["norm_led"] is None


def test_a_clean_curve_has_no_spikes(tmp_path) -> None:
    loss, grad = _curve(seed=3)
    assert _report(tmp_path, loss, grad)["spikes"] == []


def test_damaged_files_still_work_and_say_what_was_skipped(tmp_path, capsys) -> None:
    loss, _ = _curve()
    loss[200:203] += 1.0
    lines = [json.dumps({"step": i, "loss": float(v)}) for i, v in enumerate(loss) if not 100 <= i < 110]  # a gap
    lines[50] = json.dumps({"step": 50, "loss": None})  # NaN written as null by the metrics log
    lines[60] = json.dumps({"step": 60, "loss": "inf"})
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + '\n{"step": 400, "lo')  # truncated last line
    assert main(["monitor", "spikes", str(tmp_path / "m.jsonl"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [s["step"] for s in report["spikes"]] == [200]
    assert report["skipped"] == {"unparseable_lines": 1, "non_finite_loss": 2, "step_gaps": 12}


def test_the_layer_whose_norm_jumped_first_led_the_spike(tmp_path, capsys) -> None:
    loss, grad = _curve()
    rng = np.random.default_rng(1)
    layers = 0.1 * (1 + np.arange(4))[:, None] * (1 + rng.normal(0, 0.02, (4, len(loss))))
    loss[200:203] += 1.0
    layers[2, 198:203] *= 4.0  # layer 2 jumps two steps before the loss
    layers[0, 200:203] *= 8.0  # layer 0 jumps more, but with the loss
    records = [
        {"step": i, "loss": float(v), "grad_norm": float(grad[i]), "layer_update_norms": layers[:, i].tolist()}
        for i, v in enumerate(loss)
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["monitor", "spikes", str(tmp_path / "m.jsonl"), "--json"]) == 0
    [spike] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["spikes"]
    assert spike["step"] == 200 and spike["layer_led"] == 2 and spike["layer_lead_steps"] == 2
    assert spike["layer_rise"] == pytest.approx(4.0, rel=0.1)
    assert main(["monitor", "spikes", str(tmp_path / "m.jsonl")]) == 0
    assert "step 200: layer 2 led by 2 steps" in capsys.readouterr().out
    [plain] = _report(tmp_path, loss, grad)["spikes"]  # no per-layer norms logged: nothing to name
    assert plain["layer_led"] is None and plain["layer_lead_steps"] is None


def test_the_layer_whose_attention_logits_grew_first_is_named_beside_the_update_norm_leader(tmp_path, capsys) -> None:
    loss, grad = _curve()
    rng = np.random.default_rng(2)
    logits = 5.0 * (1 + rng.normal(0, 0.01, (2, len(loss))))
    loss[300:303] += 1.0
    logits[1, 295:303] *= 3.0  # layer 1's attention logits grow five steps before the loss spikes
    records = [
        {"step": i, "loss": float(v), "grad_norm": float(grad[i]), "aux/attn_logit_max": logits[:, i].tolist()}
        for i, v in enumerate(loss)
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["monitor", "spikes", str(tmp_path / "m.jsonl"), "--json"]) == 0
    [spike] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["spikes"]
    assert spike["attn_layer_led"] == 1 and spike["attn_layer_lead_steps"] == 5 and spike["layer_led"] is None
    assert spike["attn_layer_rise"] == pytest.approx(3.0, rel=0.1)
    assert main(["monitor", "spikes", str(tmp_path / "m.jsonl")]) == 0
    assert "step 300: attention logits of layer 1 led by 5 steps" in capsys.readouterr().out
    [plain] = _report(tmp_path, loss, grad)["spikes"]  # an older run without the signal: no attention keys
    assert "attn_layer_led" not in plain
