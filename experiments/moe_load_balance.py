"""Load balancing of the tiny MoE: `moe/max_load` over steps with the Switch loss off (weight 0) and on (0.01, 0.1).

Steps (see `tootsie.recipes.moe`):

    tiny/...                                the tiny recipes' data (shared)
    moe_exp/moe-e96-cf1-lb0/seed{0,1,2}     the MoE at the default capacity factor 1, no load-balancing loss
    moe_exp/moe-e96-cf1-lb0.01/seed{0,1,2}  the same with the default weight 0.01 (the capacity ablation's cf 1 runs)
    moe_exp/moe-e96-cf1-lb0.1/seed{0,1,2}   and with ten times the default
    moe_load_balance/analysis-e96           figure.png + results.json: max load against 1/E and 1/k

Every arm keeps the router z-loss (0.001).

    tootsie run experiments/moe_load_balance.py --prefix /tmp/moe-exp
"""

from tootsie.executor import Step
from tootsie.recipes.moe.analysis import LoadBalanceConfig, analyze_load_balance
from tootsie.recipes.moe.runs import (
    EXPERT_DIM,
    EXPERTS_PER_TOKEN,
    NUM_EXPERTS,
    SEEDS,
    SETTINGS,
    RunSettings,
    moe_model,
    seed_runs,
)
from tootsie.recipes.tiny.data import tiny_data_steps

CAPACITY_FACTOR = 1.0
WEIGHTS = (0.0, 0.01, 0.1)


def build_steps(
    expert_dim: int = EXPERT_DIM, seeds: tuple[int, ...] = SEEDS, settings: RunSettings = SETTINGS
) -> list[Step]:
    """The analysis step (and, through it, the runs with the load-balancing loss off and on)."""
    data = tiny_data_steps()
    runs = {
        f"lb {weight:g}": tuple(
            step.ref()
            for step in seed_runs(
                moe_model(expert_dim, CAPACITY_FACTOR, load_balancing_weight=weight), seeds, data, settings
            )
        )
        for weight in WEIGHTS
    }
    config = LoadBalanceConfig(runs=runs, num_experts=NUM_EXPERTS, experts_per_token=EXPERTS_PER_TOKEN)
    return [Step(f"moe_load_balance/analysis-e{expert_dim}", analyze_load_balance, config)]


STEPS = build_steps()
