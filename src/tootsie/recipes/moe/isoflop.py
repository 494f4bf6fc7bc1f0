"""The seeds' MoE isoflop arc at toy scale, as steps: sweep → fit → preregister → run → score, plus batch and β₂.

The weekly update's method, in order (each an executor step; `experiments/moe_isoflop_tiny.py` runs them):

1. `moe_isoflop/isoflop/...`: an isoflop sweep of MoE models (8 experts, k = 2,
   GQA 2:1, every recipe from `scaling.heuristic`: β₁ 0.9062, the β₂ rule at
   base 0.998) at `budgets` × `widths`, every budget a full isoflop curve (the
   seeds' 1e22 miss used a non-isoflop anchor). One planted run (the widest at
   the smallest budget) trains at 100× its learning rate: it diverges and is
   recorded infeasible, and the sweep and fit go on without it.
2. `moe_isoflop/fit`: free-E and fixed-E laws for every asymptote in
   `fixed_e`, leave-future-out cross-validation per held-out budget, and the
   prediction at the target budget from every training-set size.
3. `moe_isoflop/preregister`: the hashed prediction at `target_factor` × the
   largest budget, from the law whose leave-future-out predictions erred least
   (how the seeds chose L∞ = 1.6).
4. `moe_isoflop/target`: the run at that budget, at the candidate width
   nearest the preregistered N_opt (it takes the record as an input, so it
   cannot start before it), and `moe_isoflop/score`.
5. `moe_isoflop/batch/...` and `moe_isoflop/batch-fit`: batch sweeps at
   `batch_budgets` and the critical-batch power law.
6. `moe_isoflop/beta2/...`: β₂ × batch at one budget and width.
7. `moe_isoflop/results`: `results.json` and figures (`isoflop_results`).

Example: `arc_steps(ARC_SCALES["smoke"], tiny_data_steps())["results"]` is
the last step of the smoke arc (seconds per run; the tests run it).
"""

from dataclasses import dataclass, replace

from tootsie.executor import Step
from tootsie.recipes.moe.isoflop_results import ArcResultsConfig, arc_results
from tootsie.recipes.moe.runs import WEIGHTS
from tootsie.recipes.tiny.data import TINY_VOCAB, TinyData
from tootsie.recipes.tiny.scale import TINY_SEQ_LEN
from tootsie.scaling.analysis_steps import (
    BEST_CROSS_VALIDATED,
    BatchFitStepConfig,
    FitStepConfig,
    PreregisterStepConfig,
    ScoreStepConfig,
    TargetRunConfig,
    batch_fit_step,
    fit_step,
    preregister_step,
    score_step,
    train_at_prediction,
)
from tootsie.scaling.fit import FitConfig
from tootsie.scaling.heuristic import Beta2Rule, Heuristic, MoeShape
from tootsie.scaling.shapes import WidthRule
from tootsie.scaling.sweep import SweepConfig, SweepPlan, budget_label, plan_sweep
from tootsie.scaling.sweep_steps import sweep_steps

PREFIX = "moe_isoflop"
TOY_MOE = MoeShape(num_experts=8, experts_per_token=2)
"""8 experts, k = 2 (NOT the seeds' 64 / 4: at d32-96 an expert of 64 would be 16-48 wide and the tiled CPU path
slower), experts d/2 wide with 2 shared, capacity factor 1.0: the heuristic's other defaults."""


@dataclass(frozen=True)
class ArcScale:
    """The sizes of one arc: budgets, widths, the target, and the batch and β₂ sweeps."""

    budgets: tuple[float, ...]
    """Isoflop budgets (FLOPs, all counted: tootsie's basis)."""
    widths: tuple[int, ...]
    """Widths at every budget."""
    fixed_e: tuple[float, ...]
    """Fixed asymptotes to cross-validate (the first one preregisters)."""
    target_factor: float = 4.0
    """The preregistered budget is this × the largest swept one."""
    target_widths: tuple[int, ...] = (16, 32, 48, 64)
    """Candidate widths of the target run."""
    batch_budgets: tuple[float, ...] = ()
    """Budgets of the batch sweep (>= 2 for a power law)."""
    batch_width: int = 32
    """Width of the batch sweep."""
    batch_sizes: tuple[int, ...] = (8, 32, 128)
    """Batches of the batch sweep."""
    beta2_budget: float = 4e11
    """Budget of the β₂ × batch sweep."""
    beta2_width: int = 32
    """Width of the β₂ × batch sweep."""
    beta2_batches: tuple[int, ...] = (8, 64)
    """Batches of the β₂ × batch sweep."""
    beta2_values: tuple[float, ...] = (0.95, 0.99, 0.999)
    """β₂ values of the β₂ × batch sweep."""
    planted_lr_factor: float = 100.0
    """The planted divergent run's learning rate multiplier (the issue's LR × 100)."""
    batch_size: int = 16
    """Sequences per step of the isoflop sweep and the target run."""
    min_steps: int = 50
    """Shortest run planned."""
    eval_sequences: int = 64
    """Held-out sequences per domain in every run's final macro loss."""
    bootstrap: int = 1000
    """Bootstrap replicates of the fit."""


ARC_SCALES = {
    "full": ArcScale(
        budgets=(4e11, 8e11, 1.6e12),
        widths=(16, 32, 48, 64),
        fixed_e=(1.0, 0.5, 1.5),
        target_widths=(16, 32, 48, 64, 96),
        batch_budgets=(2e11, 8e11),
        beta2_budget=4e11,
    ),
    "smoke": ArcScale(
        budgets=(2e10, 4e10, 8e10),
        widths=(16, 32, 48),
        fixed_e=(1.0, 2.0),
        target_factor=4.0,
        target_widths=(16, 32),
        batch_budgets=(2e10, 8e10),
        batch_sizes=(4, 8, 16),
        beta2_budget=4e10,
        beta2_batches=(4, 16),
        beta2_values=(0.95, 0.999),
        batch_size=8,
        planted_lr_factor=1e4,
        min_steps=3,
        eval_sequences=4,
        bootstrap=100,
    ),
}
"""`full`: the documented run (<= 60 min on 2 cores; with widths 16-48 only, the two larger budgets' minima
fell outside the sampled sizes, so d64 was added: docs/scaling-moe.md); `smoke`: the same arc in a few minutes,
for the tests (its planted run is at LR × 10⁴, so 30 steps are enough to diverge)."""


def sweep_config(scale: ArcScale, **changes: object) -> SweepConfig:
    """The toy MoE sweep recipe: tiny GQA 4:1 width rule, the tiny data's vocabulary, the heuristic's β's."""
    base = SweepConfig(
        budgets=scale.budgets,
        widths=scale.widths,
        vocab_size=TINY_VOCAB,
        seq_len=TINY_SEQ_LEN,
        batch_size=scale.batch_size,
        rule=WidthRule.tiny_gqa(),
        moe=TOY_MOE,
        beta1=Heuristic.beta1,
        beta2=Beta2Rule(),
        min_steps=scale.min_steps,
    )
    return replace(base, **changes)


def planted(plan: SweepPlan, factor: float) -> SweepPlan:
    """`plan` plus a copy of its widest run at its smallest budget at `factor` × the learning rate (`...-lr<factor>`).

    The widest: at the full scale the 1-layer d16 run at LR × 100 only spikes (2 of 3,274 steps above the
    divergence loss, final loss 5.5), while the 2-layer d48 run diverges at step 182.
    """
    smallest = min(run.budget for run in plan.runs)
    source = max((run for run in plan.runs if run.budget == smallest), key=lambda run: run.width)
    run = replace(source, name=f"{source.name}-lr{factor:g}", learning_rate=source.learning_rate * factor)
    return replace(plan, runs=(*plan.runs, run))


def arc_steps(scale: ArcScale, data: TinyData) -> dict[str, Step]:
    """Every step of the arc by role; `results` depends on all the others."""
    io = {
        "caches": dict(data.train),
        "mix": WEIGHTS,
        "heldout": dict(data.heldout),
        "tokenizer": data.tokenizer,
    }
    isoflop = planted(plan_sweep(sweep_config(scale)), scale.planted_lr_factor)
    sweep = sweep_steps(isoflop, f"{PREFIX}/isoflop", **io, max_eval_sequences=scale.eval_sequences)
    target = scale.target_factor * max(scale.budgets)
    fit = Step(
        f"{PREFIX}/fit",
        fit_step,
        FitStepConfig(
            runs=(sweep.ref(),), fit=FitConfig(fixed_e=scale.fixed_e, target=target, bootstrap=scale.bootstrap)
        ),
    )
    name = f"moe-isoflop-{budget_label(target)}"
    record = Step(
        f"{PREFIX}/preregister",
        preregister_step,
        PreregisterStepConfig(fit=fit.ref(), compute=target, name=name, law=BEST_CROSS_VALIDATED),
    )
    run = Step(
        f"{PREFIX}/target",
        train_at_prediction,
        TargetRunConfig(
            record=record.ref(),
            sweep=sweep_config(scale),
            widths=scale.target_widths,
            max_eval_sequences=scale.eval_sequences,
            **io,
        ),
        description=f"the preregistered run at {target:.3g} FLOPs",
    )
    scored = Step(f"{PREFIX}/score", score_step, ScoreStepConfig(record=record.ref(), runs=(run.ref(),)))
    batch_plan = plan_sweep(
        sweep_config(scale, budgets=scale.batch_budgets, widths=(scale.batch_width,), batch_sizes=scale.batch_sizes)
    )
    batch = sweep_steps(batch_plan, f"{PREFIX}/batch", **io, max_eval_sequences=scale.eval_sequences)
    batch_fit = Step(f"{PREFIX}/batch-fit", batch_fit_step, BatchFitStepConfig(runs=(batch.ref(),)))
    beta2_plan = plan_sweep(
        sweep_config(
            scale,
            budgets=(scale.beta2_budget,),
            widths=(scale.beta2_width,),
            batch_sizes=scale.beta2_batches,
            beta2_values=scale.beta2_values,
        )
    )
    beta2 = sweep_steps(beta2_plan, f"{PREFIX}/beta2", **io, max_eval_sequences=scale.eval_sequences)
    results = Step(
        f"{PREFIX}/results",
        arc_results,
        ArcResultsConfig(
            isoflop=sweep.ref(),
            fit=fit.ref(),
            record=record.ref(),
            target=run.ref(),
            score=scored.ref(),
            batch=batch.ref(),
            batch_fit=batch_fit.ref(),
            beta2=beta2.ref(),
            beta2_rule=Beta2Rule(),
        ),
    )
    return {"isoflop": sweep, "fit": fit, "preregister": record, "target": run, "score": scored} | {
        "batch": batch,
        "batch_fit": batch_fit,
        "beta2": beta2,
        "results": results,
    }
