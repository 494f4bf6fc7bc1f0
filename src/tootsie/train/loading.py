"""Checkpoints to models: where a run keeps its checkpoints, which one a path names, and the model inside.

Everything that reads a trained model (evaluation, export, generation, the
scaling sweeps, the recipes) imports this module, never the training loop:

- `checkpoint_root(output)`: where a run keeps its checkpoints (`CHECKPOINTS`);
- `resolve_checkpoint(path)`: the checkpoint a path names, given a checkpoint
  directory or a training output directory (its newest committed checkpoint);
- `model_config_of(checkpoint)`: the model config its `state.json` records, a
  model registry choice (`tootsie.models.registry`; a record without `kind:`
  is a Llama);
- `init_model(config)`: a training config's freshly initialized model;
- `load_model(model_config, checkpoint, weights)`: that model with the
  checkpoint's weights (`weights="ema"` for the EMA).

Models are built by their config's `build(key=...)`, whatever the kind, so a
new kind loads once it is registered. Locations are plain strings, local paths
or URLs (`s3://`, `gs://`); a `pathlib.Path` is accepted and converted on
entry, and a location returned is always a string.

Example: `load_model(model_config_of(c), c)` with `c = resolve_checkpoint("runs/pretrain")`
loads `runs/pretrain/checkpoints/step-000300`, the run's newest checkpoint.
"""

import os
from typing import TYPE_CHECKING

import equinox as eqx
import jax

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.models.registry import ModelConfig
from tootsie.train.checkpoint import (
    Location,
    PathOrUrl,
    is_checkpoint,
    is_tensor,
    latest_checkpoint,
    load_checkpoint,
    model_config_of,
)

if TYPE_CHECKING:  # the config imports the objectives, and the distillation objective loads its teacher from here
    from tootsie.train.config import TrainConfig

CHECKPOINTS = "checkpoints"
__all__ = [
    "CHECKPOINTS",
    "checkpoint_root",
    "init_model",
    "load_model",
    "model_config_of",
    "resolve_checkpoint",
]


def init_model(config: "TrainConfig") -> eqx.Module:
    """The freshly initialized model of `config.model` for `config.seed` (built through the model registry)."""
    return config.model.build(key=jax.random.PRNGKey(config.seed))


def checkpoint_root(output: PathOrUrl, final_output: str | None = None) -> Location:
    """Where a run writing `output` keeps its checkpoints: `<final_output or output>/checkpoints`.

    A step staged for object storage writes into a local `output` but passes
    its final URL as `final_output` (the executor hands it to step functions
    declared with `executor.step.direct_outputs`), so its checkpoints go
    straight to the store and a preempted host loses nothing.
    """
    return storage.join(os.fspath(output) if final_output is None else final_output, CHECKPOINTS)


def resolve_checkpoint(path: PathOrUrl) -> Location:
    """A checkpoint directory from either a checkpoint or a training output directory (local or a URL)."""
    candidate = os.fspath(path)
    if is_checkpoint(candidate):
        return candidate
    root = checkpoint_root(candidate)
    latest = latest_checkpoint(root)
    if latest is None:
        raise TootsieError(f"no finished checkpoint in {candidate} or {root}; train that run first")
    return latest


def load_model(model_config: ModelConfig, checkpoint: PathOrUrl, weights: str = "model") -> eqx.Module:
    """The model of `model_config` with weights from a checkpoint (or a training output directory's newest one).

    `weights="ema"` for the EMA. The model's shapes come from `build` traced abstractly, so no random
    weights are made only to be overwritten.
    """
    abstract = eqx.filter_eval_shape(lambda: model_config.build(key=jax.random.PRNGKey(0)))
    params, static = eqx.partition(abstract, is_tensor)
    trees, _ = load_checkpoint(resolve_checkpoint(checkpoint), {weights: params})
    return eqx.combine(trees[weights], static)
