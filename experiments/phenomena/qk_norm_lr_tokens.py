"""Does `qk-norm-spikes` reach the issue's criterion with more tokens per run? (docs/phenomena.md, "Beyond tiny").

At tiny scale (300 steps of 16 x 64 tokens) the QK-norm model bounds the
attention logits at every LR but still ends 0.7-1.3 nat above its own best LR
where the Llama fails. These runs (seed 0) vary only the tokens per run, with
the phenomenon's own setup (`spiking_train_config`: one 64-wide head per layer,
z-loss 1e-4, AdamW wd 0.1, warmup a third, cosine to zero), to see how that gap
and the Llama's failing LR move:

    300 x 16     qk-norm at 1e-2 and 1e-1 (the tiny grid's seed 0)
    1200 x 16    qk-norm at 1e-2 and 1e-1       (4x the steps)
    300 x 64     qk-norm at 1e-2 and 1e-1       (4x the batch)
    1200 x 64    both arms at 1e-2 (qk-norm only), 3e-2, 1e-1 and 3e-1

plus one test of a candidate cause: the qk-norm model at 1e-1 (300 x 16) with
the embedding's AdamW updates scaled by 0.1, which keeps the embedding's norm
near its 1e-2 value.

    tootsie run experiments/phenomena/qk_norm_lr_tokens.py --prefix /tmp/phenomena  # ~30 min on 2 idle cores
"""

import sys
from dataclasses import dataclass, replace

import jax
import optax

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.recipes.phenomena.spiking import spiking_train_config
from tootsie.recipes.tiny.data import tiny_data_steps
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import LearningRate


@dataclass(frozen=True)
class EmbeddingScaledAdamWConfig(AdamWConfig):
    """AdamW whose updates to the embedding are multiplied by `embedding_scale` (its LR times that)."""

    embedding_scale: float = 1.0
    """Factor on the embedding's update."""

    def build(self, learning_rate: LearningRate) -> optax.GradientTransformationExtraArgs:
        """AdamW, then the embedding's update scaled."""

        def scale(updates: optax.Updates, state: optax.EmptyState, params: object = None) -> tuple:
            del params
            scaled = jax.tree_util.tree_map_with_path(
                lambda path, u: (
                    u * self.embedding_scale if any(getattr(k, "name", None) == "embed" for k in path) else u
                ),
                updates,
            )
            return scaled, state

        return optax.chain(
            super().build(learning_rate), optax.GradientTransformation(lambda _: optax.EmptyState(), scale)
        )


def run(num_steps: int, batch: int, lr: float, *, qk_norm: bool, embedding_scale: float | None = None) -> Step:
    """One seed-0 run of the spiking setup at `num_steps` x `batch` sequences of 64 tokens."""
    optimizer = (
        AdamWConfig() if embedding_scale is None else EmbeddingScaledAdamWConfig(embedding_scale=embedding_scale)
    )
    config = spiking_train_config(DATA, num_steps=num_steps, peak_lr=lr, seed=0, qk_norm=qk_norm, optimizer=optimizer)
    config = replace(config, data=replace(config.data, batch_schedule=BatchSchedule.constant(batch)))
    arm = "qk-norm" if qk_norm else "llama"
    extra = "" if embedding_scale is None else f"-embedding-x{embedding_scale:g}"
    return Step(f"phenomena/qk-norm-lr-tokens/{num_steps}x{batch}/{arm}{extra}/lr{lr:g}", run_training, config)


DATA = tiny_data_steps()
STEPS = [
    *(
        run(steps, batch, lr, qk_norm=True)
        for steps, batch in ((300, 16), (1200, 16), (300, 64))
        for lr in (1e-2, 1e-1)
    ),
    *(run(1200, 64, lr, qk_norm=True) for lr in (1e-2, 3e-2, 1e-1, 3e-1)),
    *(run(1200, 64, lr, qk_norm=False) for lr in (3e-2, 1e-1, 3e-1)),
    run(300, 16, 1e-1, qk_norm=True, embedding_scale=0.1),
]

if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
