"""`z-loss-cooldown` with a 5,500-step hold instead of 1,000 (seed 0): does the lm_head part appear with a longer tail?

The tiny plan (`z_loss_cooldown.PLANS["tiny"]`) with `total_steps` 6,000: the
same base shape (400 steps at 3e-3), the same 100-step decay to 3e-4, then the
tail LR held for 5,500 steps, without and with z-loss 1e-3; results.json as the
phenomenon's, lm_head parts included (docs/phenomena.md, z-loss-cooldown).

    tootsie run experiments/phenomena/z_loss_long_tail.py --prefix /tmp/phenomena  # ~15 min on 2 cores
"""

import sys
from dataclasses import replace

from tootsie.recipes.phenomena.z_loss_cooldown import PLANS, cooldown_steps
from tootsie.recipes.tiny.data import tiny_data_steps

STEPS = cooldown_steps(replace(PLANS["tiny"], total_steps=6000), tiny_data_steps(), seeds=(0,))

if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
