"""The bits-per-byte evaluation step: several checkpoints × several held-out domains.

A checkpoint label mapped to None means "the initialization", so the same step
reports BPB before and after training from one config.
"""

from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax

from tootsie.jsonfile import write_json_atomic
from tootsie.datakit.tokenizer import load_tokenizer, token_byte_lengths
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import load_checkpoint
from tootsie.train.trainer import resolve_checkpoint

BPB_FILE = "bpb.json"


@dataclass(frozen=True)
class EvalBPBConfig:
    """Which models to evaluate on which held-out caches."""

    model: LlamaConfig
    """Architecture of every checkpoint."""
    checkpoints: dict[str, str | None]
    """Label → checkpoint or training output directory; None evaluates the initialization."""
    heldout: dict[str, str]
    """Domain name → token cache of held-out documents."""
    tokenizer: str
    """The tokenizer the caches were made with (for byte counts)."""
    seq_len: int = 128
    """Tokens per evaluated sequence."""
    max_sequences: int | None = 64
    """Sequences per domain (from the start of the cache); None for all."""
    seed: int = 0
    """Initialization seed, for the None checkpoints."""


def _model(config: EvalBPBConfig, checkpoint: str | None) -> LlamaModel:
    model = LlamaModel(config.model, key=jax.random.PRNGKey(config.seed))
    if checkpoint is None:
        return model
    params, static = eqx.partition(model, eqx.is_array)
    trees, _ = load_checkpoint(resolve_checkpoint(checkpoint), {"model": params})
    return eqx.combine(trees["model"], static)


def evaluate_bpb(config: EvalBPBConfig, output_path: str) -> dict[str, dict[str, float]]:
    """Write `bpb.json`: for each checkpoint label, BPB per domain plus macro and micro averages."""
    byte_lengths = token_byte_lengths(load_tokenizer(config.tokenizer))
    results = {}
    for label, checkpoint in config.checkpoints.items():
        model = _model(config, checkpoint)
        per_domain = {name: domain_bpb(model, cache, byte_lengths, config.seq_len, max_sequences=config.max_sequences) for name, cache in sorted(config.heldout.items())}
        results[label] = summarize(per_domain)
    write_json_atomic(Path(output_path) / BPB_FILE, results)
    return results
