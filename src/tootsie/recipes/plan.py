"""The plan of a recipe: per phase its steps, tokens, batch sizes, LR schedule, mixture and model FLOPs.

Everything is read off the built `TrainConfig`s (the objects a run would use),
not recomputed from the tables: tokens from the batch schedule
(`tokens_before(end) - tokens_before(start)`), FLOPs as the model's
`flops_per_token(seq_len)` times those tokens (an MoE's on its active
parameters, listed beside the total as `active_parameters`), the LR at a
phase's first and last step from the schedule's own function. Sub-phases (one
training step each) are grouped under their retrospective phase;
`total_tokens` counts only the released model's lineage (the 32B total
excludes the abandoned Bison cooldown, as the retrospective's does).

Each warm start also says which optimizer-state tensors start fresh
(`optimizer_state_fresh`: statistics only the new phase has, such as the
update-clipping window a phase turns on) and whether Adam's moments carry over
(`moments_carried`). The check runs both optimizers' `init` on a two-leaf
probe and matches them with the trainer's own `carry_optimizer_state`.

Example (32B, one entry of "phases"): `{"name": "phase3", "start_step": 80000,
"end_step": 160000, "tokens": 2684354560000, "mixture": {...}, "steps": [...]}`.
"""

import functools
from typing import Any

import jax.numpy as jnp

from tootsie.configfile import kind_of, to_plain
from tootsie.executor import Step, StepRef
from tootsie.recipes.components import UNSET, missing_components
from tootsie.recipes.recipe import Phase, Recipe
from tootsie.recipes.scale import Scale
from tootsie.train.checkpoint import flatten_arrays
from tootsie.train.config import ScheduleChoice, TrainConfig
from tootsie.train.schedule import RewarmConfig, Schedule
from tootsie.train.schedule_cycles import cycle_segments
from tootsie.train.state import build_optimizer
from tootsie.train.warm_start import carry_optimizer_state

PROBE_PARAMS = {"embed": jnp.zeros((2, 2)), "w": jnp.zeros((2, 2))}
"""A stand-in parameter tree: optimizer-state paths depend on the optimizer chain, not the model."""


def _figure(value: float) -> float:
    """A float32 schedule value shown to 6 significant digits."""
    return float(f"{value:.6g}")


@functools.cache
def _built(schedule: ScheduleChoice) -> Schedule:
    return schedule.build()


def _as_rewarm(schedule: ScheduleChoice) -> RewarmConfig | None:
    """The cyclic form of a schedule (every registry schedule but inverse_sqrt has one)."""
    if isinstance(schedule, RewarmConfig):
        return schedule
    if hasattr(schedule, "as_wsd"):
        schedule = schedule.as_wsd()
    return schedule.as_rewarm() if hasattr(schedule, "as_rewarm") else None


def lr_summary(schedule: ScheduleChoice, start: int, end: int) -> dict[str, Any]:
    """The schedule's kind and settings, LR and phase name at steps `start` and `end - 1`, and the segments between."""
    built = _built(schedule)
    settings = to_plain(schedule)
    rewarm = _as_rewarm(schedule)
    segments = [] if rewarm is None else cycle_segments(rewarm.plan())
    return {
        "kind": settings.pop("kind"),
        "settings": settings,
        "lr_first": _figure(built.learning_rate(start)),
        "lr_last": _figure(built.learning_rate(end - 1)),
        "phase_first": built.phase(start),
        "phase_last": built.phase(end - 1),
        "segments": [
            {
                "phase": s.phase,
                "start_step": s.start,
                "end_step": None if s.phase == "end" else s.start + s.length,
                "lr_from": _figure(s.lr_from),
                "lr_to": _figure(s.lr_to),
            }
            for s in segments
            if s.start < end and (s.phase == "end" or s.start + s.length > start)
        ],
    }


MOMENT_NAMES = {"mu", "nu"}
"""Fields of Adam's first and second moments in optax's state."""


def fresh_optimizer_state(parent: TrainConfig, child: TrainConfig) -> list[str]:
    """Optimizer-state leaves (probe paths) that a warm start from `parent` into `child` starts fresh."""
    old = flatten_arrays(build_optimizer(parent).init(PROBE_PARAMS))
    return carry_optimizer_state(build_optimizer(child).init(PROBE_PARAMS), old)[1]


def _batch_schedule(config: TrainConfig, start: int, end: int) -> list[dict[str, int]]:
    stages = config.data.batch_schedule.stages
    in_range = [
        (step, size)
        for index, (step, size) in enumerate(stages)
        if step < end and (index + 1 == len(stages) or stages[index + 1][0] > start)
    ]
    return [
        {"start_step": max(step, start), "batch_size": size, "tokens_per_step": size * config.data.seq_len}
        for step, size in in_range
    ]


def _phase_mixture(recipe: Recipe, phase: Phase, scale: Scale) -> dict[str, Any]:
    """The table in effect at the phase's start and the stages the phase itself starts."""
    current = [stage for stage in recipe.mixture_stages(phase.name) if stage.start_step <= phase.start_step][-1]
    return {
        "mixture": current.weights,
        "mixture_table": current.name,
        "mixture_source": current.source,
        "mixture_stages": [
            {
                "start_step": scale.step(stage.start_step),
                "transition_steps": scale.step(stage.transition_steps),
                "table": stage.name,
                "weights": stage.weights,
            }
            for stage in phase.mixture
        ],
    }


def step_plan(
    recipe: Recipe, phase: Phase, step: Step[TrainConfig], parent: Step[TrainConfig] | None, scale: Scale
) -> dict[str, Any]:
    """The plan of one phase's training step."""
    config = step.config
    start, end = scale.step(phase.start_step), config.num_steps
    tokens = config.tokens_before(end) - config.tokens_before(start)
    flops_per_token = config.model.flops_per_token(config.data.seq_len)
    warm_start = None
    if parent is not None:
        fresh = fresh_optimizer_state(parent.config, config)
        warm_start = {
            "from": phase.parent,
            "add_qk_norm": phase.add_qk_norm,
            "moments_carried": not any(MOMENT_NAMES & set(name.replace("[", ".").split(".")) for name in fresh),
            "optimizer_state_fresh": fresh,
        }
    return {
        "name": phase.name,
        "step": step.name,
        "start_step": start,
        "end_step": end,
        "tokens": tokens,
        "model": phase.model,
        "parameters": config.model.num_parameters(),
        "active_parameters": config.model.active_parameters(),
        "flops_per_token": flops_per_token,
        "model_flops": float(flops_per_token * tokens),
        "batch_schedule": _batch_schedule(config, start, end),
        "lr": lr_summary(config.schedule, start, end),
        "optimizer": to_plain(config.optimizer),
        "stability": to_plain(config.stability),
        "ema": to_plain(config.ema),
        "z_loss_weight": config.z_loss_weight,
        "permutation": kind_of(config.data.permutation),
        "permutation_config": to_plain(config.data.permutation),
        **_phase_mixture(recipe, phase, scale),
        "warm_start": warm_start,
        "note": phase.note,
    }


def _shown(path: str | StepRef) -> str | None:
    """A component's cache as the plan shows it: None when unset, `<step name>/<subpath>` for another step's output."""
    if isinstance(path, StepRef):
        return f"<{path.step.name}>/{path.subpath}" if path.subpath else f"<{path.step.name}>"
    return None if path == UNSET else path


def recipe_plan(recipe: Recipe, steps: dict[str, Step[TrainConfig]], scale: Scale) -> dict[str, Any]:
    """The JSON-able plan.

    `{"recipe", "scale", "phases": [...], "total_tokens", ...}`, each phase
    `{"name", "start_step", "end_step", "tokens", "mixture", "steps"}`.
    """
    artifact = {phase.name for phase in recipe.artifact_phases()}
    groups: dict[str, list[tuple[Phase, dict[str, Any]]]] = {}
    for phase in recipe.phases:
        parent = None if phase.parent is None else steps[phase.parent]
        groups.setdefault(phase.retro_phase, []).append(
            (phase, step_plan(recipe, phase, steps[phase.name], parent, scale))
        )
    phases = []
    for name, members in groups.items():
        plans = [plan for _, plan in members]
        phases.append(
            {
                "name": name,
                "start_step": plans[0]["start_step"],
                "end_step": plans[-1]["end_step"],
                "tokens": sum(plan["tokens"] for plan in plans),
                "model_flops": sum(plan["model_flops"] for plan in plans),
                "in_final_artifact": all(phase.name in artifact for phase, _ in members),
                "mixture": plans[0]["mixture"],
                "steps": plans,
            }
        )
    caches = {name: path for step in steps.values() for name, path in step.config.data.caches.items()}
    final = [phase for phase in phases if phase["in_final_artifact"]]
    return {
        "recipe": recipe.name,
        "scale": scale.name,
        "seq_len": scale.seq_len or recipe.seq_len,
        "final_artifact": recipe.phase(recipe.final).retro_phase,
        "total_tokens": sum(phase["tokens"] for phase in final),
        "total_model_flops": sum(phase["model_flops"] for phase in final),
        "phases": phases,
        "components": {name: _shown(path) for name, path in sorted(caches.items())},
        "missing_components": missing_components(caches),
        "notes": list(recipe.notes),
    }
