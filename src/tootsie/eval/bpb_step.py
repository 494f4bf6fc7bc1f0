"""The bits-per-byte evaluation step: several checkpoints × several held-out domains.

A checkpoint label mapped to None means "the initialization", so the same step
reports BPB before and after training from one config; a checkpoint that saved
EMA weights is also scored with them (`<label>_ema`), so the gap between raw
and EMA weights is measured on the same held-out text.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jax

from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.tokenizer import load_tokenizer
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import has_tree
from tootsie.train.loading import load_model, resolve_checkpoint

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
    ema: bool = True
    """Also evaluate each checkpoint's EMA weights (label `<label>_ema`) when it saved them."""


def _models(config: EvalBPBConfig) -> Iterator[tuple[str, LlamaModel]]:
    """Every model to evaluate, one at a time.

    The initialization for None, else the checkpoint's weights and, if saved, its EMA as `<label>_ema`.
    """
    for label, checkpoint in config.checkpoints.items():
        if checkpoint is None:
            yield label, config.model.build(key=jax.random.PRNGKey(config.seed))
            continue
        yield label, load_model(config.model, checkpoint)
        if config.ema and has_tree(resolve_checkpoint(checkpoint), "ema"):
            yield f"{label}_ema", load_model(config.model, checkpoint, weights="ema")


def evaluate_bpb(config: EvalBPBConfig, output_path: str) -> dict[str, dict[str, float]]:
    """Write `bpb.json`: for each checkpoint label, BPB per domain plus macro and micro averages."""
    token_bytes = TokenBytes(load_tokenizer(config.tokenizer))
    results = {}
    for label, model in _models(config):
        per_domain = {
            name: domain_bpb(model, cache, token_bytes, config.seq_len, max_sequences=config.max_sequences)
            for name, cache in sorted(config.heldout.items())
        }
        results[label] = summarize(per_domain)
    write_json_atomic(Path(output_path) / BPB_FILE, results)
    return results
