"""Checkpoints to models: where a run keeps its checkpoints, which one a path names, and the model inside.

Everything that reads a trained model (evaluation, export, generation, the
scaling sweeps, the recipes) imports this module, never the training loop.
`resolve_checkpoint` accepts a checkpoint directory or a training output
directory (local or a URL) and picks the newest finished checkpoint;
`load_model` rebuilds the model from its config and fills its arrays from
that checkpoint (`weights="ema"` for the EMA).
"""

from pathlib import Path

import equinox as eqx
import jax

from tootsie import storage
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import Location, is_checkpoint, latest_checkpoint, load_checkpoint
from tootsie.train.config import TrainConfig

CHECKPOINTS = "checkpoints"


def init_model(config: TrainConfig) -> LlamaModel:
    """The freshly initialized model for `config.seed`."""
    return LlamaModel(config.model, key=jax.random.PRNGKey(config.seed))


def checkpoint_root(output: str | Path, final_output: str | None = None) -> Location:
    """Where a run writing `output` keeps its checkpoints: `<final_output or output>/checkpoints`.

    A step staged for object storage writes into a local `output` but passes
    its final URL as `final_output` (the executor hands it to step functions
    declared with `executor.step.direct_outputs`), so its checkpoints go
    straight to the store and a preempted host loses nothing.
    """
    base = str(output) if final_output is None else final_output
    return storage.join(base, CHECKPOINTS) if storage.is_remote(base) else Path(base) / CHECKPOINTS


def resolve_checkpoint(path: str) -> Location:
    """A checkpoint directory from either a checkpoint or a training output directory (local or a URL)."""
    candidate: Location = path if storage.is_remote(path) else Path(path)
    if is_checkpoint(candidate):
        return candidate
    root = checkpoint_root(path)
    latest = latest_checkpoint(root)
    if latest is None:
        raise TootsieError(f"no finished checkpoint in {candidate} or {root}; train that run first")
    return latest


def load_model(model_config: LlamaConfig, checkpoint: str, weights: str = "model") -> LlamaModel:
    """A model with weights from a checkpoint (or a training output directory's newest one).

    `weights="ema"` for the EMA.
    """
    params, static = eqx.partition(LlamaModel(model_config, key=jax.random.PRNGKey(0)), eqx.is_array)
    trees, _ = load_checkpoint(resolve_checkpoint(checkpoint), {weights: params})
    return eqx.combine(trees[weights], static)
