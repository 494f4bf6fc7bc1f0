"""Microannealing: rank candidate high-quality sources by short anneals from one base (docs/microannealing.md).

    python experiments/microanneal.py --dry-run --json       the 8B-sized plan (branches, 70/15/15 weights, ...)
    python experiments/microanneal.py --scale tiny           the tiny run on local text (minutes on a CPU)
    tootsie run experiments/microanneal.py --scale tiny      the same through the CLI

Builds `tootsie.recipes.microanneal.anneals` steps from the spec of the selected scale
(`tootsie.recipes.microanneal.scales`); the last step, `<name>/ranking`,
writes results.json and figure.png.
"""

import sys

from tootsie.recipes.microanneal.anneals import microanneal_plan, microanneal_steps
from tootsie.recipes.microanneal.scales import full_microanneal, tiny_microanneal
from tootsie.recipes.scale import FULL, Scale
from tootsie.recipes.tiny.scale import selected_scale

SCALE = selected_scale({"full": FULL, "tiny": Scale("tiny")})
SPEC = tiny_microanneal() if SCALE.name == "tiny" else full_microanneal()
STEPS = [microanneal_steps(SPEC)["ranking"]]


def PLAN() -> dict:
    """The plan `--dry-run --json` adds to the step report."""
    return microanneal_plan(SPEC)


if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
