"""The tiny scale: a recipe's phase structure trained for real on a CPU in minutes.

`tiny_scale(step_factor, batch_factor)` keeps every mixture weight, phase
boundary and schedule shape of a recipe and shrinks the rest: step numbers and
batch sizes by the factors, sequences to 64 tokens, float32, and every model
preset to a 2-layer, 64-wide model of the same kind (the preset with its shape
replaced, so QK-norm and the Llama 3 RoPE settings stay where the recipe puts
them). `tiny_recipe_steps` backs every component with its local stand-in
(`tiny.data`), evaluates held-out bits-per-byte of each kind of text during
training, and ends with two summary steps whose `report.html` marks the
phases: `<recipe>/report` (the released model's chain of phases) and
`<recipe>/report-branches` (the side branches next to the phase they compete
with, e.g. Bison next to Mantis).

An experiment file picks its scale by name from $TOOTSIE_SCALE
(`tootsie run EXPERIMENT.py --scale tiny` sets it); `selected_scale` reads it.

Example: the 32B recipe at `tiny_scale(1/400, 1/256)` trains phase 1 on steps
0 → 200 (batch 32 → 30 → 32 at steps 46 and 53), QK-norm phase 3 on 200 → 400
and Mantis on 400 → 480, with the StackV2 Python stage from step 435.
"""

import os
from collections.abc import Mapping
from dataclasses import replace

from tootsie.errors import TootsieError
from tootsie.executor import Step
from tootsie.models.llama import LlamaConfig
from tootsie.models.presets import PRESETS
from tootsie.recipes.build import recipe_steps
from tootsie.recipes.recipe import Recipe
from tootsie.recipes.scale import Scale
from tootsie.recipes.tiny.data import TINY_VOCAB, TinyData, tiny_data_steps
from tootsie.report.run_summary import RunSummaryConfig, summarize_runs
from tootsie.train.config import InLoopEvalConfig, TrainConfig

SCALE_ENV = "TOOTSIE_SCALE"
"""Environment variable naming the scale an experiment builds (`tootsie run --scale` sets it)."""
TINY_SEQ_LEN = 64
TINY_SHAPE = dict(hidden_dim=64, intermediate_dim=192, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=None)
"""The tiny models' shape (about 0.2 M parameters with the 1,024-token vocabulary)."""
EVAL_SEQUENCES = 8
"""Held-out sequences per kind in each in-loop evaluation."""


def tiny_model(preset: str, vocab_size: int) -> LlamaConfig:
    """The preset with the tiny shape: its RoPE settings and QK-norm flag are kept."""
    return replace(PRESETS[preset], vocab_size=vocab_size, **TINY_SHAPE)


def tiny_scale(step_factor: float, batch_factor: float) -> Scale:
    """A Scale "tiny": steps and batches by the factors, 64-token sequences, float32, tiny models for every preset."""
    return Scale(
        "tiny",
        step_factor=step_factor,
        batch_factor=batch_factor,
        seq_len=TINY_SEQ_LEN,
        compute_dtype="float32",
        models={name: tiny_model(name, TINY_VOCAB) for name in PRESETS},
    )


def selected_scale(scales: Mapping[str, Scale]) -> Scale:
    """The scale named by $TOOTSIE_SCALE ("full" when unset)."""
    name = os.environ.get(SCALE_ENV) or "full"
    if name not in scales:
        raise TootsieError(
            f"{SCALE_ENV}={name!r} is not a scale of this experiment; "
            f"use one of {sorted(scales)} (tootsie run --scale NAME)"
        )
    return scales[name]


def tiny_eval(data: TinyData, every_steps: int) -> InLoopEvalConfig:
    """Held-out bits-per-byte of every kind of text, every `every_steps` steps and at each phase's end."""
    return InLoopEvalConfig(
        heldout=dict(data.heldout), tokenizer=data.tokenizer, every_steps=every_steps, max_sequences=EVAL_SEQUENCES
    )


def _summary(name: str, steps: dict[str, Step[TrainConfig]], phases: list[str]) -> Step[RunSummaryConfig]:
    return Step(
        name,
        summarize_runs,
        RunSummaryConfig(runs={phase: steps[phase].ref() for phase in phases}),
        description=f"merged metrics and report.html of {', '.join(phases)}",
    )


def tiny_recipe_steps(
    recipe: Recipe, scale: Scale, eval_every: int | None, data: TinyData | None = None
) -> tuple[dict[str, Step[TrainConfig]], list[Step[RunSummaryConfig]]]:
    """The recipe's phase steps on the tiny stand-ins, and its report steps (the artifact chain; the side branches).

    The stand-ins are `data`, default the `tiny.data` steps.


    `eval_every=None` trains without the in-loop evaluation.
    """
    data = tiny_data_steps() if data is None else data
    used = {name for phase in recipe.phases for stage in phase.mixture for name in stage.weights}
    missing = sorted(used - set(data.components))
    if missing:
        raise TootsieError(
            f"recipe {recipe.name!r} weights components {missing} that have no tiny "
            "stand-in; add them to COMPONENT_KINDS in tootsie.recipes.tiny.data"
        )
    steps = recipe_steps(recipe, scale, data.components, None if eval_every is None else tiny_eval(data, eval_every))
    chain = [phase.name for phase in recipe.artifact_phases()]
    side = [phase for phase in recipe.phases if phase.name not in chain]
    reports = [_summary(f"{recipe.name}/report", steps, chain)]
    if side:
        rivals = [name for name in chain if any(recipe.phase(name).parent == branch.parent for branch in side)]
        reports.append(_summary(f"{recipe.name}/report-branches", steps, rivals + [branch.name for branch in side]))
    return steps, reports
