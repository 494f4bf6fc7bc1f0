"""Budget → recipe: the model, optimizer, batch and steps that spend a compute budget at one hidden width.

Marin sizes its MoE isoflop runs with a heuristic (`launch.py`'s
`MoeAdamHHeuristic`, seeds' weekly update) that derives (model, optimizer,
batch, steps) from a compute budget and a hidden size. The seeds give only
some of its constants, and `Heuristic` marks each one:

- from the seeds: β₁ = 0.9062 (a Vizier sweep; "the decimals don't matter"),
  the β₂ rule `clip(base^(B/32), 0.95, 0.9999)` with base 0.998 (was 0.999),
  GQA 4:1, 64 experts and k = 4 (v16), the critical batch size law
  `CBS = 1.87e-5·C^0.388` (sequences of 4096 tokens: 15,536 at 1e23 is
  "63M tokens/batch"), and non-embedding FLOPs as the budget's basis;
- NOT IN SEEDS: the depth/heads rule (`WidthRule`, Marin's isoflop recipe),
  the learning rate `min(0.01, 0.33·√B/d)` (Marin's scaling recipe), the
  schedule fractions and weight decay, experts d/2 wide with two shared ones
  (Marin's 1e23 job summary, as in the `moe-1e23` preset), and the batch
  rule: an eighth of the CBS law's batch, rounded to a power of two, which
  gives the 1e23 run's 2048 sequences.

"AdamH" is named in the seeds but not defined (the 1e22 run's embedding was
"trained with AdamW rather than AdamH"). tootsie does not guess at it: the
recipe is AdamW on every parameter with the heuristic's β₁, β₂ rule and
learning rate, and says so in its output (`optimizer.name`).

The seeds' budgets count non-embedding FLOPs; tootsie's default counts all of
them (at toy scale the LM head is most of a step's work, so a non-embedding
budget would understate the compute several times). `flops_basis` picks which
one sizes the tokens, and the recipe reports both.

Example: `Heuristic(moe=MoeShape()).recipe(1e23, 5120)` is 49 layers (the
run had 48), 40 heads over 10 KV heads, 64 experts of 2560 with k = 4,
batch 2048 × 4096 tokens, β₂ = 0.95 (the floor), lr 0.0029.
"""

import math
from dataclasses import dataclass, field, fields
from typing import Literal

from tootsie.configfile import kind_of, to_plain
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.scaling.shapes import WidthRule, count_params

FlopsBasis = Literal["all", "non_embedding"]
"""Which FLOPs a budget counts: every matmul (tootsie) or all but the LM head's (the seeds)."""
FLOPS_RULES = ("exact", "6nd")


@dataclass(frozen=True)
class Beta2Rule:
    """The seeds' β₂ rule: `clip(base^(B / reference_batch), low, high)` for a batch of B sequences."""

    base: float = 0.998
    """From the seeds: the β₂ sweep moved it from 0.999 to 0.998."""
    reference_batch: int = 32
    """From the seeds: the exponent is B/32."""
    low: float = 0.95
    """From the seeds: the floor every large run hits."""
    high: float = 0.9999
    """From the seeds: the ceiling."""

    def __post_init__(self) -> None:
        if not 0 < self.low <= self.high < 1:
            raise ValueError(f"need 0 < low <= high < 1, got low={self.low}, high={self.high}")
        if not 0 < self.base < 1 or self.reference_batch <= 0:
            raise ValueError(f"need 0 < base < 1 and reference_batch > 0, got {self.base}, {self.reference_batch}")

    def __call__(self, batch_size: int) -> float:
        """β₂ for a batch of `batch_size` sequences."""
        return min(self.high, max(self.low, self.base ** (batch_size / self.reference_batch)))


@dataclass(frozen=True)
class BatchRule:
    """A batch size from the critical batch size law: `fraction · CBS(C)`, rounded to a power of two."""

    coefficient: float = 1.87e-5
    """From the seeds: CBS ≈ 1.87e-5 · C^0.388."""
    exponent: float = 0.388
    """From the seeds."""
    law_seq_len: int = 4096
    """From the seeds: the law counts sequences of 4096 tokens (15,536 at 1e23 is "63M tokens")."""
    fraction: float = 0.125
    """NOT IN SEEDS: an eighth of the critical batch, which gives the 1e23 run's 2048 sequences."""
    min_batch: int = 1
    """NOT IN SEEDS: the smallest batch the rule returns."""

    def __post_init__(self) -> None:
        if self.coefficient <= 0 or self.law_seq_len <= 0 or not 0 < self.fraction <= 1 or self.min_batch < 1:
            raise ValueError(f"BatchRule needs a positive law, 0 < fraction <= 1 and min_batch >= 1: {self}")

    def critical_tokens(self, compute: float) -> float:
        """The critical batch at `compute`, in tokens."""
        return self.coefficient * compute**self.exponent * self.law_seq_len

    def __call__(self, compute: float, seq_len: int) -> int:
        """Sequences of `seq_len` tokens per step at `compute` FLOPs."""
        sequences = self.fraction * self.critical_tokens(compute) / seq_len
        return max(self.min_batch, 2 ** round(math.log2(max(sequences, 1.0))))


@dataclass(frozen=True)
class MoeShape:
    """How a dense width-rule shape becomes a mixture of experts."""

    num_experts: int = 64
    """From the seeds: v16's 64 experts."""
    experts_per_token: int = 4
    """From the seeds: v16's k = 4."""
    expert_ratio: float = 0.5
    """NOT IN SEEDS: each expert is this fraction of the hidden width (d/2, Marin's 1e23 job summary)."""
    num_shared_experts: int = 2
    """NOT IN SEEDS: one always-on FFN d wide = 2 shared experts of d/2 (Marin's 1e23 job summary)."""
    capacity_factor: float | None = 1.0
    """From the seeds: the isoflop PR set the capacity factor back to 1.0 (None: dropless)."""
    load_balancing_weight: float = 0.01
    """NOT IN SEEDS: Grug balances with a router bias; tootsie's Switch loss weight."""
    router_z_loss_weight: float = 0.001
    """NOT IN SEEDS: tootsie's default."""

    def __post_init__(self) -> None:
        if not 1 <= self.experts_per_token <= self.num_experts:
            raise ValueError(f"need 1 <= experts_per_token <= num_experts, got {self}")
        if self.expert_ratio <= 0 or self.num_shared_experts < 0:
            raise ValueError(f"expert_ratio must be positive and num_shared_experts >= 0, got {self}")

    def model(self, dense: LlamaConfig) -> MoeConfig:
        """The MoE with `dense`'s attention and depth, every MLP replaced by experts (no leading dense layers)."""
        shared = {f.name: getattr(dense, f.name) for f in fields(LlamaConfig)}
        return MoeConfig(
            **shared | {"intermediate_dim": max(2, round(self.expert_ratio * dense.hidden_dim / 2) * 2)},
            num_experts=self.num_experts,
            experts_per_token=self.experts_per_token,
            num_shared_experts=self.num_shared_experts,
            capacity_factor=self.capacity_factor,
            load_balancing_weight=self.load_balancing_weight,
            router_z_loss_weight=self.router_z_loss_weight,
        )


@dataclass(frozen=True)
class Recipe:
    """One run: what the heuristic gives for a (budget, width) pair."""

    budget: float
    """The compute budget in FLOPs, counted on `flops_basis`."""
    model: LlamaConfig
    """The shape (a `MoeConfig` for an MoE)."""
    batch_size: int
    """Sequences per step."""
    seq_len: int
    """Tokens per sequence."""
    steps: int
    """Training steps: the whole steps whose FLOPs come closest to the budget."""
    learning_rate: float
    """Peak learning rate."""
    beta1: float | None
    """Adam β₁ (None: the optimizer's default)."""
    beta2: float | None
    """Adam β₂ from the rule at this batch (None: the optimizer's default)."""
    weight_decay: float
    """AdamW weight decay."""
    warmup_steps: int
    """Linear warmup steps."""
    decay_steps: int
    """Linear decay-to-zero steps at the end."""
    flops_basis: FlopsBasis
    """Which FLOPs `budget` counts."""
    flops: float
    """Training FLOPs of the run, every matmul counted (LM head and attention included)."""
    flops_non_embedding: float
    """The same without the LM head (the seeds' basis)."""

    @property
    def tokens(self) -> int:
        """Training tokens."""
        return self.steps * self.batch_size * self.seq_len

    def to_json(self) -> dict[str, object]:
        """The recipe as `tootsie scaling heuristic --json` prints it."""
        model = self.model
        return {
            "budget": self.budget,
            "model": {"kind": kind_of(model), **to_plain(model)},
            "optimizer": {
                "name": "adamw",
                "lr": self.learning_rate,
                "beta1": self.beta1,
                "beta2": self.beta2,
                "weight_decay": self.weight_decay,
                "warmup_steps": self.warmup_steps,
                "decay_steps": self.decay_steps,
            },
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "steps": self.steps,
            "tokens": self.tokens,
            "params_total": count_params(model),
            "params_active": count_params(model, active=True),
            "params_active_non_embedding": count_params(model, include_embeddings=False, active=True),
            "flops_basis": self.flops_basis,
            "flops": self.flops,
            "flops_non_embedding": self.flops_non_embedding,
        }


def non_embedding_flops_per_token(model: LlamaConfig, seq_len: int) -> float:
    """Training FLOPs per token without the LM head's matmul (the input embedding is a lookup, no FLOPs)."""
    return model.flops_per_token(seq_len) - 6.0 * model.vocab_size * model.hidden_dim


@dataclass(frozen=True)
class Heuristic:
    """Every choice between a (budget, width) pair and a full recipe; `recipe(budget, width)` applies them."""

    rule: WidthRule = field(default_factory=lambda: WidthRule(kv_group=4))
    """Depth and heads from the width (NOT IN SEEDS: Marin's isoflop recipe), GQA 4:1 as in the seeds' v16."""
    vocab_size: int = 128_256
    """Vocabulary (the Llama 3 tokenizer's, as the seeds' runs)."""
    seq_len: int = 4096
    """Tokens per sequence (the seeds' runs)."""
    moe: MoeShape | None = None
    """Experts, or None for a dense model."""
    batch_size: int | None = None
    """Sequences per step; None derives it from the budget (`batch_rule`)."""
    batch_rule: BatchRule = field(default_factory=BatchRule)
    """The batch from the budget when `batch_size` is None."""
    lr_constant: float = 0.33
    """NOT IN SEEDS: lr = lr_constant · sqrt(batch) / width (Marin's scaling recipe)."""
    max_lr: float = 0.01
    """NOT IN SEEDS: the learning rate cap (Marin's scaling recipe)."""
    beta1: float | None = 0.9062
    """From the seeds (the heuristic's β₁, from a Vizier sweep); None keeps AdamW's default."""
    beta2: Beta2Rule | None = field(default_factory=Beta2Rule)
    """From the seeds: β₂ from the batch size; None keeps AdamW's default."""
    weight_decay: float = 0.1
    """NOT IN SEEDS: AdamW weight decay (Marin's scaling recipe)."""
    warmup_fraction: float = 0.1
    """NOT IN SEEDS: warmup steps as a fraction of the run (Marin's scaling recipe)."""
    decay_fraction: float = 0.2
    """NOT IN SEEDS: linear decay steps at the end as a fraction of the run (Marin's scaling recipe)."""
    flops_rule: str = "exact"
    """How a token's FLOPs are counted: 'exact' (matmuls and attention) or '6nd' (6 × active parameters, both
    embeddings included on the 'all' basis, as Chinchilla counts N)."""
    flops_basis: FlopsBasis = "all"
    """Which FLOPs the budget counts: 'all' (tootsie) or 'non_embedding' (the seeds: no LM head)."""

    def __post_init__(self) -> None:
        if self.flops_rule not in FLOPS_RULES:
            raise ValueError(f"flops_rule={self.flops_rule!r} must be one of {FLOPS_RULES}")
        if self.batch_size is not None and self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        for name in ("vocab_size", "seq_len", "lr_constant", "max_lr"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.beta1 is not None and not 0 <= self.beta1 < 1:
            raise ValueError(f"beta1 must be in [0, 1), got {self.beta1}")
        if not (
            0 <= self.warmup_fraction and 0 <= self.decay_fraction and self.warmup_fraction + self.decay_fraction <= 1
        ):
            raise ValueError(f"need warmup and decay fractions >= 0 with a sum <= 1, got {self}")

    def model(self, width: int) -> LlamaConfig:
        """The shape at `width`: the width rule's, with experts when `moe` is set."""
        dense = self.rule.model(width, self.vocab_size)
        return dense if self.moe is None else self.moe.model(dense)

    def flops_per_token(self, model: LlamaConfig) -> float:
        """Training FLOPs per token on this heuristic's rule and basis (active parameters for an MoE)."""
        embeddings = self.flops_basis == "all"
        if self.flops_rule == "6nd":
            return 6.0 * count_params(model, include_embeddings=embeddings, active=True)
        if embeddings:
            return model.flops_per_token(self.seq_len)
        return non_embedding_flops_per_token(model, self.seq_len)

    def batch_for(self, budget: float) -> int:
        """Sequences per step at `budget`: the fixed batch, or the batch rule's."""
        return self.batch_size if self.batch_size is not None else self.batch_rule(budget, self.seq_len)

    def recipe(self, budget: float, width: int, batch_size: int | None = None) -> Recipe:
        """The run that spends `budget` FLOPs at `width` (at `batch_size` sequences when given)."""
        if not (math.isfinite(budget) and budget > 0):
            raise ValueError(f"the budget must be a positive number of FLOPs, got {budget}")
        model = self.model(width)
        batch = batch_size or self.batch_for(budget)
        steps = max(1, round(budget / self.flops_per_token(model) / (batch * self.seq_len)))
        warmup = round(self.warmup_fraction * steps)
        tokens = steps * batch * self.seq_len
        return Recipe(
            budget=budget,
            model=model,
            batch_size=batch,
            seq_len=self.seq_len,
            steps=steps,
            learning_rate=min(self.max_lr, self.lr_constant * math.sqrt(batch) / width),
            beta1=self.beta1,
            beta2=None if self.beta2 is None else self.beta2(batch),
            weight_decay=self.weight_decay,
            warmup_steps=warmup,
            decay_steps=min(round(self.decay_fraction * steps), steps - warmup),
            flops_basis=self.flops_basis,
            flops=model.flops_per_token(self.seq_len) * tokens,
            flops_non_embedding=non_embedding_flops_per_token(model, self.seq_len) * tokens,
        )
