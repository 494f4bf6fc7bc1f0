"""What a recipe's experiment file exports: steps and plan at the scale $TOOTSIE_SCALE names.

The Marin 8B and 32B experiment files differ in their phases and in how far
their tiny scale shrinks them; the rest (build the phase steps from
$TOOTSIE_COMPONENTS, the JSON plan, and STEPS/PLAN at the selected scale) is
this one class. Example, at the end of an experiment file:

    EXPERIMENT = RecipeExperiment(RECIPE, tiny=TINY, tiny_eval_every=TINY_EVAL_EVERY)
    build_steps, plan = EXPERIMENT.build_steps, EXPERIMENT.plan
    SCALE, STEPS, PLAN = EXPERIMENT.selected()

`tootsie run FILE --scale tiny` then runs the tiny data steps, every phase and
the two report steps; without `--scale` it runs (or dry-runs) the full phases.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tootsie.executor import Step
from tootsie.recipes.build import recipe_steps
from tootsie.recipes.components import components_from_env
from tootsie.recipes.plan import recipe_plan
from tootsie.recipes.recipe import Recipe
from tootsie.recipes.scale import FULL, Scale
from tootsie.recipes.tiny.scale import selected_scale, tiny_recipe_steps
from tootsie.train.config import TrainConfig


@dataclass(frozen=True)
class RecipeExperiment:
    """A recipe with its tiny scale: the `build_steps`, `plan`, SCALE, STEPS and PLAN of its experiment file."""

    recipe: Recipe
    """The phases, mixtures and schedules of the run."""
    tiny: Scale
    """The recipe's `--scale tiny` (from `tiny_scale`)."""
    tiny_eval_every: int
    """Held-out bits-per-byte every this many steps at tiny scale."""

    def build_steps(self, scale: Scale = FULL) -> dict[str, Step[TrainConfig]]:
        """Phase name → training step at `scale`, caches from $TOOTSIE_COMPONENTS."""
        return recipe_steps(self.recipe, scale, components_from_env())

    def plan(self, scale: Scale = FULL) -> dict[str, Any]:
        """The JSON plan of the recipe at `scale` (what `tootsie run --dry-run --json` prints)."""
        return recipe_plan(self.recipe, self.build_steps(scale), scale)

    def selected(self) -> tuple[Scale, list[Step[Any]], Callable[[], dict[str, Any]]]:
        """SCALE, STEPS and PLAN at the scale $TOOTSIE_SCALE names: the full phases, or the tiny data and phases."""
        scale = selected_scale({"full": FULL, "tiny": self.tiny})
        if scale is self.tiny:
            steps, reports = tiny_recipe_steps(self.recipe, self.tiny, self.tiny_eval_every)
            return scale, [*steps.values(), *reports], partial(recipe_plan, self.recipe, steps, self.tiny)
        return scale, list(self.build_steps().values()), partial(self.plan, FULL)
