"""HTML run report on synthetic runs: every panel, spike, mixture and config sections, damaged metrics, offline-only."""

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tootsie.configfile import to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig
from tootsie.report.data import load_run_directory, load_runs
from tootsie.report.panels import smooth
from tootsie.report.run_report import clip_skip_events, find_run_spikes, mixture_by_phase, spike_positions, write_report
from tootsie.report.run_summary import RunSummaryConfig, summarize_runs
from tootsie.train.config import TrainConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.stability import StabilityConfig

PANEL_TITLES = (
    "Held-out loss: bits-per-byte per domain",
    "Train loss (raw and smoothed)",
    "Gradient norm (pre-clip)",
    "Update norm (post-optimizer)",
    "Per-layer update norms (layer × step)",
    "Optimizer moments: Adam first and second moment norms",
    "lm_head norm",
    "Embedding norm",
    "Largest pre-softmax attention logit per layer (layer × step)",
    "Output logits: the largest logit and log Z",
    "Learning rate and schedule phase",
    "Throughput and MFU",
    "Clip and skip events",
    "Data mixture by phase",
)
SPIKE_STEP, NAN_STEP, GAP, LAYERS = 120, 60, range(80, 85), 3


def config_plain(stages: tuple[MixtureStage, ...], steps: int = 200) -> dict:
    """A real TrainConfig as `tootsie train` saves it (config.json)."""
    data = MixtureConfig(
        caches={"code": "/caches/code", "prose": "/caches/prose"},
        stages=stages,
        seq_len=32,
        batch_schedule=BatchSchedule.constant(4),
    )
    model = LlamaConfig(vocab_size=64, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1)
    return to_plain(
        TrainConfig(
            model=model,
            data=data,
            num_steps=steps,
            optimizer=AdamWConfig(max_grad_norm=1.0),
            schedule=WSDConfig(warmup_steps=10, decay_steps=50, total_steps=steps),
            stability=StabilityConfig(clip_update_window=16, skip_bad_steps=True),
        )
    )


def write_synthetic_run(directory: Path, steps: range = range(200), spike: bool = True, damaged: bool = True) -> Path:
    """Write metrics.jsonl and config.json for a synthetic run.

    The metrics have a loss spike led by the grad norm, WSD phases, in-loop eval, clip/skip events and (optionally)
    damage.
    """
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for step in steps:
        if damaged and step in GAP:
            continue
        loss = (
            3.0
            + 2.0 * np.exp(-step / 40)
            + rng.normal(0, 0.01)
            + (1.5 if spike and SPIKE_STEP <= step < SPIKE_STEP + 3 else 0.0)
        )
        grad = 0.5 + rng.normal(0, 0.01) + (4.0 if spike and SPIKE_STEP - 2 <= step < SPIKE_STEP + 3 else 0.0)
        phase = "warmup" if step < 10 else "stable" if step < 150 else "decay"
        record = {
            "step": step,
            "loss": None if damaged and step == NAN_STEP else loss,
            "grad_norm": grad,
            "update_norm": 0.1 + rng.normal(0, 0.002),
            "layer_update_norms": [0.05 * (layer + 1) + rng.normal(0, 0.001) for layer in range(LAYERS)],
            "adam/mu_norm": 0.2 + 0.001 * step,
            "adam/nu_norm": 1e-4 + 1e-6 * step,
            "lm_head_norm": 10.0 + 0.01 * step,
            "embed_norm": 12.0 + 0.01 * step,
            "aux/attn_logit_max": [4.0 + layer + 0.01 * step for layer in range(LAYERS)],
            "aux/logit_max": 9.0 + 0.005 * step,
            "aux/log_z_max": 7.0 + 0.004 * step,
            "aux/log_z": 6.0 + 0.002 * step,
            "lr": 1e-3 * min(1.0, (step + 1) / 10, (200 - step) / 50),
            "phase": phase,
            "batch_size": 4,
            "tokens": 128 * (step + 1),
            "tokens_per_s": 2000.0 + rng.normal(0, 20),
            "mfu": 0.3,
            "step_seconds": 0.064,
            "clip_update/clipped": float(step == SPIKE_STEP + 1),
            "clip_update/threshold": 0.12,
            "skip/skipped": float(step == SPIKE_STEP + 2),
        }
        if step % 50 == 49:
            for suffix, shift in (("", 0.0), ("_ema", -0.02)):
                record |= {
                    f"eval/bpb/code{suffix}": 2.0 - step / 400 + shift,
                    f"eval/bpb/prose{suffix}": 2.5 - step / 400 + shift,
                }
                record |= {
                    f"eval/bpb/macro_avg{suffix}": 2.25 - step / 400 + shift,
                    f"eval/bpb/micro_avg{suffix}": 2.2 - step / 400 + shift,
                }
        lines.append(json.dumps(record))
    if damaged:
        lines.insert(5, "this is not json")
        lines.append('{"step": 999, "loss": 3.')  # truncated by a crash
    (directory / "metrics.jsonl").write_text("\n".join(lines) + ("" if damaged else "\n"), encoding="utf-8")
    stages = (
        MixtureStage(0, {"code": 0.5, "prose": 0.5}),
        MixtureStage(150, {"code": 0.3, "prose": 0.7}, transition_steps=20),
    )
    (directory / "config.json").write_text(json.dumps(config_plain(stages)), encoding="utf-8")
    return directory


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_report_of_a_damaged_run_has_every_section(tmp_path) -> None:
    run = write_synthetic_run(tmp_path / "run")
    result = write_report(run)
    page = (run / "report.html").read_text(encoding="utf-8")
    assert result["report"] == str(run / "report.html") and result["bytes"] == len(page.encode())
    assert (
        not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
        and "<script" not in page
        and "<link" not in page
    )
    for title in PANEL_TITLES:
        assert f"<h2>{title}</h2>" in page
    assert all(result["panels"].values())
    images = _images(page)
    assert len(images) == len(PANEL_TITLES) and all(image.startswith(b"\x89PNG\r\n\x1a\n") for image in images)
    [spike] = result["spikes"]
    assert (
        spike["step"] == SPIKE_STEP
        and spike["kind"] == "recoverable"
        and spike["norm_led"] is True
        and spike["lead_steps"] == 2
    )
    assert f"<td>{SPIKE_STEP}</td><td>{SPIKE_STEP + 2}</td>" in page and "<td>recoverable</td>" in page
    # the mixture by phase: 50/50 up to step 149, then 30/70 reached over a 20-step transition
    assert "<td>0</td><td>0–149</td><td>0</td><td>50.0%</td><td>50.0%</td>" in page
    assert "<td>1</td><td>150–199</td><td>20</td><td>30.0%</td><td>70.0%</td>" in page
    assert "max_grad_norm: 1.0" in page and "config.json" in page and "clip_update_window: 16" in page
    # what was skipped: the garbage line and the truncated last line, the null loss, the gap
    assert result["skipped"]["unparseable_lines"] == 2 and "2 unparseable line(s)" in page
    assert result["skipped"]["runs"]["run"] == {"non_finite": {"loss": 1}, "missing_steps": 5, "gaps": [(80, 84)]}
    assert "gaps at 80–84" in page and "loss 1" in page


def test_clip_skip_events_and_mixture_transition(tmp_path) -> None:
    data = load_run_directory(write_synthetic_run(tmp_path / "run"))
    events, settings = clip_skip_events(data.runs)
    assert events["update clipped"] == [SPIKE_STEP + 1] and events["step skipped"] == [SPIKE_STEP + 2]
    assert events["non-finite loss"] == [NAN_STEP]
    assert events["grad norm > max_grad_norm"] == list(range(SPIKE_STEP - 2, SPIKE_STEP + 3))
    assert (
        "max_grad_norm=1.0" in settings and "update clip σ=2.0 over 16" in settings and "skip_bad_steps on" in settings
    )
    rows, curves, notes = mixture_by_phase(data.runs)
    steps, weights = curves["run"]
    halfway = int(np.flatnonzero(steps == 159)[0])  # 10 of 20 transition steps done: 40 % code
    assert (
        weights["code"][halfway] == pytest.approx(0.4)
        and weights["code"][0] == 0.5
        and weights["prose"][-1] == pytest.approx(0.7)
    )
    assert len(rows) == 2 and notes == []


def test_summary_directory_shows_both_runs_and_the_offline_bpb(tmp_path) -> None:
    pretrain = write_synthetic_run(tmp_path / "pretrain", range(0, 150), spike=False, damaged=False)
    cooldown = write_synthetic_run(tmp_path / "cooldown", range(150, 200), spike=False, damaged=False)
    (cooldown / "config.json").write_text(
        json.dumps(config_plain((MixtureStage(0, {"code": 0.2, "prose": 0.8}),))), encoding="utf-8"
    )
    bpb = {
        label: {"code": 3.0 - i, "prose": 3.5 - i, "macro_avg": 3.25 - i, "micro_avg": 3.2 - i}
        for i, label in enumerate(("init", "pretrain", "final"))
    }
    (tmp_path / "bpb.json").write_text(json.dumps(bpb), encoding="utf-8")
    summarize_runs(
        RunSummaryConfig(runs={"pretrain": str(pretrain), "cooldown": str(cooldown)}, bpb=str(tmp_path / "bpb.json")),
        str(tmp_path / "summary"),
    )
    page = (tmp_path / "summary" / "report.html").read_text(encoding="utf-8")
    rows = re.findall(r"<tr><td>(init|pretrain|final)</td>(?:<td>[0-9.]+</td>){4}", page)
    assert rows == ["init", "pretrain", "final"]  # offline BPB table, in checkpoint order
    assert "<td>pretrain</td><td>0</td><td>0–149</td><td>0</td><td>50.0%</td><td>50.0%</td>" in page
    assert "<td>cooldown</td><td>0</td><td>150–199</td><td>0</td><td>20.0%</td><td>80.0%</td>" in page
    assert page.count("<h3>pretrain</h3>") == 1 and page.count("<h3>cooldown</h3>") == 1
    assert "Nothing: every line parsed" in page


def test_an_older_summary_finds_its_runs_through_the_executor_metadata(tmp_path) -> None:
    pretrain = write_synthetic_run(
        tmp_path / "prefix" / "demo" / "train" / "pretrain-aaa", range(10), spike=False, damaged=False
    )
    summary = tmp_path / "prefix" / "demo" / "summary-bbb"
    summary.mkdir(parents=True)
    (summary / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "loss": 3.0, "run": "pretrain"}) + "\n" for i in range(10)), encoding="utf-8"
    )
    info = {
        "name": "demo/summary",
        "hash": "bbb",
        "output_path": str(summary),
        "config": {"runs": {"pretrain": {"__step__": "demo/train/pretrain-aaa", "subpath": ""}}},
    }
    (summary / ".executor_info.json").write_text(json.dumps(info), encoding="utf-8")
    [run] = load_run_directory(summary).runs
    assert (
        run.label == "pretrain"
        and run.config_source == str(pretrain / "config.json")
        and run.config["data"]["stages"][1]["start_step"] == 150
    )


def test_a_file_of_garbage_still_reports_what_it_skipped(tmp_path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text(
        'garbage\n{"loss": 3.0}\n{"step": 0, "loss": NaN\n', encoding="utf-8"
    )
    result = write_report(tmp_path / "run")
    page = Path(result["report"]).read_text(encoding="utf-8")
    assert (
        not any(result["panels"].values())
        and result["skipped"]["unparseable_lines"] == 2
        and result["skipped"]["records_without_step"] == 1
    )
    assert (
        "No in-loop evaluation was logged" in page and "No config found" not in page and "2 unparseable line(s)" in page
    )
    with pytest.raises(TootsieError, match="no metrics.jsonl"):
        write_report(tmp_path)


def test_extra_figures_are_embedded_and_a_missing_one_is_named(tmp_path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text(
        '{"step": 0, "loss": 3.0}\n{"step": 1, "loss": 2.5}\n', encoding="utf-8"
    )
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    (tmp_path / "figure.png").write_bytes(png)
    result = write_report(
        tmp_path / "run", figures={"Case study": tmp_path / "figure.png", "Lost": tmp_path / "missing.png"}
    )
    page = Path(result["report"]).read_text(encoding="utf-8")
    assert result["panels"]["Case study"] is True and result["panels"]["Lost"] is False
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"' in page
    assert f"figure not found: {tmp_path / 'missing.png'}" in page


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=200), st.floats(1, 100))
def test_smoothing_stays_within_the_range_seen_so_far(values: list[float], span: float) -> None:
    smoothed = smooth(np.array(values), span)
    assert smoothed[0] == pytest.approx(values[0])
    for i, value in enumerate(smoothed):
        assert min(values[: i + 1]) - 1e-6 <= value <= max(values[: i + 1]) + 1e-6


TIME_PANELS = tuple(title for title in PANEL_TITLES if title not in ("Clip and skip events", "Data mixture by phase"))


def test_a_multi_run_report_overlays_every_run_on_every_panel(tmp_path) -> None:
    reference = write_synthetic_run(tmp_path / "reference", damaged=False)
    new = write_synthetic_run(tmp_path / "new", range(150), spike=False, damaged=False)
    result = write_report([reference, new], tmp_path / "compare.html")
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "<h1>Run report: reference vs new</h1>" in page and all(result["panels"].values())
    for title in TIME_PANELS:
        drawn = result["traces"][title]
        assert set(drawn) == {"reference", "new"}, title
        assert drawn.count("reference") == drawn.count("new"), title  # the same curves for each run
    assert result["traces"]["Per-layer update norms (layer × step)"] == ["reference", "new"]
    assert f"reference: {LAYERS} layers × 200 steps; new: {LAYERS} layers × 150 steps" in page
    [spike] = result["spikes"]  # found in the reference only, and named by its run
    assert spike["run"] == "reference" and spike["step"] == SPIKE_STEP
    assert f"<td>reference</td><td>{SPIKE_STEP}</td>" in page
    single = write_report(reference, tmp_path / "single.html")  # one run: the report as before
    assert set(single["traces"]["Train loss (raw and smoothed)"]) == {"reference"} and "run" not in single["spikes"][0]


def test_a_synthetic_rewind_is_marked_with_its_steps_and_skipped_data(tmp_path) -> None:
    run = write_synthetic_run(tmp_path / "run", spike=False, damaged=False)
    event = {"spike_step": 90, "height": 1.2, "baseline": 3.1, "detected_at": 99, "to_step": 84}
    (run / "rewinds.json").write_text(json.dumps({"rewinds": [{**event, "skipped_data_steps": [84, 100]}]}))
    result = write_report(run, x="tokens")
    page = Path(result["report"]).read_text(encoding="utf-8")
    assert result["runs"]["run"]["rewinds"] == [
        {"spike_step": 90, "from_step": 99, "to_step": 84, "skipped_data_steps": [84, 100]}
    ]
    assert "<td>run</td><td>90</td><td>99</td><td>84</td><td>[84, 100)</td>" in page and "1 rewind(s)" in page
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "metrics.jsonl").write_text('{"step": 0, "loss": 3.0}\n', encoding="utf-8")
    with pytest.raises(TootsieError, match="logged no `tokens` field"):
        write_report(tmp_path / "bare", x="tokens")


def test_spikes_sit_at_their_tokens_when_drawn_against_tokens(tmp_path) -> None:
    """With --x tokens a spike at train step s is drawn where its run had trained 128 * (s + 1) tokens."""
    data = load_runs([write_synthetic_run(tmp_path / "run", spike=True, damaged=False)])
    spikes = find_run_spikes(data)["spikes"]
    assert [s["step"] for s in spikes] == [SPIKE_STEP]
    assert spike_positions(data, spikes, "step") == (SPIKE_STEP,)
    assert spike_positions(data, spikes, "tokens") == (128 * (SPIKE_STEP + 1),)
