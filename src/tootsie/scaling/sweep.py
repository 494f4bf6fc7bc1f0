"""Isoflop sweep plans: for each compute budget, model shapes and the tokens that spend exactly that budget.

A plan is pure arithmetic (no training): every (budget, width) pair (and
batch size, β₂ and seed, where the sweep varies them) gets the recipe of
`scaling.heuristic.Heuristic`: the width rule's shape (experts when `moe` is
set), its parameter counts, a learning rate, Adam's β's, and the number of
steps whose training FLOPs match the budget, either the exact count
(`flops_rule="exact"`: `LlamaConfig.flops_per_token`, with the LM head and
attention) or Chinchilla's `6·N·D` (`"6nd"`), N being the parameters a token
passes through (an MoE's active ones; `shapes.count_params`), on the basis
`flops_basis` names (all FLOPs, or the seeds' non-embedding ones). Every
count is written for every run, so any can be checked. Pairs that would train
for fewer than `min_steps` steps are listed under `skipped` with the reason,
never dropped. A dense sweep keeps AdamW's default β's unless `beta1` and
`beta2` are given; `tootsie scaling sweep --moe` sets both to the heuristic's.

Example: budget 1e12, width 64 with `WidthRule.tiny()` and vocab 4096 is 2
layers, 655,680 parameters (embeddings included), 2.46 MFLOP per token at seq
128, so 199 steps of 16 × 128 = 407,552 tokens.

`sweep_steps.py` turns a plan into executor steps; `tootsie scaling sweep`
prints or writes it as JSON, which `load_plan` reads back.
"""

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from tootsie.configfile import from_plain, to_plain
from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json
from tootsie.models.llama import LlamaConfig
from tootsie.scaling.heuristic import FLOPS_RULES, Beta2Rule, FlopsBasis, Heuristic, MoeShape, Recipe
from tootsie.scaling.shapes import WidthRule, count_params


@dataclass(frozen=True)
class SweepConfig:
    """Budgets, widths and the training recipe of an isoflop sweep."""

    budgets: tuple[float, ...]
    """Training compute budgets in FLOPs, e.g. (1e12, 2e12, 4e12)."""
    widths: tuple[int, ...]
    """Hidden widths to try at every budget (or the candidates `window` picks from)."""
    window: int | None = None
    """Per budget, only this many consecutive widths, centred where tokens/params is closest to `tokens_per_param`.

    None: all widths.
    """
    tokens_per_param: float = 20.0
    """Centre of the `window` (Chinchilla's ~20 tokens per parameter)."""
    vocab_size: int = 4096
    """Vocabulary of the tokenizer the runs train with."""
    seq_len: int = 128
    """Tokens per sequence."""
    batch_size: int = 16
    """Sequences per step (constant across the sweep, unless `batch_sizes` lists several)."""
    batch_sizes: tuple[int, ...] = ()
    """A batch-size sweep: every (budget, width) pair at each of these batches (names end `-b<B>`)."""
    moe: MoeShape | None = None
    """Experts per block (None: dense models)."""
    beta1: float | None = None
    """Adam β₁ (None: AdamW's default; `--moe` uses the heuristic's 0.9062)."""
    beta2: Beta2Rule | None = None
    """β₂ from the batch by the seeds' rule (None: AdamW's default; `--moe` uses the rule at base 0.998)."""
    beta2_values: tuple[float, ...] = ()
    """A β₂ sweep: every run at each of these β₂ instead of the rule's (names end `-beta2-<v>`)."""
    rule: WidthRule = field(default_factory=WidthRule)
    """Depth, heads and MLP width from the width."""
    flops_rule: str = "exact"
    """How tokens are sized to the budget: 'exact' (flops_per_token) or '6nd' (6 × params × tokens)."""
    flops_basis: FlopsBasis = "all"
    """Which FLOPs a budget counts: 'all' (tootsie) or 'non_embedding' (the seeds: no LM head)."""
    include_embeddings: bool = True
    """Count embedding parameters in `params` (Chinchilla/Marin) or not (Kaplan)."""
    min_steps: int = 50
    """Pairs that would train fewer steps than this are skipped (and listed)."""
    lr_constant: float = 0.33
    """lr = lr_constant · sqrt(batch_size) / width (Marin's scaling recipe)."""
    max_lr: float = 0.01
    """Cap on the learning rate (Marin's recipe: 0.01)."""
    warmup_fraction: float = 0.1
    """Warmup steps as a fraction of the run (Marin: 0.1)."""
    decay_fraction: float = 0.2
    """Linear decay steps at the end as a fraction of the run (Marin: 0.2)."""
    weight_decay: float = 0.1
    """AdamW weight decay (Marin: 0.1)."""
    divergence_loss_factor: float = 1.1
    """A run has diverged once its loss stays above this multiple of ln(vocab_size) (10 % worse than a uniform
    guess, which every run beats within its first steps) for `divergence_patience` steps, or once a loss is
    NaN/inf; it is then infeasible, not a failure."""
    divergence_patience: int = 3
    """Steps in a row above the divergence loss that mean diverged (so one bad batch is not a divergence)."""
    seeds: tuple[int, ...] = (0,)
    """Initialization and data-order seeds: every pair is trained once per seed (repeats measure run-to-run noise)."""

    def __post_init__(self) -> None:
        if not self.budgets or any(not (b > 0 and math.isfinite(b)) for b in self.budgets):
            raise ValueError(f"budgets must be positive finite FLOP counts, got {self.budgets}")
        if len(set(self.budgets)) != len(self.budgets):
            raise ValueError(f"budgets has duplicates: {self.budgets}")
        if not self.widths or len(set(self.widths)) != len(self.widths):
            raise ValueError(f"widths must be non-empty and distinct, got {self.widths}")
        for width in self.widths:
            self.rule.model(width, self.vocab_size)
        if self.window is not None and not 1 <= self.window <= len(self.widths):
            raise ValueError(f"window={self.window} must be between 1 and the number of widths ({len(self.widths)})")
        if self.flops_rule not in FLOPS_RULES:
            raise ValueError(f"flops_rule={self.flops_rule!r} must be one of {FLOPS_RULES}")
        for name in ("tokens_per_param", "lr_constant", "max_lr"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("vocab_size", "seq_len", "batch_size", "min_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("batch_sizes", "beta2_values"):
            values = getattr(self, name)
            if len(set(values)) != len(values) or any(not 0 < v for v in values):
                raise ValueError(f"{name} must be distinct positive values, got {values}")
        if any(not v < 1 for v in self.beta2_values):
            raise ValueError(f"beta2_values must be below 1, got {self.beta2_values}")
        if not (self.divergence_loss_factor > 0 and self.divergence_patience >= 1):
            raise ValueError(
                f"need divergence_loss_factor > 0 and divergence_patience >= 1, got "
                f"{self.divergence_loss_factor}, {self.divergence_patience}"
            )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be non-empty and distinct, got {self.seeds}")
        if not (
            0 <= self.warmup_fraction and 0 <= self.decay_fraction and self.warmup_fraction + self.decay_fraction <= 1
        ):
            raise ValueError(
                "need warmup_fraction, decay_fraction >= 0 with a sum <= 1, "
                f"got {self.warmup_fraction=}, {self.decay_fraction=}"
            )
        self.heuristic()

    def heuristic(self) -> Heuristic:
        """The budget → recipe heuristic these settings describe."""
        return Heuristic(
            rule=self.rule,
            vocab_size=self.vocab_size,
            seq_len=self.seq_len,
            moe=self.moe,
            batch_size=self.batch_size,
            lr_constant=self.lr_constant,
            max_lr=self.max_lr,
            beta1=self.beta1,
            beta2=self.beta2,
            weight_decay=self.weight_decay,
            warmup_fraction=self.warmup_fraction,
            decay_fraction=self.decay_fraction,
            flops_rule=self.flops_rule,
            flops_basis=self.flops_basis,
        )


@dataclass(frozen=True)
class PlannedRun:
    """One training run of the sweep."""

    name: str
    """`<budget>-d<width>`, e.g. '1e12-d64', then `-b<batch>` and `-beta2-<v>` in batch and β₂ sweeps, and
    `-s<seed>` for seeds other than 0."""
    budget: float
    """The compute budget this run belongs to (its `compute` in the fit)."""
    width: int
    """Hidden width."""
    model: LlamaConfig
    """The full shape."""
    params: int
    """Parameters a token passes through (an MoE's active ones), counted as the sweep's `include_embeddings` says."""
    params_total: int
    """Every parameter, every expert's included (what memory holds), counted the same way."""
    params_non_embedding: int
    """Active parameters without the input and output embeddings."""
    tokens: int
    """Training tokens (steps × batch_size × seq_len)."""
    steps: int
    """Training steps."""
    batch_size: int
    """Sequences per step."""
    flops: float
    """Exact training FLOPs of these tokens (flops_per_token × tokens), every matmul counted."""
    flops_non_embedding: float
    """The same without the LM head: the seeds' basis."""
    flops_6nd: float
    """6 × params × tokens (active params: an MoE's compute)."""
    learning_rate: float
    """Peak learning rate."""
    beta1: float | None
    """Adam β₁ (None: AdamW's default)."""
    beta2: float | None
    """Adam β₂ (None: AdamW's default)."""
    warmup_steps: int
    """Steps of linear warmup."""
    decay_steps: int
    """Steps of linear decay to zero at the end."""
    seed: int = 0
    """Seed of the initialization and of the data order."""


@dataclass(frozen=True)
class SkippedRun:
    """A (budget, width) pair the plan leaves out, and why."""

    budget: float
    width: int
    reason: str


@dataclass(frozen=True)
class SweepPlan:
    """Every run of a sweep, and every pair left out."""

    config: SweepConfig
    runs: tuple[PlannedRun, ...]
    skipped: tuple[SkippedRun, ...]


def budget_label(budget: float) -> str:
    """A compact step-name-safe label: 1e12 → '1e12', 2.5e11 → '2.5e11'."""
    mantissa, exponent = f"{budget:.3e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def _windowed(config: SweepConfig, budget: float) -> tuple[int, ...]:
    """The widths used at `budget`: all, or the `window` consecutive ones around tokens/params = tokens_per_param."""
    widths = tuple(sorted(config.widths))
    if config.window is None:
        return widths
    heuristic = config.heuristic()
    ratios = []
    for width in widths:
        model = heuristic.model(width)
        params = count_params(model, config.include_embeddings, active=True)
        ratios.append(abs(math.log(budget / heuristic.flops_per_token(model) / params / config.tokens_per_param)))
    centre = min(range(len(widths)), key=ratios.__getitem__)
    start = min(max(0, centre - config.window // 2), len(widths) - config.window)
    return widths[start : start + config.window]


def _planned(config: SweepConfig, recipe: Recipe, name: str, seed: int) -> PlannedRun:
    """One run of the plan from its recipe."""
    model = recipe.model
    params = count_params(model, config.include_embeddings, active=True)
    return PlannedRun(
        name=name + (f"-s{seed}" if seed else ""),
        budget=recipe.budget,
        width=model.hidden_dim,
        model=model,
        params=params,
        params_total=count_params(model, config.include_embeddings),
        params_non_embedding=count_params(model, include_embeddings=False, active=True),
        tokens=recipe.tokens,
        steps=recipe.steps,
        batch_size=recipe.batch_size,
        flops=recipe.flops,
        flops_non_embedding=recipe.flops_non_embedding,
        flops_6nd=6.0 * params * recipe.tokens,
        learning_rate=recipe.learning_rate,
        beta1=recipe.beta1,
        beta2=recipe.beta2,
        warmup_steps=recipe.warmup_steps,
        decay_steps=recipe.decay_steps,
        seed=seed,
    )


def plan_sweep(config: SweepConfig) -> SweepPlan:
    """The runs of an isoflop sweep: shapes, steps, learning rates and β's for every budget and width."""
    runs, skipped = [], []
    heuristic = config.heuristic()
    batches = config.batch_sizes or (config.batch_size,)
    betas = config.beta2_values or (None,)
    for budget in sorted(config.budgets):
        for width in _windowed(config, budget):
            for batch in batches:
                recipe = heuristic.recipe(budget, width, batch)
                name = f"{budget_label(budget)}-d{width}" + (f"-b{batch}" if config.batch_sizes else "")
                if recipe.steps < config.min_steps:
                    skipped.append(
                        SkippedRun(
                            budget,
                            width,
                            f"{recipe.steps} steps < min_steps={config.min_steps} at batch {batch}; "
                            "a larger budget or a smaller width or batch",
                        )
                    )
                    continue
                for beta2 in betas:
                    tuned = recipe if beta2 is None else replace(recipe, beta2=beta2)
                    label = name if beta2 is None else f"{name}-beta2-{beta2:g}"
                    runs.extend(_planned(config, tuned, label, seed) for seed in config.seeds)
    return SweepPlan(config, tuple(runs), tuple(skipped))


def plan_to_json(plan: SweepPlan) -> dict[str, object]:
    """The plan as plain JSON data: its config, its runs and its skipped pairs."""
    return {
        "config": to_plain(plan.config),
        "runs": [to_plain(run) for run in plan.runs],
        "skipped": [to_plain(s) for s in plan.skipped],
    }


def load_plan(path: str | Path) -> SweepPlan:
    """Read a plan written by `tootsie scaling sweep --out`, re-planned from its config and checked against its runs."""
    payload = read_json(path)
    if payload is None or "config" not in payload:
        raise TootsieError(
            f"{path} is not a sweep plan (no 'config' key); write one with `tootsie scaling sweep --out PLAN.json`"
        )
    plan = plan_sweep(from_plain(SweepConfig, payload["config"], f"{Path(path).name}:config"))
    if plan_to_json(plan)["runs"] != payload.get("runs"):
        raise TootsieError(
            f"{path}: its runs differ from what its config plans (edited by hand, or "
            "written by another tootsie version); rewrite it with `tootsie scaling sweep`"
        )
    return plan
