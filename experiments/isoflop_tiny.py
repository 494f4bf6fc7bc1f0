r"""A tiny isoflop sweep on the demo data: 4 budgets × 3 widths on CPU, then `tootsie scaling fit`.

Flow: the demo's datakit steps (tokenizer + token caches, reused from
`experiments/demo.py`) → one training step per (budget, width) → one eval step
per run writing its final held-out macro loss to `run.json` →
`isoflop_tiny/runs` collecting them into `runs.jsonl`.

    tootsie run experiments/isoflop_tiny.py --prefix /tmp/scaling-demo
    tootsie scaling fit /tmp/scaling-demo/isoflop_tiny/runs-<hash> \
        --fixed-asymptote 1.6 --max-budget 5e11 --out fit.json
    tootsie scaling predict --fit fit.json --compute 1e12

Budgets double from 1.25e11 to 1e12 FLOPs; per budget, the window takes the
3 widths (of 8-64) nearest 3 tokens per parameter, where a pilot at 2.5e11
put the minimum (d16 5.07 < d32 5.26 < d48 6.36 nats): at this scale the
4,096-token embeddings are most of every model's parameters, which are counted
with embeddings (Chinchilla/Marin). The twelve runs took 33 minutes of step
time on 2 CPU cores shared with other work (docs/scaling.md). A plan written by
`tootsie scaling sweep --out PLAN.json` (other budgets, `--seeds 1` repeats)
runs instead when `TOOTSIE_SCALING_PLAN=PLAN.json` is set.
"""

import os

from demo import DemoSettings, build_data_steps

from tootsie.scaling.shapes import WidthRule
from tootsie.scaling.sweep import SweepConfig, load_plan, plan_sweep
from tootsie.scaling.sweep_steps import sweep_steps

# Proportional to the two train caches' sizes (0.92M code, 0.57M prose tokens), so runs repeat as little data
# as possible.
MIX = {"code": 0.6, "prose": 0.4}
SWEEP = SweepConfig(
    budgets=(1.25e11, 2.5e11, 5e11, 1e12),
    widths=(8, 16, 24, 32, 48, 64),
    window=3,
    tokens_per_param=3.0,
    batch_size=16,
    rule=WidthRule.tiny(),
)

tokenizer, caches = build_data_steps(DemoSettings())
SWEEP_PLAN = (
    load_plan(os.environ["TOOTSIE_SCALING_PLAN"]) if os.environ.get("TOOTSIE_SCALING_PLAN") else plan_sweep(SWEEP)
)
STEPS = [
    sweep_steps(
        SWEEP_PLAN,
        "isoflop_tiny",
        caches={source: caches[source, "train"].ref() for source in MIX},
        mix=MIX,
        heldout={source: caches[source, "heldout"].ref() for source in MIX},
        tokenizer=tokenizer.ref("tokenizer.json"),
    )
]
