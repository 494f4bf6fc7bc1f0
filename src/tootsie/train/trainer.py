"""The training loop: draw a batch, take a jitted step, hand the result to the callbacks; repeat.

Design: `train_loop` is a short sequence of phases (set up, start, per step:
data → step → callbacks, end), readable top to bottom like nanoGPT's. Everything
else is a callback (`tootsie.train.callbacks` defines the lifecycle):
the record's derived fields, in-loop evaluation, the trackers, the non-finite
guard, the plateau rewinder, the checkpointer (with preemption) and the
profiler window. The state and its checkpoints live in `train.state`, the
jitted step in `train.train_step`, the data behind `data.source.DataSource`.

A run's output directory holds `checkpoints/step-N/`, `metrics.jsonl` (plus
any configured trackers' files), `rewinds.json` after a rewind and `profile/`
when `profile_steps` is set; running the same config on the same directory
again resumes from its newest checkpoint to the bit, and `warm_start` starts a
new run (a cooldown, an architecture switch) from another run's checkpoint.

Only the training entry point (`tootsie.eval.training.run_training`, which
adds the in-loop evaluation) imports this module; everything else imports
`train.state`, `train.callbacks` or `train.loading` (tests/train/test_loop_imports.py).

Example: `train_loop(config, "runs/a", [hook_callback(fn, Every(steps=50))])`
trains to `config.num_steps`, adding `fn(state)`'s metrics to every 50th record.
"""

import time
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp

from tootsie.data.source import BASE_FIELDS, DataSource, default_source
from tootsie.errors import TootsieError
from tootsie.train.callbacks import Callback, Callbacks, Evaluation, Run
from tootsie.train.checkpoint import latest_checkpoint, remove_uncommitted
from tootsie.train.checkpointing import Checkpointer
from tootsie.train.config import TrainConfig
from tootsie.train.guards import DivergenceGuard, NonFiniteGuard, PlateauRewinder
from tootsie.train.loading import checkpoint_root
from tootsie.train.monitoring import ProfileWindow, RecordFields, TrackerLog
from tootsie.train.rewind import read_rewinds
from tootsie.train.sharding import barrier, global_batch, initialize_distributed, is_main_process
from tootsie.train.state import TrainState, build_layout, build_optimizer, initial_state
from tootsie.train.train_step import host_metrics, make_train_step


def open_run(
    config: TrainConfig, output: Path, callbacks: Callbacks, final_output: str | None, data: DataSource | None
) -> Run:
    """The run's starting point: stale partial checkpoints removed, mesh laid out, state resumed or built.

    `data` defaults to the config's mixture (`MixtureSource`).
    """
    initialize_distributed(config.distributed)
    data = data or default_source(config.data)
    checkpoints = checkpoint_root(output, final_output)
    if is_main_process():
        remove_uncommitted(checkpoints)
    barrier("checkpoints-cleaned")
    resuming = latest_checkpoint(checkpoints) is not None
    optimizer = build_optimizer(config)
    layout = build_layout(config, optimizer)
    state = initial_state(config, optimizer, output, layout, final_output)
    events = read_rewinds(output) if resuming else []
    return Run(config, output, final_output, optimizer, layout, data, state, events, callbacks)


def loop_callbacks(config: TrainConfig, extra: Sequence[Callback]) -> Callbacks:
    """The loop's own callbacks for `config` (fields, trackers, guards, rewinds, checkpoints, profiler) and `extra`.

    A config with `eval` and no `Evaluation` callback in `extra`, or the reverse, is refused rather than half run.
    """
    evaluated = any(isinstance(callback, Evaluation) for callback in extra)
    if (config.eval is None) == evaluated:
        mismatch = (
            "an evaluation callback was given but config.eval is None"
            if evaluated
            else "config.eval is set but no evaluation callback was given"
        )
        raise TootsieError(
            f"{mismatch}: train through tootsie.eval.training.run_training, "
            "which builds the evaluation from config.eval"
        )
    guard = NonFiniteGuard() if config.divergence is None else DivergenceGuard(config.divergence)
    callbacks = [RecordFields(), TrackerLog(), guard, Checkpointer(), *extra]
    callbacks += [PlateauRewinder()] if config.rewind is not None else []
    return Callbacks(callbacks + ([ProfileWindow(config.profile_steps)] if config.profile_steps is not None else []))


def train_loop(
    config: TrainConfig,
    output_path: str,
    callbacks: Sequence[Callback] = (),
    *,
    final_output: str | None = None,
    data: DataSource | None = None,
) -> TrainState:
    """Train to `config.num_steps`, resuming if the run has checkpoints; `callbacks` join the loop's own.

    Train through `tootsie.eval.training.run_training` (it adds the `Evaluation` callbacks `config.eval` asks for).
    `final_output`: where checkpoints go if not under `output_path`; `data`: by default the config's mixture.
    """
    # setup: the callbacks, the state (resumed, warm-started or fresh), the data source, the jitted step
    run = open_run(config, Path(output_path), loop_callbacks(config, callbacks), final_output, data)
    train_step = make_train_step(config, run.optimizer, run.layout)
    fields = (*BASE_FIELDS, *config.objective.fields)
    try:
        run.callbacks.start(run)
        while run.state.step < config.num_steps:
            # data: the batch of this step's data position (rewinds skip windows of data steps)
            step, data_step, started = run.state.step, run.skips.data_step(run.state.step), time.perf_counter()
            arrays = global_batch(run.data, data_step, run.layout.batch, fields)
            # step: one jitted update; its metrics (objective auxiliaries included) come back to the host
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                *trained, metrics = train_step(*run.state.arrays, jnp.asarray(step, jnp.int32), *arrays)
                record = host_metrics(metrics)
            run.state = TrainState(*trained, step + 1)
            seconds = time.perf_counter() - started
            record |= {"batch_size": len(arrays[0]), "data_step": data_step, "step_seconds": seconds}
            # callbacks, in order: record fields, evaluation, trackers, guards, rewind, checkpoint, profiler
            run.callbacks.after_step(run, step, record)
        # end: the final permanent checkpoint
        run.callbacks.end(run)
    except BaseException as error:
        run.callbacks.error(run, error)
        raise
    finally:
        run.callbacks.close(run)
    return run.state
