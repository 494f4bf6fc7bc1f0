"""Capacity-factor ablation of the tiny MoE: dropped fraction, held-out BPB and tokens/s at cf 1, 1.25, 2 and 4.

Steps (see `tootsie.recipes.moe`):

    tiny/...                                    the tiny recipes' data (shared)
    moe_exp/moe-e96-cf{1,1.25,2,4}-lb0.01/seed{0,1,2}
                                                the MoE of experiments/moe_vs_dense.py at each capacity factor
                                                (cf 4 is that experiment's MoE arm: the same runs)
    moe_capacity/throughput-e96                 throughput.json: the gradient step's tokens/s per factor, timed in
                                                interleaved rounds in one process (the runs' own tokens/s move
                                                with the shared machine's load from run to run)
    moe_capacity/analysis-e96                   figure.png + results.json

The seeds' 1e22 run went from macro 2.459 and 19 % MFU at cf 1 to 2.290 and
38 % at cf 4 on TPU. On CPU the padded expert backend computes every slot of
every expert's buffer, so a larger factor is more work per token: expect the
throughput to go the other way.

    tootsie run experiments/moe_capacity.py --prefix /tmp/moe-exp
"""

from tootsie.executor import Step
from tootsie.recipes.cases.common import CASE_BATCH
from tootsie.recipes.moe.analysis import CapacityConfig, analyze_capacity
from tootsie.recipes.moe.runs import EXPERT_DIM, SEEDS, SETTINGS, RunSettings, moe_model, seed_runs
from tootsie.recipes.moe.throughput import THROUGHPUT_FILE, ThroughputConfig, time_capacity_factors
from tootsie.recipes.tiny.data import tiny_data_steps
from tootsie.recipes.tiny.scale import TINY_SEQ_LEN

CAPACITY_FACTORS = (1.0, 1.25, 2.0, 4.0)


def build_steps(
    expert_dim: int = EXPERT_DIM,
    factors: tuple[float, ...] = CAPACITY_FACTORS,
    seeds: tuple[int, ...] = SEEDS,
    settings: RunSettings = SETTINGS,
) -> list[Step]:
    """The ablation's analysis step (and, through it, one run per factor and seed)."""
    data = tiny_data_steps()
    runs = {
        f"{cf:g}": tuple(step.ref() for step in seed_runs(moe_model(expert_dim, cf), seeds, data, settings))
        for cf in factors
    }
    timing = Step(
        f"moe_capacity/throughput-e{expert_dim}",
        time_capacity_factors,
        ThroughputConfig(moe_model(expert_dim), factors, CASE_BATCH, TINY_SEQ_LEN),
    )
    config = CapacityConfig(runs=runs, throughput=timing.ref(THROUGHPUT_FILE))
    return [Step(f"moe_capacity/analysis-e{expert_dim}", analyze_capacity, config)]


STEPS = build_steps()
