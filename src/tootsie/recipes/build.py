"""Executor steps from a recipe: one `TrainConfig` step per phase, warm-started from its parent's step.

Each phase's data config carries its whole lineage's mixture stages and batch
sizes, so `batch(step)` at a global step is the same stream the parent was
reading (a data position written as a step stays exact across phases). The
caches map every component the lineage ever weights to the user's path (or
`UNSET`); the step function `train_phase` refuses to train until they exist.

Example: `recipe_steps(recipe, FULL, {})["phase3"]` is the Step
`marin_32b/phase3` whose config warm-starts from `marin_32b/phase1d`'s output
with `add_qk_norm=True` and trains global steps 80,000 → 160,000.
"""

from collections.abc import Mapping
from dataclasses import replace

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig
from tootsie.data.permutation import permutation_config
from tootsie.executor import Step
from tootsie.recipes.components import UNSET, train_phase
from tootsie.recipes.recipe import Phase, Recipe
from tootsie.recipes.scale import Scale
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig, WarmStartConfig


def data_config(recipe: Recipe, phase: Phase, scale: Scale, components: Mapping[str, str]) -> MixtureConfig:
    """The data stream of `phase`: its lineage's stages and batch sizes at `scale`."""
    stages = tuple(
        replace(stage, start_step=scale.step(stage.start_step), transition_steps=scale.step(stage.transition_steps))
        for stage in recipe.mixture_stages(phase.name)
    )
    batch = BatchSchedule(
        tuple((scale.step(start), scale.batch(size)) for start, size in recipe.batch_sizes(phase.name))
    )
    names = sorted({name for stage in stages for name in stage.weights})
    return MixtureConfig(
        caches={name: components.get(name, UNSET) for name in names},
        stages=stages,
        seq_len=scale.seq_len or recipe.seq_len,
        batch_schedule=batch,
        seed=recipe.seed,
        permutation=permutation_config(phase.permutation),
    )


def phase_config(
    recipe: Recipe,
    phase: Phase,
    scale: Scale,
    components: Mapping[str, str],
    parent: Step[TrainConfig] | None,
    in_loop_eval: InLoopEvalConfig | None = None,
) -> TrainConfig:
    """The TrainConfig of one phase.

    `parent` is the step it warm-starts from (None for the root), `in_loop_eval` its held-out evaluation.
    """
    warm_start = None if parent is None else WarmStartConfig(checkpoint=parent.ref(), add_qk_norm=phase.add_qk_norm)
    return TrainConfig(
        model=scale.model(phase.model),
        data=data_config(recipe, phase, scale, components),
        num_steps=scale.step(phase.end_step),
        optimizer=phase.optimizer,
        schedule=scale.schedule(phase.schedule),
        stability=phase.stability,
        ema=phase.ema,
        z_loss_weight=phase.z_loss_weight,
        compute_dtype=scale.compute_dtype or recipe.compute_dtype,
        seed=recipe.seed,
        warm_start=warm_start,
        checkpoints=CheckpointConfig(every_steps=max(1, scale.step(recipe.checkpoint_every))),
        eval=in_loop_eval,
    )


def recipe_steps(
    recipe: Recipe, scale: Scale, components: Mapping[str, str], in_loop_eval: InLoopEvalConfig | None = None
) -> dict[str, Step[TrainConfig]]:
    """Phase name → its training Step (`<recipe>/<phase>`), parents first; every phase gets `in_loop_eval`."""
    steps: dict[str, Step[TrainConfig]] = {}
    for phase in recipe.phases:
        parent = None if phase.parent is None else steps[phase.parent]
        config = phase_config(recipe, phase, scale, components, parent, in_loop_eval)
        steps[phase.name] = Step(f"{recipe.name}/{phase.name}", train_phase, config, description=phase.note)
    return steps
