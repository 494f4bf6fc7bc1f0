"""The one training entry point: every caller (the CLI, the demo, recipes, sweeps, tests) trains through `run_training`.

It lives in the eval layer because a run's config can ask for in-loop
evaluation (`TrainConfig.eval`), and evaluation sits above the train layer.
`run_training` builds that evaluation and hands it to the train layer's loop
(`tootsie.train.trainer.train_loop`), which refuses a config whose `eval` has
no evaluation hook, so no field of `TrainConfig` is silently ignored
(tests/eval/test_training.py walks every hashed field).

Before training it records the run's config and refuses a resume whose hashed
config differs from the one recorded (`tootsie.train.config_drift`), unless
`allow_config_change` accepts and records the change.

Example: `run_training(load_config("train.yaml", TrainConfig, root="train"), "runs/a")`
trains to `num_steps` (resuming from `runs/a`'s newest checkpoint if any) and
logs `eval/bpb/*` every `eval.every_steps` when the config has an `eval` block.
"""

from collections.abc import Sequence
from pathlib import Path

from tootsie.eval.in_loop import evaluation_hook
from tootsie.executor.step import volatile_outputs
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.train.config import TrainConfig
from tootsie.train.config_drift import prepare_run
from tootsie.train.sharding import initialize_distributed
from tootsie.train.trainer import StepHook, TrainState, train_loop


@volatile_outputs(METRICS_FILE)  # each record's step_seconds and tokens_per_s are wall-clock (docs/reproducibility.md)
def run_training(
    config: TrainConfig, output_path: str, hooks: Sequence[StepHook] = (), allow_config_change: bool = False
) -> TrainState:
    """Train `config` into `output_path` with the evaluation its `eval` asks for.

    `hooks` add metrics to each step's record; `allow_config_change` lets a
    resume change hashed fields (recorded in the run's config_changes.jsonl).
    """
    initialize_distributed(config.distributed)
    prepare_run(Path(output_path), config, allow_config_change)
    evaluation = evaluation_hook(config, output_path) if config.eval is not None else None
    return train_loop(config, output_path, evaluation=evaluation, hooks=hooks)
