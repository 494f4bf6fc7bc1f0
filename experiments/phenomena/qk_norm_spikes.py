"""Phenomenon `qk-norm-spikes` (`tootsie.recipes.phenomena.qk_norm_spikes`; docs/phenomena.md).

tootsie run experiments/phenomena/qk_norm_spikes.py --prefix /tmp/phenomena  # <= 15 min
tootsie run experiments/phenomena/qk_norm_spikes.py --prefix /tmp/phenomena --scale smoke  # minutes
"""

import sys

from tootsie.recipes.phenomena import PHENOMENA
from tootsie.recipes.phenomena.registry import selected_phenomenon_scale

STEPS = PHENOMENA["qk-norm-spikes"].steps(selected_phenomenon_scale())

if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
