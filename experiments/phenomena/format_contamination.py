"""Phenomenon `format-contamination` (`tootsie.recipes.phenomena.format_contamination`; docs/phenomena.md).

tootsie run experiments/phenomena/format_contamination.py --prefix /tmp/phenomena  # <= 15 min
tootsie run experiments/phenomena/format_contamination.py --prefix /tmp/phenomena --scale smoke  # minutes
"""

import sys

from tootsie.recipes.phenomena import PHENOMENA
from tootsie.recipes.phenomena.registry import selected_phenomenon_scale

STEPS = PHENOMENA["format-contamination"].steps(selected_phenomenon_scale())

if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
