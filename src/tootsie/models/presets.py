"""Named model shapes: the seeds' 8B and 32B runs and small ones for CPU work.

Numbers come from the retrospectives (`seeds/marin-32b-retrospective.md`
architecture tables; the 8B model card) and the Llama 3 tokenizer's vocabulary
of 128,256 ids. The MoE presets (`moe-1e23`, `moe-1e22`) take what the weekly
update (`seeds/marin-weekly-update.md`) gives; every other value is marked
`NOT IN SEEDS` where it is set, with where it came from. `PRESETS[name]` is
the registry; `tiny` is the CPU benchmark shape of issue 5 (8.4 M parameters
with vocab 8192). `PresetName`, the `Literal` of its names, types every field
that names a preset (a recipe phase's `model`), so a misspelt name is refused
with the list of presets.
"""

import dataclasses

from tootsie.configfile import names_literal
from tootsie.models.llama import Llama3RopeScaling, LlamaConfig
from tootsie.models.moe import MoeConfig

LLAMA3_VOCAB = 128_256


def _llama3_shape(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int) -> LlamaConfig:
    """A decoder with the Llama 3 vocabulary and RoPE base (5e5), the shape every large preset shares."""
    # LlamaConfig's first six fields, in order: vocab, hidden, intermediate, layers, heads, KV heads.
    return LlamaConfig(LLAMA3_VOCAB, hidden, intermediate, layers, heads, kv_heads, rope_theta=500_000.0)


# Marin 8B (Llama 3 8B shape): 4096 / 14336 / 32 layers / 32 heads / 8 KV heads.
_MARIN_8B = _llama3_shape(4096, 14336, 32, 32, 8)
# Marin 32B phases 1-2 (Llama 32B) and 3+ (Qwen3 32B: the same shape with QK-norm), retrospective tables.
_MARIN_32B = _llama3_shape(5120, 27648, 64, 40, 8)

# The preregistered 1e23 MoE run (weekly update): 48 layers, d5120, 40 heads, GQA 4:1, 64 experts, k = 4 (v16),
# "131B total / ~16B active", capacity factor 1.0 (Grug's default), no initial dense layer. The widths are
# Marin's public job summary of moe_1e23_d5120_bs2048_ep4_ring (MoeAdamHHeuristic: expert d/2, shared FFN d).
# Counted here: 129.05B total, 15.80B active (both embeddings; 15.14B with the LM head only), 96.9 GFLOP/token
# at seq 4096, so 1e23 FLOPs is 1.03T tokens (the seeds' ~1.02T). 129.05B is 1.5% under "131B"; the next
# 128-multiple expert width, 2688, would give 135.1B, so 2560 is kept.
_MOE_1E23 = MoeConfig(
    vocab_size=LLAMA3_VOCAB,
    hidden_dim=5120,
    intermediate_dim=2560,  # NOT IN SEEDS: each expert's width, d/2 (Marin's job summary)
    num_layers=48,
    num_heads=40,
    num_kv_heads=10,
    head_dim=128,  # NOT IN SEEDS: 5120 / 40
    rope_theta=10_000.0,  # NOT IN SEEDS: Marin's job summary (RoPE theta 1e4)
    initializer_std=0.5 / 5120**0.5,  # NOT IN SEEDS: 0.5 / sqrt(d) (Marin's job summary)
    num_experts=64,
    experts_per_token=4,
    num_shared_experts=2,  # NOT IN SEEDS: one shared FFN d wide (Marin's job summary) = 2 shared experts of d/2
    dense_layers=0,
    capacity_factor=1.0,
    router_weights="renormalized",  # NOT IN SEEDS: Grug combines with sigmoids of biased logits, not expressible
    load_balancing_weight=0.01,  # NOT IN SEEDS: Grug balances with a router bias (QB routing), not a loss
    router_z_loss_weight=0.001,  # NOT IN SEEDS: tootsie's default
)
# Also NOT IN SEEDS and left out of both presets (tootsie has no such option): Grug's sliding windows, GatedNorm,
# attention gate, XSA and qk_mult 1.3.
# The 1e22 v7 run (weekly update): d3200, "34.6B total / 4.7B active", 326B tokens, capacity factor 4.0 (the
# better of the seeds' two). Depth, heads and widths are Marin's public job summary of moe-v7-1e22-d3200, which
# the seeds' totals check: 34.58B total, 5.09B active (both embeddings; 4.68B with the LM head only, the seeds'
# 4.7B), 30.6 GFLOP/token at seq 4096, so 1e22 FLOPs is 327B tokens (the seeds' 326B).
_MOE_1E22 = dataclasses.replace(
    _MOE_1E23,
    hidden_dim=3200,
    intermediate_dim=1600,  # NOT IN SEEDS: d/2, as at 1e23
    num_layers=32,  # NOT IN SEEDS: Marin's job summary; with these widths it gives the seeds' 34.6B total
    num_heads=25,  # NOT IN SEEDS: d / 128
    num_kv_heads=25,  # NOT IN SEEDS: no GQA in v7 (25 heads have no 4:1 grouping); GQA 4:1 is v16's
    head_dim=128,  # NOT IN SEEDS
    initializer_std=0.5 / 3200**0.5,  # NOT IN SEEDS: 0.5 / sqrt(d)
    capacity_factor=4.0,
)

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
    "moe-1e23": _MOE_1E23,
    "moe-1e22": _MOE_1E22,
}
PresetName = names_literal(PRESETS)
"""A preset's name: the type of a field that picks one.

A name with no options, so a `Literal`, not a `kind:` registry.
"""
