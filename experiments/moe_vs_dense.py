"""MoE (8 experts, k = 2) against dense at matched active parameters: held-out macro BPB over 3 seeds.

Steps (see `tootsie.recipes.moe`):

    tiny/...                               the tiny recipes' data (shared)
    moe_exp/moe-e96-cf4-lb0.01/seed{0,1,2}  MoE, 8 experts 96 wide, k = 2; cf 4 = E/k, so no token is dropped
    moe_exp/dense-f192/seed{0,1,2}          Llama with a 192-wide MLP (2 × 96): the MoE's active parameters
                                           less its routers
    moe_vs_dense/analysis-e96               figure.png + results.json: per-seed BPB, means, SEs, the difference

Seed s of both arms reads the same batches from the same mixture; both train
the same steps with the same schedule and score the same held-out sequences.

    tootsie run experiments/moe_vs_dense.py --prefix /tmp/moe-exp
"""

from tootsie.executor import Step
from tootsie.recipes.moe.analysis import MoeVsDenseConfig, analyze_moe_vs_dense
from tootsie.recipes.moe.runs import EXPERT_DIM, SEEDS, SETTINGS, RunSettings, matched_dense, moe_model, seed_runs
from tootsie.recipes.tiny.data import tiny_data_steps


def build_steps(
    expert_dim: int = EXPERT_DIM, seeds: tuple[int, ...] = SEEDS, settings: RunSettings = SETTINGS
) -> list[Step]:
    """The comparison's analysis step (and, through it, both arms' runs) for experts `expert_dim` wide."""
    data = tiny_data_steps()
    moe = moe_model(expert_dim)
    dense = matched_dense(moe)
    runs = {arm: seed_runs(model, seeds, data, settings) for arm, model in (("moe", moe), ("dense", dense))}
    parameters = {
        "moe": {"total": moe.num_parameters(), "active": moe.active_parameters()},
        "dense": {"total": dense.num_parameters(), "active": dense.num_parameters()},
    }
    config = MoeVsDenseConfig(
        runs={arm: tuple(step.ref() for step in steps) for arm, steps in runs.items()}, parameters=parameters
    )
    return [Step(f"moe_vs_dense/analysis-e{expert_dim}", analyze_moe_vs_dense, config)]


STEPS = build_steps()
