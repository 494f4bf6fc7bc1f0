"""Held-out preference accuracy and reward margin of a reference (SFT) model and its DPO child.

On a preference cache both models score every pair (`eval.reference_logprobs.
pair_scores`: summed reply log-probs, laid out as in training). A model's
*preference accuracy* is the fraction of pairs whose chosen reply it gives
the higher summed log-prob, comparable between any two models. The DPO
model's *reward accuracy* and *reward margin* are DPO's own metrics against
the reference: rewards `β (π − ref)`, margin `chosen − rejected` (the
reference's are zero by definition, so only the child has them).

Example: SFT prefers the chosen reply on 20 of 26 held-out pairs (0.769), the
DPO child on 23 (0.885), with a mean reward margin of 0.41 and reward
accuracy 0.846.
"""

import numpy as np

from tootsie.eval.reference_logprobs import pair_scores
from tootsie.models.llama import LlamaConfig
from tootsie.train.loading import load_model


def preference_metrics(reference: np.ndarray, policy: np.ndarray, beta: float) -> dict[str, float]:
    """Accuracy of each model and the policy's DPO reward metrics, from `[pairs, 2]` (chosen, rejected) scores."""
    margin = beta * ((policy[:, 0] - reference[:, 0]) - (policy[:, 1] - reference[:, 1]))
    return {
        "reference_accuracy": float((reference[:, 0] > reference[:, 1]).mean()),
        "policy_accuracy": float((policy[:, 0] > policy[:, 1]).mean()),
        "reward_accuracy": float((margin > 0).mean()),
        "reward_margin": float(margin.mean()),
        "chosen_reward": float(beta * (policy[:, 0] - reference[:, 0]).mean()),
        "rejected_reward": float(beta * (policy[:, 1] - reference[:, 1]).mean()),
    }


def evaluate_preferences(
    model: LlamaConfig, reference: str, policy: str, caches: dict[str, str], seq_len: int, beta: float
) -> dict[str, dict[str, float]]:
    """`preference_metrics` per preference cache (and `pairs`), the reference and policy read from checkpoints."""
    models = {
        name: load_model(model, checkpoint) for name, checkpoint in (("reference", reference), ("policy", policy))
    }
    results = {}
    for name, cache in caches.items():
        scores = {label: pair_scores(loaded, cache, seq_len)[0] for label, loaded in models.items()}
        results[name] = {
            "pairs": len(scores["policy"]),
            **preference_metrics(scores["reference"], scores["policy"], beta),
        }
    return results
