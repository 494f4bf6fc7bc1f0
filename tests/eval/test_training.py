"""The one training entry point honours every hashed field of `TrainConfig`: changing any changes what a run does."""

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
import pyarrow as pa
import pytest

from tootsie.configfile import from_plain, is_unhashed, kind_of
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.models.llama import LlamaConfig
from tootsie.train.checkpoint import latest_checkpoint, read_tensors
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig, WarmStartConfig
from tootsie.train.objectives import OBJECTIVES, DPOObjective, NextTokenObjective, ObjectiveChoice
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig
from tootsie.train.stability import StabilityConfig
from tootsie.train.trainer import train_loop

STEPS = 4
SHOWN_ELSEWHERE = {
    "divergence": (
        "tests/train/test_divergence.py",
        "test_a_loss_above_max_loss_for_patience_steps_diverges_at_the_last_of_them_and_a_rerun_does_not_train",
    ),
    "rewind": ("tests/train/test_rewind.py", "test_rewinding_past_a_junk_window_ends_with_lower_loss"),
    "objective": (
        "tests/eval/test_dpo_run.py",
        "test_reference_step_is_content_addressed_and_dpo_raises_preference_accuracy",
    ),
}
"""Hashed fields whose effect needs a longer run than this file's: the test named shows it."""


@dataclasses.dataclass(frozen=True)
class Run:
    """What a run did: its metrics records, and the tensors of its final checkpoint by name ("model", "ema")."""

    records: list[dict[str, object]]
    tensors: dict[str, list[np.ndarray] | None]


def _observe(out: Path) -> Run:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    checkpoint = latest_checkpoint(out / "checkpoints")
    tensors = {
        name: (
            None
            if (tree := read_tensors(checkpoint, name)) is None
            else [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]
        )
        for name in ("model", "ema")
    }
    return Run(records, tensors)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[TrainConfig, Path, Run]:
    """A tokenizer and a token cache of small code documents, the base config, and the base run."""
    root = tmp_path_factory.mktemp("spine")
    texts = [f"def f{i}(x):\n    return x * {i} + {i % 7}\n" * 4 for i in range(80)]
    write_table_atomic(
        pa.table({"id": [str(i) for i in range(80)], "text": texts}), root / "docs" / "part-00000.parquet"
    )
    train_tokenizer(TokenizerTrainConfig(inputs=(str(root / "docs"),), vocab_size=300), str(root / "tok"))
    tokenize_documents(
        TokenizeConfig(
            input=str(root / "docs"), tokenizer=str(root / "tok"), engine=EngineConfig(workers=1, progress=False)
        ),
        str(root / "cache"),
    )
    base = TrainConfig(
        model=LlamaConfig(
            vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1
        ),
        data=MixtureConfig(
            caches={"code": str(root / "cache")},
            stages=(MixtureStage(0, {"code": 1.0}),),
            seq_len=32,
            batch_schedule=BatchSchedule.constant(4),
        ),
        num_steps=STEPS,
        schedule=WSDConfig(peak_lr=1e-2, warmup_steps=1, decay_steps=1, total_steps=STEPS),
        checkpoints=CheckpointConfig(every_steps=100, every_minutes=None),
    )
    run_training(base, str(root / "base"))
    return base, root, _observe(root / "base")


def _losses(run: Run) -> list[float]:
    return [float(r["loss"]) for r in run.records]


def _weights_differ(a: Run, b: Run) -> bool:
    return any(not np.array_equal(x, y) for x, y in zip(a.tensors["model"], b.tensors["model"], strict=True))


Variant = Callable[[TrainConfig, Path], tuple[TrainConfig, Callable[[Run, Run], bool]]]
"""From the base config and the test root: a config with one hashed field changed, and how its run must differ.

The second element checks that run against the base run.
"""

VARIANTS: dict[str, Variant] = {
    "model": lambda c, root: (
        dataclasses.replace(c, model=dataclasses.replace(c.model, hidden_dim=24)),
        lambda a, b: _losses(a) != _losses(b),
    ),
    "data": lambda c, root: (
        dataclasses.replace(c, data=dataclasses.replace(c.data, seed=1)),
        lambda a, b: _losses(a) != _losses(b),
    ),
    "num_steps": lambda c, root: (
        dataclasses.replace(c, num_steps=STEPS - 1),
        lambda a, b: len(b.records) == STEPS - 1,
    ),
    "optimizer": lambda c, root: (dataclasses.replace(c, optimizer=AdamWConfig(weight_decay=0.5)), _weights_differ),
    "schedule": lambda c, root: (
        dataclasses.replace(c, schedule=dataclasses.replace(c.schedule, peak_lr=3e-3)),
        lambda a, b: _losses(a)[1:] != _losses(b)[1:],
    ),
    "stability": lambda c, root: (
        dataclasses.replace(c, stability=StabilityConfig(clip_update_window=2, clip_update_sigma=1e-3)),
        _weights_differ,
    ),
    "ema": lambda c, root: (
        dataclasses.replace(c, ema=None),
        lambda a, b: a.tensors["ema"] is not None and b.tensors["ema"] is None,
    ),
    "z_loss_weight": lambda c, root: (dataclasses.replace(c, z_loss_weight=0.5), _weights_differ),
    "compute_dtype": lambda c, root: (
        dataclasses.replace(c, compute_dtype="bfloat16"),
        lambda a, b: _losses(a) != _losses(b),
    ),
    "microbatches": lambda c, root: (dataclasses.replace(c, microbatches=2), _weights_differ),
    "seed": lambda c, root: (dataclasses.replace(c, seed=1), lambda a, b: _losses(a)[0] != _losses(b)[0]),
    "warm_start": lambda c, root: (
        dataclasses.replace(c, warm_start=WarmStartConfig(str(root / "base"), reset_step=True)),
        lambda a, b: _losses(b)[0] < _losses(a)[0],  # it starts from the trained weights
    ),
    "eval": lambda c, root: (
        dataclasses.replace(
            c,
            eval=InLoopEvalConfig(
                heldout={"code": c.data.caches["code"]},
                tokenizer=str(root / "tok" / "tokenizer.json"),
                every_steps=2,
                max_sequences=2,
            ),
        ),
        lambda a, b: (
            [r["step"] for r in b.records if "eval/bpb/code" in r] == [1, 3]
            and not any("eval/bpb/code" in r for r in a.records)
        ),
    ),
}


def _counts_in_the_hash(field: dataclasses.Field) -> bool:
    """Not `unhashed()`, and not a config made only of unhashed fields (`checkpoints`).

    A config without hashed fields still counts when it is one kind of a registry (`objective`): the hash holds its
    type, and another kind changes it.
    """
    default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
    inner = dataclasses.fields(default) if dataclasses.is_dataclass(default) else ()
    try:
        registered = bool(kind_of(default))
    except TypeError:
        registered = False
    return not is_unhashed(field) and (not inner or registered or any(not is_unhashed(f) for f in inner))


def test_every_hashed_field_has_a_variant_here_or_a_test_elsewhere() -> None:
    hashed = {f.name for f in dataclasses.fields(TrainConfig) if _counts_in_the_hash(f)}
    assert hashed == set(VARIANTS) | set(SHOWN_ELSEWHERE), (
        "a new hashed TrainConfig field needs a variant in VARIANTS that shows its effect"
    )
    for path, name in SHOWN_ELSEWHERE.values():
        assert f"def {name}(" in (Path(__file__).resolve().parents[2] / path).read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_changing_a_hashed_field_changes_the_run(world, tmp_path, name: str) -> None:
    base, root, base_run = world
    changed, differs = VARIANTS[name](base, root)
    assert getattr(changed, name) != getattr(base, name)
    run_training(changed, str(tmp_path / name))
    assert differs(base_run, _observe(tmp_path / name)), f"changing {name} did not change the run"


def test_objective_kinds_are_checked_at_load() -> None:
    # rloo, grpo, distill: their effect is tested in tests/train/test_rl_objectives.py and tests/rl/test_loop.py
    assert set(OBJECTIVES) == {"next_token", "dpo", "rloo", "grpo", "distill"}, "a new objective needs a test"
    assert from_plain(ObjectiveChoice, {"kind": "next_token"}, "train.yaml:config.objective") == NextTokenObjective()
    loaded = from_plain(ObjectiveChoice, {"kind": "dpo", "reference": "ref"}, "train.yaml:config.objective")
    assert loaded == DPOObjective(reference="ref", beta=0.1)
    with pytest.raises(
        TootsieError,
        match=r"config\.objective\.kind: unknown kind 'dop'; "
        r"choose one of \['distill', 'dpo', 'grpo', 'next_token', 'rloo'\]",
    ):
        from_plain(ObjectiveChoice, {"kind": "dop"}, "train.yaml:config.objective")


def test_the_loop_refuses_an_eval_config_it_was_not_given_the_evaluation_for(world, tmp_path) -> None:
    base, root, _ = world
    with_eval = VARIANTS["eval"](base, root)[0]
    with pytest.raises(
        TootsieError,
        match="config.eval is set but no evaluation callback was given: "
        "train through tootsie.eval.training.run_training",
    ):
        train_loop(with_eval, str(tmp_path / "bypass"))
    assert not (tmp_path / "bypass").exists()
