"""Named model shapes: the seeds' 8B and 32B runs and small ones for CPU work.

Numbers come from the retrospectives (`seeds/marin-32b-retrospective.md`
architecture tables; the 8B model card) and the Llama 3 tokenizer's vocabulary
of 128,256 ids. `PRESETS[name]` is the registry; `tiny` is the CPU benchmark
shape of issue 5 (8.4 M parameters with vocab 8192). `PresetName`, the
`Literal` of its names, types every field that names a preset (a recipe
phase's `model`), so a misspelt name is refused with the list of presets.
"""

from tootsie.configfile import names_literal
from tootsie.models.llama import Llama3RopeScaling, LlamaConfig

LLAMA3_VOCAB = 128_256

PRESETS: dict[str, LlamaConfig] = {
    "tiny": LlamaConfig(
        vocab_size=8192, hidden_dim=256, intermediate_dim=1024, num_layers=4, num_heads=4, num_kv_heads=4
    ),
    "demo": LlamaConfig(
        vocab_size=4096, hidden_dim=128, intermediate_dim=512, num_layers=4, num_heads=4, num_kv_heads=2
    ),
    "125m": LlamaConfig(
        vocab_size=LLAMA3_VOCAB,
        hidden_dim=768,
        intermediate_dim=2688,
        num_layers=12,
        num_heads=12,
        num_kv_heads=12,
        rope_theta=500_000.0,
    ),
    "1b": LlamaConfig(
        vocab_size=LLAMA3_VOCAB,
        hidden_dim=2048,
        intermediate_dim=7168,
        num_layers=16,
        num_heads=16,
        num_kv_heads=8,
        rope_theta=500_000.0,
    ),
    # Marin 8B (Llama 3 8B shape): 4096 / 14336 / 32 layers / 32 heads / 8 KV heads.
    "marin-8b": LlamaConfig(
        vocab_size=LLAMA3_VOCAB,
        hidden_dim=4096,
        intermediate_dim=14336,
        num_layers=32,
        num_heads=32,
        num_kv_heads=8,
        rope_theta=500_000.0,
    ),
    "marin-8b-llama3-rope": LlamaConfig(
        vocab_size=LLAMA3_VOCAB,
        hidden_dim=4096,
        intermediate_dim=14336,
        num_layers=32,
        num_heads=32,
        num_kv_heads=8,
        rope_theta=500_000.0,
        rope_scaling=Llama3RopeScaling(),
    ),
    # Marin 32B phases 1-2 (Llama 32B) and 3+ (Qwen3 32B: the same shape with QK-norm), retrospective tables.
    "marin-32b": LlamaConfig(
        vocab_size=LLAMA3_VOCAB,
        hidden_dim=5120,
        intermediate_dim=27648,
        num_layers=64,
        num_heads=40,
        num_kv_heads=8,
        rope_theta=500_000.0,
    ),
    "marin-32b-qk-norm": LlamaConfig(
        vocab_size=LLAMA3_VOCAB,
        hidden_dim=5120,
        intermediate_dim=27648,
        num_layers=64,
        num_heads=40,
        num_kv_heads=8,
        rope_theta=500_000.0,
        qk_norm=True,
    ),
}
PresetName = names_literal(PRESETS)
"""A preset's name: the type of a field that picks one.

A name with no options, so a `Literal`, not a `kind:` registry.
"""
