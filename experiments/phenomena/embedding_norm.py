"""Phenomenon `embedding-norm` (`tootsie.recipes.phenomena.embedding_norm`; docs/phenomena.md).

tootsie run experiments/phenomena/embedding_norm.py --prefix /tmp/phenomena  # <= 15 min
tootsie run experiments/phenomena/embedding_norm.py --prefix /tmp/phenomena --scale smoke  # minutes
"""

import sys

from tootsie.recipes.phenomena import PHENOMENA
from tootsie.recipes.phenomena.registry import selected_phenomenon_scale

STEPS = PHENOMENA["embedding-norm"].steps(selected_phenomenon_scale())

if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
