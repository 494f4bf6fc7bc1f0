"""The Marin 8B Instruct recipe: the card's datasets and length, NOT IN SEEDS marks, the warm start, the tiny graph."""

import ast
import inspect
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import equinox as eqx
import jax
import pyarrow as pa
import pytest

from tootsie.data.sequences import WholeDocumentsConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.token_cache import open_token_cache
from tootsie.datakit.tokenize import ChatTokenizeConfig, tokenize_chat
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.eval.assistant_loss import assistant_loss
from tootsie.executor import Step, step_hash
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.recipes.instruct import REPORT_FILE, AssistantLossReportConfig, assistant_loss_report
from tootsie.recipes.marin import tables_8b_instruct as t
from tootsie.recipes.tiny.chat import CHAT_KINDS, TinyChatConfig, build_tiny_chat
from tootsie.recipes.tiny.scale import SCALE_ENV, tiny_recipe_steps
from tootsie.train.checkpoint import save_checkpoint
from tootsie.train.config import TrainConfig
from tootsie.train.loading import load_model

from .helpers import REPO, SEEDS, load_experiment_module, needs_seeds

CARD = "marin-8b-model-card.md"
OUTLINE = "paper-outline-marin-8b-32b.md"


def load(scale: str) -> ModuleType:
    """The experiment file at `scale`, with experiments/ importable (it imports its sibling marin_8b)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SCALE_ENV, scale)
        patch.syspath_prepend(str(REPO / "experiments"))
        module = load_experiment_module("marin_8b_instruct")
        sys.modules.pop("marin_8b", None)
    return module


@pytest.fixture(scope="module")
def full() -> ModuleType:
    return load("full")


@pytest.fixture(scope="module")
def tiny() -> ModuleType:
    return load("tiny")


@pytest.fixture(scope="module")
def plan(full: ModuleType) -> dict[str, Any]:
    return full.PLAN()


def test_plan_is_one_sft_phase_of_5_3b_tokens(plan: dict[str, Any]) -> None:
    assert (plan["recipe"], plan["scale"], plan["final_artifact"], plan["seq_len"]) == (
        "marin_8b_instruct",
        "full",
        "sft",
        4096,
    )
    (phase,) = plan["phases"]
    assert (phase["name"], phase["start_step"], phase["end_step"]) == ("sft", 0, 10_109)
    # Card: "only one phase for 5.3B tokens"; outline: "batch 512Ki".
    assert plan["total_tokens"] == 10_109 * 512 * 2**10 == 5_300_027_392
    assert plan["total_tokens"] == pytest.approx(5.3e9, rel=1e-4)
    (step,) = phase["steps"]
    assert step["batch_schedule"] == [{"start_step": 0, "batch_size": 128, "tokens_per_step": 512 * 2**10}]
    assert step["packing"] == "whole_documents" and step["ema"] is None and step["z_loss_weight"] == 0.0
    json.dumps(plan, allow_nan=False)


def test_schedule_peaks_at_the_outline_lr_and_decays_to_zero(full: ModuleType) -> None:
    (step,) = full.STEPS
    schedule = step.config.schedule.build()
    peak = max(float(schedule.learning_rate(step)) for step in range(t.WARMUP_STEPS - 2, t.WARMUP_STEPS + 2))
    assert peak == pytest.approx(1.7e-4, rel=1e-6)
    assert float(schedule.learning_rate(0)) < 1.7e-6 and float(schedule.learning_rate(t.STEPS - 1)) < 1e-7
    assert t.WARMUP_STEPS == 303 and step.config.optimizer.weight_decay == 0.0


def test_warm_start_is_the_8b_recipes_final_step(full: ModuleType, plan: dict[str, Any]) -> None:
    (step,) = full.STEPS
    warm = step.config.warm_start
    base = warm.checkpoint.step
    marin_8b = full.MARIN_8B
    assert base.name == "marin_8b/starling" and marin_8b.recipe.final == "starling"
    assert step_hash(base) == step_hash(marin_8b.build_steps()["starling"])
    assert (warm.load_optimizer, warm.reset_step) == (False, True)
    assert step.config.model == base.config.model
    assert isinstance(step.config.data.packing, WholeDocumentsConfig)
    entry = plan["phases"][0]["steps"][0]["warm_start"]
    assert entry["from"] == plan["base_model"] == "marin_8b/starling" and entry["base_end_step"] == 1_402_019


@needs_seeds
def test_components_are_the_cards_datasets() -> None:
    card = (SEEDS / CARD).read_text(encoding="utf-8")
    section = card[card.index("### Datasets used in Marin 8B Instruct") : card.index("## Checkpoints")]
    listed = re.findall(r"^- \[([^\]]+)\]", section, flags=re.MULTILINE)
    assert [row.display for row in t.SFT_MIX.rows] == listed == list(t.CARD_DATASETS.values())
    assert len(listed) == 9


@needs_seeds
def test_seed_numbers_appear_in_the_seeds() -> None:
    card, outline = (SEEDS / CARD).read_text(encoding="utf-8"), (SEEDS / OUTLINE).read_text(encoding="utf-8")
    assert "only one phase for 5.3B tokens" in card and t.CARD_TOKENS == 5.3e9
    assert "5Gi tokens, batch 512Ki, LR 1.7e-4" in outline
    assert (t.BATCH_TOKENS, t.PEAK_LR, t.OUTLINE_TOKENS) == (512 * 2**10, 1.7e-4, 5 * 2**30)


def test_weights_follow_the_document_counts(plan: dict[str, Any]) -> None:
    total = sum(t.DOCUMENTS.values())
    weights = plan["phases"][0]["mixture"]
    assert set(weights) == set(t.CARD_DATASETS) == set(t.DOCUMENTS)
    assert weights == pytest.approx({name: count / total for name, count in t.DOCUMENTS.items()})
    assert sum(weights.values()) == pytest.approx(1.0)
    assert plan["missing_components"] == sorted(t.CARD_DATASETS)


def _documented_constants() -> Iterator[tuple[str, str]]:
    """`(name, docstring)` of each module-level constant of the tables module that has one."""
    body = ast.parse(inspect.getsource(t)).body
    for node, after in zip(body, body[1:]):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(after, ast.Expr):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and isinstance(after.value, ast.Constant):
                yield target.id, after.value.value


def test_not_in_seeds_marks_where_the_seeds_give_no_number(plan: dict[str, Any]) -> None:
    marked = {name for name, doc in _documented_constants() if doc.startswith("NOT IN SEEDS")}
    assert marked == {
        "SEQ_LEN",
        "WARMUP_FRACTION",
        "MIN_LR_RATIO",
        "WEIGHT_DECAY",
        "GRAD_CLIP",
        "CHECKPOINT_EVERY",
        "DOCUMENTS",
    }
    assert "NOT IN SEEDS" in t.SFT_MIX.source and "NOT IN SEEDS" in plan["phases"][0]["steps"][0]["mixture_source"]
    assert any("NOT IN SEEDS" in note for note in plan["notes"])


def test_tiny_graph_resolves_onto_the_tiny_8b(tiny: ModuleType) -> None:
    steps: dict[str, Step[Any]] = {step.name: step for step in tiny.STEPS}
    assert {"marin_8b_instruct/sft", "marin_8b_instruct/report", "marin_8b_instruct/assistant-loss"} <= set(steps)
    sft: TrainConfig = steps["marin_8b_instruct/sft"].config
    base = sft.warm_start.checkpoint.step
    marin_8b = tiny.MARIN_8B
    tiny_8b = tiny_recipe_steps(marin_8b.recipe, marin_8b.tiny, marin_8b.tiny_eval_every)[0]["starling"]
    assert step_hash(base) == step_hash(tiny_8b) and sft.model == base.config.model
    assert (sft.num_steps, sft.data.seq_len, sft.data.batch_schedule.stages) == (101, 512, ((0, 4),))
    assert set(sft.data.caches) == set(t.CARD_DATASETS) == set(tiny.TINY_COMPONENTS)
    tokenized = {ref.step.name for ref in sft.data.caches.values()}
    assert tokenized == {f"marin_8b_instruct/tiny-chat-tokenized/{name}" for name in t.CARD_DATASETS}
    assert set(sft.eval.heldout) == set(CHAT_KINDS)
    assert sft.eval.tokenizer == next(iter(sft.data.caches.values())).step.config.tokenizer
    plan = tiny.PLAN()
    assert plan["missing_components"] == [] and plan["total_tokens"] == 101 * 4 * 512


def test_tiny_chat_splits_are_disjoint_and_cover_every_component(tmp_path: Path) -> None:
    components = {"a": "docs", "b": "docs", "c": "tasks", "d": "math", "e": "math"}
    config = TinyChatConfig(components=components, task_conversations=40, math_conversations=30)
    counts = build_tiny_chat(config, str(tmp_path))
    assert counts["heldout"] == {"docs": counts["heldout"]["docs"], "tasks": 4, "math": 3}
    assert counts["components"]["c"] == 36 and counts["components"]["d"] + counts["components"]["e"] == 27

    def lines(path: Path) -> list[str]:
        return path.read_text(encoding="utf-8").splitlines()

    sizes = {"tasks": 40, "math": 30}
    for kind in CHAT_KINDS:
        heldout = lines(tmp_path / "heldout" / f"{kind}.jsonl")
        parts = [lines(tmp_path / "components" / f"{n}.jsonl") for n, k in components.items() if k == kind]
        if kind in sizes:
            assert len(heldout) + sum(map(len, parts)) == sizes[kind]
        else:  # docstring conversations are unique: the splits share none
            assert not set(parts[0]) & set(parts[1]) and not (set(parts[0]) | set(parts[1])) & set(heldout)
    conversation = json.loads(lines(tmp_path / "components" / "c.jsonl")[0])["messages"]
    assert [m["role"] for m in conversation[:3]] == ["system", "user", "assistant"]
    assert len(conversation) % 2 == 1 and conversation[-1]["role"] == "assistant"


@pytest.mark.timeout(240)  # about 7 s of CPU (jit compiles of a tiny model); minutes under heavy load
def test_assistant_loss_report_compares_checkpoints_per_kind(tmp_path: Path) -> None:
    components = {"a": "docs", "t": "tasks", "m": "math"}
    build_tiny_chat(TinyChatConfig(components, task_conversations=20, math_conversations=20), str(tmp_path / "chat"))
    table = pa.table({"id": ["0"], "text": [(tmp_path / "chat" / "components" / "t.jsonl").read_text()]})
    write_table_atomic(table, tmp_path / "text" / "p.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(tmp_path / "text"),), vocab_size=300), str(tmp_path / "tok"))
    heldout = {}
    for kind in ("tasks", "math"):
        heldout[kind] = str(tmp_path / f"heldout-{kind}")
        source = str(tmp_path / "chat" / "heldout" / f"{kind}.jsonl")
        tokenize_chat(
            ChatTokenizeConfig(input=source, tokenizer=str(tmp_path / "tok"), chat_template="chatml"), heldout[kind]
        )
    model = LlamaConfig(vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=2, num_heads=2, num_kv_heads=1)
    for name, key in (("base", 1), ("same", 1), ("other", 2)):
        params = eqx.filter(LlamaModel(model, key=jax.random.PRNGKey(key)), eqx.is_array)
        save_checkpoint(tmp_path / name / "checkpoints", 1, {"model": params}, {"kind": "permanent"})
    checkpoints = {name: str(tmp_path / name) for name in ("base", "same", "other")}
    report = assistant_loss_report(
        AssistantLossReportConfig(model=model, checkpoints=checkpoints, heldout=heldout, seq_len=512),
        str(tmp_path / "report"),
    )
    assert json.loads((tmp_path / "report" / REPORT_FILE).read_text()) == report
    direct = assistant_loss(load_model(model, checkpoints["base"]), heldout["math"], 512)
    assert report["heldout"]["math"]["base"] == round(direct.loss, 4) and direct.tokens > 0
    assert report["base"] == report["same"] != report["other"]
    # every masked token is a target: no held-out conversation is longer than a sequence
    assert report["assistant_tokens"] == sum(int(open_token_cache(c).loss_mask.sum()) for c in heldout.values())
