r"""The seeds' MoE isoflop arc at toy scale: sweep, fit, preregister, run, score; batch and β₂ sweeps.

    tootsie run experiments/moe_isoflop_tiny.py --prefix /tmp/moe-isoflop           # <= 60 min on 2 cores
    tootsie run experiments/moe_isoflop_tiny.py --prefix /tmp/moe-smoke --scale smoke

Steps (`tootsie.recipes.moe.isoflop`; results in docs/scaling-moe.md):

    tiny/...                       the tiny recipes' data (vocabulary 1024, five kinds of text)
    moe_isoflop/isoflop/...        3 budgets × 3 widths of MoE (8 experts, k = 2, GQA 4:1), plus one planted
                                   run at LR × 100 that diverges and is recorded infeasible
    moe_isoflop/fit                free-E and fixed-E laws, leave-future-out per held-out budget, and the
                                   target prediction from every training-set size
    moe_isoflop/preregister        the hashed prediction at 4 × the largest budget
    moe_isoflop/target, /score     the run at that budget (width from the preregistered N_opt), scored
    moe_isoflop/batch/..., /batch-fit   batch sweeps at 2 budgets and the critical-batch law
    moe_isoflop/beta2/...          β₂ × batch at one budget
    moe_isoflop/results            results.json + figure.png
"""

import sys

from tootsie.recipes.moe.isoflop import ARC_SCALES, ArcScale, arc_steps
from tootsie.recipes.scale import Scale
from tootsie.recipes.tiny.data import tiny_data_steps
from tootsie.recipes.tiny.scale import selected_scale

SCALE = selected_scale({name: Scale(name) for name in ARC_SCALES})
ARC: ArcScale = ARC_SCALES[SCALE.name]
STEPS = [arc_steps(ARC, tiny_data_steps())["results"]]

if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
