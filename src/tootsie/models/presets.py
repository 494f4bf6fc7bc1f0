"""Named model shapes: the seeds' 8B and 32B runs and small ones for CPU work.

Numbers come from the retrospectives (`seeds/marin-32b-retrospective.md`
architecture tables; the 8B model card) and the Llama 3 tokenizer's vocabulary
of 128,256 ids. `PRESETS[name]` is the registry; `tiny` is the CPU benchmark
shape of issue 5 (8.4 M parameters with vocab 8192). `PresetName`, the
`Literal` of its names, types every field that names a preset (a recipe
phase's `model`), so a misspelt name is refused with the list of presets.
"""

import dataclasses

from tootsie.configfile import names_literal
from tootsie.models.llama import Llama3RopeScaling, LlamaConfig

LLAMA3_VOCAB = 128_256


def _llama3_shape(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int) -> LlamaConfig:
    """A decoder with the Llama 3 vocabulary and RoPE base (5e5), the shape every large preset shares."""
    # LlamaConfig's first six fields, in order: vocab, hidden, intermediate, layers, heads, KV heads.
    return LlamaConfig(LLAMA3_VOCAB, hidden, intermediate, layers, heads, kv_heads, rope_theta=500_000.0)


# Marin 8B (Llama 3 8B shape): 4096 / 14336 / 32 layers / 32 heads / 8 KV heads.
_MARIN_8B = _llama3_shape(4096, 14336, 32, 32, 8)
# Marin 32B phases 1-2 (Llama 32B) and 3+ (Qwen3 32B: the same shape with QK-norm), retrospective tables.
_MARIN_32B = _llama3_shape(5120, 27648, 64, 40, 8)

PRESETS: dict[str, LlamaConfig] = {
    "tiny": LlamaConfig(
        vocab_size=8192, hidden_dim=256, intermediate_dim=1024, num_layers=4, num_heads=4, num_kv_heads=4
    ),
    "demo": LlamaConfig(
        vocab_size=4096, hidden_dim=128, intermediate_dim=512, num_layers=4, num_heads=4, num_kv_heads=2
    ),
    "125m": _llama3_shape(768, 2688, 12, 12, 12),
    "1b": _llama3_shape(2048, 7168, 16, 16, 8),
    "marin-8b": _MARIN_8B,
    "marin-8b-llama3-rope": dataclasses.replace(_MARIN_8B, rope_scaling=Llama3RopeScaling()),
    "marin-32b": _MARIN_32B,
    "marin-32b-qk-norm": dataclasses.replace(_MARIN_32B, qk_norm=True),
}
PresetName = names_literal(PRESETS)
"""A preset's name: the type of a field that picks one.

A name with no options, so a `Literal`, not a `kind:` registry.
"""
