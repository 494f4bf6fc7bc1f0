"""The one training entry point: every caller (the CLI, the demo, recipes, sweeps, tests) trains through `run_training`.

It lives in the eval layer because a run's config can ask for in-loop
evaluation (`TrainConfig.eval`), and evaluation sits above the train layer.
`run_training` builds that evaluation (`Evaluation` callbacks) and hands it to
the train layer's loop (`tootsie.train.trainer.train_loop`), which refuses a
config whose `eval` has no evaluation callback, so no field of `TrainConfig` is
silently ignored (tests/eval/test_training.py walks every hashed field).

As an executor step function it declares `checkpoints` a direct output
(`executor.step.direct_outputs`): a step staged for object storage is called
with `final_output=<URL>` and writes its checkpoints straight there.

A config with `divergence` set ends normally when the run diverges: the run
wrote `diverged.json` (`tootsie.train.divergence`), so the step succeeds and
its output says the run is infeasible; run again on the same directory, it
returns at once instead of training past the divergence.

Before training it records the run's config and refuses a resume whose hashed
config differs from the one recorded (`tootsie.train.config_drift`), unless
`allow_config_change` accepts and records the change.

Example: `run_training(load_config("train.yaml", TrainConfig, root="train"), "runs/a")`
trains to `num_steps` (resuming from `runs/a`'s newest checkpoint if any) and
logs `eval/bpb/*` every `eval.every_steps` when the config has an `eval` block.
"""

import logging
from collections.abc import Sequence
from pathlib import Path

from tootsie.data.source import DataSource
from tootsie.eval.in_loop import evaluation_callbacks
from tootsie.executor.step import direct_outputs, volatile_outputs
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.train.callbacks import Callback, StepHook, hook_callback
from tootsie.train.config import TrainConfig
from tootsie.train.config_drift import prepare_run
from tootsie.train.divergence import DIVERGED_FILE, Diverged, read_divergence
from tootsie.train.loading import CHECKPOINTS
from tootsie.train.sharding import initialize_distributed
from tootsie.train.state import TrainState
from tootsie.train.trainer import train_loop

logger = logging.getLogger(__name__)


@direct_outputs(CHECKPOINTS)
@volatile_outputs(METRICS_FILE)  # each record's step_seconds and tokens_per_s are wall-clock (docs/reproducibility.md)
def run_training(
    config: TrainConfig,
    output_path: str,
    hooks: Sequence[StepHook] = (),
    allow_config_change: bool = False,
    *,
    callbacks: Sequence[Callback] = (),
    final_output: str | None = None,
    data: DataSource | None = None,
) -> TrainState | None:
    """Train `config` into `output_path` with the evaluation its `eval` asks for.

    `hooks` add metrics to every step's record (`callbacks.hook_callback`);
    `callbacks` join the loop's own; `allow_config_change` lets a resume change
    hashed fields (recorded in the run's config_changes.jsonl); `final_output`
    is where checkpoints go when not under `output_path` (given by the executor); `data` is the source a
    `data: {kind: supplied}` config trains on (an RL rollout buffer), by default the config's mixture.
    Returns the final state, or None when the run diverged (this time or before; `diverged.json` says why).
    """
    initialize_distributed(config.distributed)
    diverged = read_divergence(output_path) if config.divergence is not None else None
    if diverged is not None:
        logger.warning(
            "%s says the run diverged after step %s (%s); not training it again "
            "(delete the file to resume from the newest checkpoint)",
            Path(output_path) / DIVERGED_FILE,
            diverged["step"],
            diverged["reason"],
        )
        return None
    prepare_run(Path(output_path), config, allow_config_change, final_output)
    extra = [*evaluation_callbacks(config, output_path), *map(hook_callback, hooks), *callbacks]
    try:
        return train_loop(config, output_path, extra, final_output=final_output, data=data)
    except Diverged:
        if config.divergence is None:
            raise
        return None  # the guard wrote diverged.json and logged why
