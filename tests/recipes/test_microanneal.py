"""Microannealing: the plan's branches and anneals, and the ranking against the control with seed noise."""

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tootsie.cli.main import main
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.errors import TootsieError
from tootsie.eval.heldout_domains import DomainCacheConfig, tokenize_domain
from tootsie.executor import Step, StepRef, run_experiment
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig
from tootsie.recipes.components import train_phase
from tootsie.recipes.microanneal.anneals import CONTROL, MicroannealSpec, microanneal_steps
from tootsie.recipes.microanneal.rank import RankConfig, rank_candidates, rank_microanneal
from tootsie.recipes.microanneal.scales import tiny_microanneal
from tootsie.train.config import TrainConfig
from tootsie.train.schedule import LinearScheduleConfig

EXPERIMENT = str(Path(__file__).resolve().parents[2] / "experiments" / "microanneal.py")


def test_dry_run_plan_has_a_control_and_one_70_15_15_branch_per_candidate(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TOOTSIE_SCALE", raising=False)
    assert main(["run", EXPERIMENT, "--dry-run", "--json", "--prefix", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["microanneal"]
    branches = {b["name"]: b for b in plan["branches"]}
    assert len(branches) == 4 and plan["train_runs"] == 4 * len(plan["seeds"])
    assert branches[CONTROL]["weights"] == {"pretraining": 0.7, "flan": 0.3}
    for name, branch in branches.items():
        if name != CONTROL:
            assert branch["weights"] == {"pretraining": 0.7, "flan": 0.15, name: 0.15}
    assert plan["schedule"]["kind"] == "linear" and plan["schedule"]["min_lr_ratio"] == 0.0
    assert plan["warm_start"] == {"load_optimizer": False, "reset_step": True}


def test_tiny_steps_warm_start_every_branch_from_the_base_with_seeded_data() -> None:
    spec = tiny_microanneal(seeds=(0, 1))
    steps = microanneal_steps(spec)
    assert sorted({branch for branch, _ in steps["train"]}) == [CONTROL, "math", "patterned", "reference"]
    for (branch, seed), step in steps["train"].items():
        config = step.config
        assert isinstance(config.warm_start.checkpoint, StepRef) and config.warm_start.checkpoint == spec.base
        assert config.warm_start.reset_step and not config.warm_start.load_optimizer
        assert isinstance(config.schedule, LinearScheduleConfig) and config.schedule.total_steps == config.num_steps
        assert config.data.seed == seed
        weights = config.data.stages[0].weights
        assert sum(weights.values()) == pytest.approx(1.0) and weights["pretraining"] == 0.7
        assert (branch in weights) == (branch != CONTROL)
        bpb = steps["bpb"][branch, seed].config
        assert bpb.checkpoints == {"final": step.ref()} and set(bpb.heldout) == {"web", "code", "math", "qa"}
    ranking = steps["ranking"].config
    assert set(ranking.bpb) == {CONTROL, "math", "patterned", "reference"}
    with pytest.raises(ValueError, match="reserved"):
        MicroannealSpec(**{**spec.__dict__, "candidates": {"flan": "x"}})


def _runs(macro: list[float], math_bpb: list[float]) -> list[dict[str, float]]:
    return [
        {"math": m, "web": 2.0, "macro_avg": value, "micro_avg": value}
        for value, m in zip(macro, math_bpb, strict=True)
    ]


def test_ranking_finds_the_planted_candidate_only_above_the_noise() -> None:
    control = _runs([2.50, 2.52, 2.51], [3.0, 3.0, 3.0])
    bpb = {
        CONTROL: control,
        "planted": _runs([2.30, 2.31, 2.29], [2.6, 2.6, 2.6]),
        "noisy": _runs([2.40, 2.60, 2.45], [3.0, 3.0, 3.0]),  # better on average, but within its seed spread
        "worse": _runs([2.55, 2.56, 2.57], [3.1, 3.1, 3.1]),
    }
    results = rank_candidates(bpb, CONTROL, noise_sigmas=2.0)
    ranked = [c["name"] for c in results["candidates"]]
    assert ranked == ["planted", "noisy", "worse"] and results["best"] == "planted"
    planted, noisy = results["candidates"][0], results["candidates"][1]
    assert planted["delta_vs_control"] == pytest.approx(-0.21)
    assert planted["noise"] == pytest.approx(((0.01**2) / 3 + (0.01**2) / 3) ** 0.5)
    assert planted["above_noise"] and not noisy["above_noise"] and noisy["delta_vs_control"] < 0
    assert planted["delta_by_domain"] == pytest.approx({"math": -0.4, "web": 0.0})
    tasks = {CONTROL: [{"arc/lm-eval/acc": 0.25}] * 3, "planted": [{"arc/lm-eval/acc": v} for v in (0.5, 0.4, 0.3)]}
    with_tasks = rank_candidates(bpb, CONTROL, noise_sigmas=2.0, tasks=tasks)["candidates"][0]["tasks"]
    assert with_tasks == {"arc/lm-eval/acc": {"value": pytest.approx(0.4), "delta_vs_control": pytest.approx(0.15)}}
    one_seed = rank_candidates({CONTROL: control[:1], "planted": bpb["planted"][:1]}, CONTROL)
    assert one_seed["candidates"][0]["noise"] is None and one_seed["best"] is None


def test_rank_step_writes_results_json_and_a_figure(tmp_path) -> None:
    paths: dict[str, dict[str, str]] = {}
    for branch, macro in {CONTROL: [2.5, 2.52], "math": [2.2, 2.21], "patterned": [2.6, 2.58]}.items():
        for seed, value in enumerate(macro):
            path = tmp_path / branch / str(seed) / "bpb.json"
            write_json_atomic(path, {"final": {"math": value + 0.5, "macro_avg": value, "micro_avg": value}})
            paths.setdefault(branch, {})[str(seed)] = str(path)
    rank_microanneal(
        RankConfig(bpb=paths, tasks={}, control=CONTROL, noise_sigmas=2.0, weights={}), str(tmp_path / "out")
    )
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    first = results["candidates"][0]
    assert {"name", "bpb_macro", "delta_vs_control", "noise", "tasks"} <= set(first)
    assert first["name"] == "math" and results["best"] == "math"
    assert (tmp_path / "out" / "figure.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_miniature_microanneal_runs_end_to_end(tmp_path) -> None:
    """A base, the control and two candidates (one seed, 3 steps each) through the executor to results.json."""
    texts = {
        "pre": [f"def f{i}(x):\n    return x + {i}\n" for i in range(60)],
        "flan": [f"Q: what is {i} plus 1?\nA: {i + 1}" for i in range(60)],
        "a": [f"{i} {i + 1} {i + 2} {i + 3}" for i in range(60)],
        "b": [f"the cat number {i} sat on the mat" for i in range(60)],
    }
    for name, docs in texts.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    write_table_atomic(pa.table({"text": [t for docs in texts.values() for t in docs]}), tmp_path / "tok" / "d.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(tmp_path / "tok"),), vocab_size=300), str(tmp_path / "tokenizer"))
    tokenizer = str(tmp_path / "tokenizer" / "tokenizer.json")
    caches = {
        name: Step(
            f"mini/{name}", tokenize_domain, DomainCacheConfig(name, (str(tmp_path / f"{name}.jsonl"),), tokenizer)
        )
        for name in texts
    }
    model = LlamaConfig(vocab_size=300, hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=2, num_kv_heads=1)
    base = Step(
        "mini/base",
        train_phase,
        TrainConfig(
            model=model,
            data=MixtureConfig(
                caches={"pre": caches["pre"].ref()},
                stages=(MixtureStage(0, {"pre": 1.0}),),
                seq_len=32,
                batch_schedule=BatchSchedule.constant(4),
            ),
            num_steps=3,
            schedule=LinearScheduleConfig(peak_lr=1e-2, warmup_steps=1, total_steps=3),
            ema=None,
        ),
    )
    spec = MicroannealSpec(
        base=base.ref(),
        model=model,
        pretraining=caches["pre"].ref(),
        flan=caches["flan"].ref(),
        candidates={"a": caches["a"].ref(), "b": caches["b"].ref()},
        heldout={"numbers": caches["a"].ref(), "code": caches["pre"].ref()},
        tokenizer=tokenizer,
        name="mini",
        seq_len=32,
        batch_size=4,
        steps=3,
        warmup_steps=1,
        seeds=(0,),
        eval_sequences=4,
    )
    report = run_experiment([microanneal_steps(spec)["ranking"]], tmp_path / "prefix")
    assert report.ok and len(report.steps) == 4 + 1 + 3 * 2 + 1  # 4 caches, base, 3 anneals and their BPB, ranking
    ranking = next(s for s in report.steps if s.name == "mini/ranking")
    results = json.loads((Path(ranking.output_path) / "results.json").read_text())
    assert sorted(c["name"] for c in results["candidates"]) == ["a", "b"]
    assert all(c["noise"] is None and c["tasks"] == {} for c in results["candidates"]) and results["best"] is None
    assert set(results["control"]["bpb"]) == {"numbers", "code", "macro_avg", "micro_avg"}


def test_task_env_adds_one_task_step_per_anneal(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TOOTSIE_MICROANNEAL_TASKS", "arc_easy,piqa")
    monkeypatch.setenv("TOOTSIE_MICROANNEAL_TASK_DATA", str(tmp_path))
    steps = microanneal_steps(tiny_microanneal(seeds=(0, 1)))
    assert set(steps["tasks"]) == set(steps["train"])
    for key, step in steps["tasks"].items():
        assert step.config.checkpoint == steps["train"][key].ref() and step.config.suite == "arc_easy,piqa"
    assert set(steps["ranking"].config.tasks) == {CONTROL, "math", "patterned", "reference"}
    monkeypatch.delenv("TOOTSIE_MICROANNEAL_TASK_DATA")
    with pytest.raises(TootsieError, match="set both"):
        tiny_microanneal()
