"""The DPO figure: held-out preference accuracy of the reference (SFT) model and of the DPO run.

`evaluate_dpo` reads everything from the DPO run's `TrainConfig`: the
reference checkpoint from `warm_start`, the held-out preference caches from
`eval.heldout`, `beta` from the DPO objective, the packing length from
`data.seq_len`; `eval.preference_eval` does the scoring. `tootsie dpo
evaluate` prints the result.
"""

from tootsie.errors import TootsieError
from tootsie.eval.preference_eval import evaluate_preferences
from tootsie.train.config import TrainConfig
from tootsie.train.objectives import DPOObjective


def evaluate_dpo(config: TrainConfig, out: str) -> dict[str, dict[str, float]]:
    """Preference metrics per held-out cache of the warm start (reference) and of the run in `out` (policy)."""
    if not isinstance(config.objective, DPOObjective) or config.warm_start is None or config.eval is None:
        raise TootsieError(
            "evaluating DPO needs objective kind dpo, warm_start (the SFT model) and eval.heldout "
            "(preference caches); use the config `tootsie dpo example-config` prints"
        )
    return evaluate_preferences(
        config.model,
        config.warm_start.checkpoint,
        out,
        config.eval.heldout,
        config.data.seq_len,
        config.objective.beta,
    )
