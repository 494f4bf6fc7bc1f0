"""Width rules: one number (the hidden width) becomes a whole model shape, its parameters and its FLOPs.

An isoflop sweep varies one knob per budget, so depth, heads and MLP width must
follow from the width by a fixed rule. The rule is Marin's scaling recipe
(`marin.scaling_laws` `ScalingRecipe`): `intermediate = mlp_ratio * width`,
`heads = max(1, width // head_dim)`, and

    layers = max(1, round(width / (base + factor * log2(width) - offset)))

with Marin's constants base 64, factor 4, offset 9 and head_dim 128 for
models 512-4096 wide. `WidthRule.tiny()` keeps the formula with base 16 and
head dim 16, so 64-256 wide CPU models get 2-7 layers instead of one or two.

Example: `WidthRule.tiny().model(128, vocab_size=4096)` is 4 layers
(128 / (16 + 28 - 9) = 3.7), 8 heads of 16, MLP 512.

Parameters are counted the Chinchilla/Marin way, embeddings included (input and
output matrices), unless `include_embeddings=False`; FLOPs per token come from
`LlamaConfig.flops_per_token` (matmuls, LM head and attention, forward and
backward). For a mixture of experts the two counts differ: compute (FLOPs,
`6·N·D`, tokens per parameter) uses the active parameters, the router, k
experts and the shared ones a token passes through (`active=True`), and
memory uses the total, every expert.
"""

import math
from dataclasses import dataclass

from tootsie.models.llama import LlamaConfig


@dataclass(frozen=True)
class WidthRule:
    """How a hidden width determines depth, heads and MLP width."""

    head_dim: int = 128
    """Target width of one attention head; heads = max(1, width // head_dim) (Marin: 128)."""
    mlp_ratio: int = 4
    """MLP intermediate width as a multiple of the hidden width (Marin: 4)."""
    base: float = 64.0
    """`base` in layers = round(width / (base + factor·log2(width) − offset)) (Marin: 64)."""
    factor: float = 4.0
    """`factor` in the depth formula (Marin: 4)."""
    offset: float = 9.0
    """`offset` in the depth formula (Marin: 9, its smallest width's log2)."""
    kv_group: int = 1
    """Query heads per key/value head (1: plain multi-head attention, as in Marin's isoflop recipe)."""

    def __post_init__(self) -> None:
        for name in ("head_dim", "mlp_ratio", "kv_group"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")

    @classmethod
    def tiny(cls) -> "WidthRule":
        """Marin's rule scaled for 8-256 wide CPU models: head dim 16, depth base 16."""
        return cls(head_dim=16, base=16.0)

    @classmethod
    def tiny_gqa(cls) -> "WidthRule":
        """The tiny rule with heads 8 wide in groups of 2 per KV head, so widths from 16 up have grouped queries.

        NOT the seeds' GQA 4:1, which needs 4 query heads: 32 wide at the least, too wide for the smallest toy runs.
        """
        return cls(head_dim=8, base=16.0, kv_group=2)

    def num_layers(self, width: int) -> int:
        """Depth for `width` (at least 1)."""
        denominator = self.base + self.factor * math.log2(width) - self.offset
        if denominator <= 0:
            raise ValueError(f"depth formula denominator {denominator:.3g} <= 0 at width {width}; raise WidthRule.base")
        return max(1, round(width / denominator))

    def model(self, width: int, vocab_size: int) -> LlamaConfig:
        """The model shape for `width`: max(1, width // head_dim) heads (Marin's rule), each width / heads wide."""
        heads = max(1, width // self.head_dim)
        if width <= 0 or width % heads or heads % self.kv_group or (width // heads) % 2:
            raise ValueError(
                f"width {width} gives {heads} head(s) of {width / heads:g}: the width must split "
                f"into an even head width and the heads into groups of kv_group={self.kv_group}; "
                f"pick a multiple of {self.head_dim * self.kv_group} (or a smaller even width)"
            )
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_dim=width,
            intermediate_dim=self.mlp_ratio * width,
            num_layers=self.num_layers(width),
            num_heads=heads,
            num_kv_heads=heads // self.kv_group,
        )


WIDTH_RULES = {
    "marin": WidthRule,
    "marin-gqa4": lambda: WidthRule(kv_group=4),
    "tiny": WidthRule.tiny,
    "tiny-gqa": WidthRule.tiny_gqa,
}
"""Width rules by name (`--rule`): Marin's (MHA as its dense isoflop recipe, or GQA 4:1 as the seeds' MoE v16)
and their CPU-sized copies (`tiny-gqa`: GQA 2:1)."""


def count_params(model: LlamaConfig, include_embeddings: bool = True, active: bool = False) -> int:
    """Parameters of `model`: with embeddings (Chinchilla/Marin) or without (Kaplan); total, or `active` per token.

    Total and active differ only for an MoE: active is what compute sees, total what memory holds.
    """
    if active:
        return model.active_parameters(include_embeddings=include_embeddings)
    return model.num_parameters(include_embeddings=include_embeddings)


def flops_per_token(model: LlamaConfig, seq_len: int) -> float:
    """Training FLOPs per token (forward + backward), matmuls, LM head and causal attention included.

    An MoE's are on its active parameters (router, k experts, shared experts).
    """
    return model.flops_per_token(seq_len)
