"""The one training entry point: every caller (the CLI, the demo, recipes, sweeps, tests) trains through `run_training`.

It lives in the eval layer because a run's config can ask for in-loop
evaluation (`TrainConfig.eval`), and evaluation sits above the train layer.
`run_training` builds that evaluation and hands it to the train layer's loop
(`tootsie.train.trainer.train_loop`), which refuses a config whose `eval` has
no evaluation hook, so no field of `TrainConfig` is silently ignored
(tests/eval/test_training.py walks every hashed field).

Example: `run_training(load_config(TrainConfig, "train.yaml"), "runs/a")`
trains to `num_steps` (resuming from `runs/a`'s newest checkpoint if any) and
logs `eval/bpb/*` every `eval.every_steps` when the config has an `eval` block.
"""

from collections.abc import Sequence

from tootsie.eval.in_loop import evaluation_hook
from tootsie.train.config import TrainConfig
from tootsie.train.trainer import StepHook, TrainState, train_loop


def run_training(config: TrainConfig, output_path: str, hooks: Sequence[StepHook] = ()) -> TrainState:
    """Train `config` into `output_path` with the evaluation its `eval` asks for.

    `hooks` add metrics to each step's record.
    """
    evaluation = evaluation_hook(config, output_path) if config.eval is not None else None
    return train_loop(config, output_path, evaluation=evaluation, hooks=hooks)
