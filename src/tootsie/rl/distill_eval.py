"""How far a distilled student is from its teacher on held-out prompts: reverse KL on the student's own samples.

The student samples one completion of each of the evaluation's held-out tasks
(the run's sampling settings, the evaluation's seed); the figure is the
distillation objective's loss on them, the mean per-token reverse
KL(student ‖ teacher) over completion tokens, so it is the quantity the run
minimized, measured on prompts it never trained on.

Example: `distillation_summary(config, before, after, codec)` gives
`{"teacher_exact_match": 0.85, "reverse_kl_before": 0.41, "reverse_kl_after": 0.12}`.
"""

from dataclasses import replace

import equinox as eqx
import jax.numpy as jnp

from tootsie.models.kv_cache import DecoderModel
from tootsie.rl.codec import TokenizerCodec
from tootsie.rl.config import RLConfig
from tootsie.rl.environments import RewardConfig
from tootsie.rl.rollout import rollout
from tootsie.train.rl_objectives import DistillObjective


def heldout_reverse_kl(student: DecoderModel, config: RLConfig, codec: TokenizerCodec) -> float:
    """Mean per-token reverse KL(student ‖ teacher) over the student's sampled completions of held-out tasks."""
    objective: DistillObjective = config.train.objective
    evaluation = config.rl.evaluation
    tasks = config.rl.environment.tasks("heldout", 0, evaluation.heldout_tasks)
    sampling = replace(
        config.rl.rollout,
        group_size=1,
        seed=evaluation.seed,
        stop_tokens=(*config.rl.rollout.stop_tokens, codec.eos_id),
    )
    batch, _ = rollout(
        student, student, tasks, config.rl.environment.checker(), codec, sampling, RewardConfig(), iteration=0
    )
    tokens, mask = jnp.asarray(batch.tokens), jnp.asarray(batch.completion_mask, jnp.float32)
    loss = eqx.filter_jit(lambda model: objective.loss(model, tokens, jnp.zeros_like(tokens), mask, 0.0)[0])
    return float(loss(student))


def distillation_summary(
    config: RLConfig, before: DecoderModel, after: DecoderModel, codec: TokenizerCodec, teacher_score: float
) -> dict[str, float]:
    """The teacher's held-out exact match and the student's held-out reverse KL before and after."""
    return {
        "teacher_exact_match": teacher_score,
        "reverse_kl_before": heldout_reverse_kl(before, config, codec),
        "reverse_kl_after": heldout_reverse_kl(after, config, codec),
    }
