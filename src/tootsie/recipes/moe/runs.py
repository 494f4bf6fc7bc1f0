"""The MoE experiments' training runs: one tiny MoE shape, its matched dense baseline, and a shared step per arm.

Every run trains on the tiny recipes' data (`recipes.tiny.data`: web,
reference, code, math and qa text, one fixed mixture) with the same optimizer,
schedule and token budget, and ends with a held-out bits-per-byte evaluation
of every kind (`eval/bpb/macro_avg` in the last record of metrics.jsonl). A
seed sets both the initialization and the data order, and is shared by the
arms, so seed s of every arm reads the same batches.

Runs are named by what they are, not by the experiment that asks for them:
`moe_exp/<arm>/seed<s>`, e.g. `moe_exp/moe-e96-cf4-lb0.01/seed0`. The three
experiment files share runs through those names, so the executor trains each
once: the capacity ablation's cf 4 runs are the MoE arm of MoE vs dense
(cf 4 = E/k gives every expert room for all of a batch's tokens, which is
dropless), and its cf 1 runs are the load-balancing experiment's aux-on arm.

Example: `moe_model(96)` has 8 experts of width 96, k = 2; its active MLP is
2 × 96 = 192 wide, so `matched_dense(moe_model(96))` is the tiny case-study
Llama (width 192): 229,696 parameters against the MoE's 230,720 active
(the same plus 2 layers × 64 × 8 router weights) and 451,904 in all.
"""

from dataclasses import dataclass

from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.recipes.cases.common import CASE_BATCH, mixture
from tootsie.recipes.tiny.data import TINY_VOCAB, TinyData
from tootsie.recipes.tiny.scale import TINY_SEQ_LEN, TINY_SHAPE
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig

NUM_EXPERTS, EXPERTS_PER_TOKEN = 8, 2
WEIGHTS = {"web": 0.4, "code": 0.2, "reference": 0.1, "math": 0.15, "qa": 0.15}
"""The fixed mixture of every run (the tiny kinds)."""
TOKENS_PER_STEP = CASE_BATCH * TINY_SEQ_LEN
EVAL_SEQUENCES = 64
"""Held-out sequences per kind in the final evaluation (the same ones in every run)."""


@dataclass(frozen=True)
class RunSettings:
    """What every run of an experiment shares: its length and learning-rate schedule."""

    num_steps: int = 400
    """Training steps (of TOKENS_PER_STEP tokens)."""
    peak_lr: float = 3e-3
    """Learning rate of the stable phase."""
    warmup_steps: int = 20
    """Linear warmup steps."""
    decay_fraction: float = 0.2
    """Share of the steps in the final linear decay (WSD)."""

    def __post_init__(self) -> None:
        if self.num_steps <= self.warmup_steps:
            raise ValueError(f"num_steps must exceed warmup_steps, got {self.num_steps=}, {self.warmup_steps=}")
        if not 0 <= self.decay_fraction < 1:
            raise ValueError(f"decay_fraction must be in [0, 1), got {self.decay_fraction}")


SETTINGS = RunSettings()
"""The experiments' runs: 400 steps of 1,024 tokens."""
EXPERT_DIM = 96
"""Expert width of the experiments' MoE: 2 × 96 = 192, the tiny case-study Llama's MLP."""
SEEDS = (0, 1, 2)


def moe_model(expert_dim: int, capacity_factor: float | None = 4.0, load_balancing_weight: float = 0.01) -> MoeConfig:
    """The tiny MoE: the tiny recipes' attention shape, 8 experts `expert_dim` wide, k = 2, float32 on CPU."""
    shape = {**TINY_SHAPE, "intermediate_dim": expert_dim}
    return MoeConfig(
        vocab_size=TINY_VOCAB,
        **shape,
        num_experts=NUM_EXPERTS,
        experts_per_token=EXPERTS_PER_TOKEN,
        capacity_factor=capacity_factor,
        load_balancing_weight=load_balancing_weight,
    )


def matched_dense(moe: MoeConfig) -> LlamaConfig:
    """The dense baseline at the MoE's active parameters: same attention and depth, MLP k × expert width wide."""
    return moe.dense_config(moe.num_layers)


def arm_name(model: LlamaConfig) -> str:
    """The run-name part of a model: `dense-f192`, or `moe-e96-cf4-lb0.01` (cf `none` when dropless)."""
    if not isinstance(model, MoeConfig):
        return f"dense-f{model.intermediate_dim}"
    cf = "none" if model.capacity_factor is None else f"{model.capacity_factor:g}"
    return f"moe-e{model.intermediate_dim}-cf{cf}-lb{model.load_balancing_weight:g}"


def train_step(model: LlamaConfig, seed: int, data: TinyData, settings: RunSettings) -> Step[TrainConfig]:
    """The run `moe_exp/<arm>/seed<seed>`: `model` trained on the fixed mixture, then scored on held-out text."""
    steps = settings.num_steps
    config = TrainConfig(
        model=model,
        data=mixture({kind: data.train[kind] for kind in WEIGHTS}, WEIGHTS, seed=seed),
        num_steps=steps,
        optimizer=AdamWConfig(weight_decay=0.1),
        schedule=WSDConfig(
            peak_lr=settings.peak_lr,
            warmup_steps=settings.warmup_steps,
            decay_steps=int(steps * settings.decay_fraction),
            total_steps=steps,
        ),
        ema=None,
        seed=seed,
        eval=InLoopEvalConfig(
            heldout=dict(data.heldout), tokenizer=data.tokenizer, every_steps=steps, max_sequences=EVAL_SEQUENCES
        ),
        checkpoints=CheckpointConfig(every_steps=steps),
    )
    return Step(f"moe_exp/{arm_name(model)}/seed{seed}", run_training, config)


def seed_runs(
    model: LlamaConfig, seeds: tuple[int, ...], data: TinyData, settings: RunSettings
) -> tuple[Step[TrainConfig], ...]:
    """One run of `model` per seed."""
    return tuple(train_step(model, seed, data, settings) for seed in seeds)
