"""Check an export with `transformers` itself: the same logits and the same greedy tokens as tootsie.

Needs the `hf` extra (torch, transformers), checked first (`extras.require`);
the import happens only here, so exporting never needs them. The HF model is loaded from the local folder only
(`local_files_only`, no remote code) in float32, fed random token ids, and
compared with the tootsie model of the same checkpoint; then both generate
greedily from the same prompt, stopping at any of generation_config.json's EOS
ids (EOS, and the end-of-turn token of a chat export).
"""

from collections.abc import Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from tootsie.extras import require
from tootsie.models.kv_cache import DecoderModel
from tootsie.models.llama import LlamaConfig
from tootsie.models.registry import model_kind, require_kind
from tootsie.release.hf_config import EXPORTED_KINDS
from tootsie.release.hf_export import checkpoint_tensors
from tootsie.release.hf_weights import model_layout
from tootsie.train.checkpoint import PathOrUrl
from tootsie.train.loading import model_config_of


def checkpoint_model(checkpoint: PathOrUrl, config: LlamaConfig, weights: str) -> DecoderModel:
    """The tootsie model of a checkpoint, built straight from its tensors (no throwaway random init)."""
    require_kind(model_kind(config), EXPORTED_KINDS, "checking a Hugging Face export")
    names, _, treedef = model_layout(config)
    tensors = checkpoint_tensors(checkpoint, config, weights)
    return jax.tree_util.tree_unflatten(treedef, [jnp.asarray(tensors[name]) for name in names])


@eqx.filter_jit
def _logits(model: DecoderModel, tokens: Int[Array, "batch seq"]) -> Float[Array, "batch seq vocab"]:
    return model(tokens)


def greedy_tokens(model: DecoderModel, prompt: list[int], new_tokens: int, eos_id: int | Sequence[int]) -> list[int]:
    """Prompt plus up to `new_tokens` argmax continuations from tootsie, stopping after EOS (any of a list).

    Every step runs on one fixed-length buffer (compiled once): the model is
    causal, so the unfilled tail cannot change the logits before it.
    """
    buffer = np.zeros((1, len(prompt) + new_tokens), dtype=np.int32)
    buffer[0, : len(prompt)] = prompt
    length, stops = len(prompt), {eos_id} if isinstance(eos_id, int) else set(eos_id)
    while length < buffer.shape[1]:
        buffer[0, length] = int(jnp.argmax(_logits(model, jnp.asarray(buffer))[0, length - 1]))
        length += 1
        if int(buffer[0, length - 1]) in stops:
            break
    return buffer[0, :length].tolist()


def verify_export(
    directory: Path, checkpoint: PathOrUrl, *, ema: bool = False, seq_len: int = 32, new_tokens: int = 16, seed: int = 0
) -> dict[str, object]:
    """Max |logit difference| on random ids and whether greedy generation agrees, tootsie vs transformers."""
    require(("hf",), purpose="verifying an export with transformers")
    import torch
    import transformers

    config = model_config_of(checkpoint)
    model = checkpoint_model(checkpoint, config, "ema" if ema else "model")
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(
        str(directory), dtype=torch.float32, local_files_only=True
    ).eval()
    ids = np.random.default_rng(seed).integers(0, config.vocab_size, size=(2, seq_len))
    with torch.no_grad():
        hf_logits = hf_model(torch.tensor(ids)).logits.numpy()
        eos = hf_model.generation_config.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos)
        prompt = ids[0, : seq_len // 2].tolist()
        hf_tokens = hf_model.generate(
            torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False, pad_token_id=eos_ids[0]
        )[0].tolist()
    ours = np.asarray(_logits(model, jnp.asarray(ids, jnp.int32)))
    tootsie_tokens = greedy_tokens(model, prompt, new_tokens, eos_ids)
    return {
        "max_abs_logit_diff": float(np.max(np.abs(ours - hf_logits))),
        "greedy_match": tootsie_tokens == hf_tokens,
        "greedy_tokens": len(tootsie_tokens) - len(prompt),
        "hf_class": type(hf_model).__name__,
    }
