"""The report's instability-signal panels on synthetic metrics: the attention-logit heatmap per layer, the
output-logit panel and the embedding norm, drawn for a run that logged them and explained when none did."""

import json
from pathlib import Path

from tootsie.report.run_report import write_report

ATTENTION, OUTPUT, EMBED = (
    "Largest pre-softmax attention logit per layer (layer × step)",
    "Output logits: the largest logit and log Z",
    "Embedding norm",
)
STEPS, LAYERS = 12, 3


def _record(step: int, signals: bool) -> dict[str, object]:
    """A step whose layer 2's attention logit grows tenfold over the run while the others stay flat."""
    record: dict[str, object] = {"step": step, "loss": 4.0 - 0.1 * step, "lr": 1e-3, "tokens": 64 * (step + 1)}
    if signals:
        record |= {
            "aux/attn_logit_max": [3.0, 4.0, 5.0 * (1 + 9 * step / (STEPS - 1))],
            "aux/logit_max": 8.0 + step,
            "aux/log_z_max": 6.0 + 0.5 * step,
            "aux/log_z": 5.0 + 0.2 * step,
            "embed_norm": 10.0 + step,
        }
    return record


def _run(directory: Path, signals: bool) -> Path:
    directory.mkdir(parents=True)
    lines = (json.dumps(_record(step, signals)) + "\n" for step in range(STEPS))
    (directory / "metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    (directory / "config.json").write_text(json.dumps({"num_steps": STEPS, "model": {}}), encoding="utf-8")
    return directory


def test_a_run_with_signals_gets_the_three_panels_and_an_older_run_beside_it_draws_nothing_there(
    tmp_path: Path,
) -> None:
    new, old = _run(tmp_path / "new", signals=True), _run(tmp_path / "old", signals=False)
    result = write_report([new, old], tmp_path / "compare.html")
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert all(result["panels"][title] for title in (ATTENTION, OUTPUT, EMBED))
    assert result["traces"][ATTENTION] == ["new"]  # one heatmap strip: the old run logged no per-layer logits
    assert result["traces"][OUTPUT] == ["new"] * 3 and result["traces"][EMBED] == ["new"]
    assert f"new: {LAYERS} layers × {STEPS} steps" in page


def test_runs_without_signals_get_a_note_instead_of_an_empty_panel(tmp_path: Path) -> None:
    result = write_report(_run(tmp_path / "old", signals=False), tmp_path / "old.html")
    page = (tmp_path / "old.html").read_text(encoding="utf-8")
    assert not result["panels"][ATTENTION] and not result["panels"][OUTPUT]
    assert "`aux/attn_logit_max` was not logged" in page and "No output-logit signal was logged" in page
