"""`results.json` of a phenomenon: the seed's words, the claim, the verdict, figures and numbers with their noise.

Every phenomenon's analysis step ends with `write_phenomenon`, so the files
share one schema:

    {"phenomenon", "seed_quote", "claim", "verdict", "figures": ["figure.png", ...], "numbers": {...}}

`verdict` is `reproduced`, `not_reproduced` or `partial`. A number measured
over seeds is `over_seeds(values)`: `{"mean", "sd", "n", "values"}`.
"""

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from tootsie.recipes.cases.common import FIGURE_FILE, write_results
from tootsie.recipes.phenomena.registry import phenomenon

VERDICTS = ("reproduced", "not_reproduced", "partial")


def over_seeds(values: Sequence[float]) -> dict[str, object]:
    """A figure measured once per seed: mean, sample standard deviation (0 for one seed), count and the values."""
    array = np.asarray(values, dtype=np.float64)
    sd = float(array.std(ddof=1)) if len(array) > 1 else 0.0
    return {"mean": float(array.mean()), "sd": sd, "n": len(array), "values": [float(v) for v in array]}


def phenomenon_results(name: str, verdict: str, numbers: Mapping[str, object]) -> dict[str, object]:
    """The results.json object of phenomenon `name` (its quote and claim from the registry)."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    entry = phenomenon(name)
    return {
        "phenomenon": name,
        "seed": entry.seed,
        "seed_quote": entry.seed_quote,
        "claim": entry.claim,
        "verdict": verdict,
        "figures": [FIGURE_FILE],
        "numbers": dict(numbers),
    }


def write_phenomenon(
    output_path: str, name: str, verdict: str, numbers: Mapping[str, object], figure: Figure
) -> dict[str, object]:
    """Write results.json and figure.png under `output_path` (atomically); return the results."""
    return write_results(output_path, phenomenon_results(name, verdict, numbers), figure)
