"""The RL demo: a small model SFT'd to the arithmetic answer format, then RLOO on the arithmetic task.

Steps (all through the executor, so a second run skips what is done):

    rl/arithmetic-docs              train-split word problems as documents: the prompt, then the answer
                                    format (`rl.arithmetic_task.answer_text`: the steps, then `#### N`)
    rl/tokenizer                    a byte-level BPE tokenizer trained on them
    rl/arithmetic-tokenized         their token cache
    rl/sft                          the starting policy: a small Llama trained on the cache (next token)
    rl/sft-teacher                  (distillation only) a model trained longer on the same cache

`rl_example` returns an `RLConfig` warm-started from `rl/sft`: RLOO with a k2
KL penalty to the SFT model, G completions per prompt at temperature 1 (of
four times the prompts an update trains: the groups with a nonzero advantage
go first), a KL bound, and the held-out exact-match evaluation.
`tootsie rl example-config` prints it, `tootsie rl --config rl.yaml --out DIR`
(or `tootsie train`) runs it and `tootsie rl evaluate` gives exact match
before and after with a bootstrap interval. With `distill=True` the
objective is on-policy distillation from `rl/sft-teacher` instead (sampling
only the prompts it trains: its advantages are all 0).

The arithmetic documents and the RL prompts are disjoint from the held-out
split (`rl.arithmetic_task.split_of`): the RL prompts are train tasks from
index `sft_problems` on, which the SFT step never saw either.
"""

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tootsie.corpora.arithmetic import prompt
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.data.source import SuppliedRows
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TOKENIZER_FILE, TokenizerTrainConfig, train_tokenizer
from tootsie.demos.stdlib_demo import INLINE
from tootsie.errors import TootsieError
from tootsie.eval.training import run_training
from tootsie.executor import Step, failure_summary, run_experiment
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig
from tootsie.rl.arithmetic_task import ArithmeticTaskConfig, answer_text, arithmetic_problem
from tootsie.rl.config import RLConfig, RLEvaluation, RLSettings
from tootsie.rl.environments import RewardConfig
from tootsie.rl.rollout import RolloutConfig
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.policy_loss import KLConfig
from tootsie.train.rl_objectives import DistillObjective, GRPOObjective, RLOOObjective
from tootsie.train.schedule import WSDConfig

DOCS_FILE = "docs-00000.parquet"


@dataclass(frozen=True)
class ArithmeticDocsConfig:
    """Which train-split word problems become SFT documents."""

    task: ArithmeticTaskConfig
    """The task's seed and split."""
    problems: int
    """Train problems 0 .. problems − 1."""


def write_arithmetic_docs(config: ArithmeticDocsConfig, output_path: str) -> dict[str, int]:
    """Step: `docs-00000.parquet` with `id` and `text` = the problem's prompt, a space, its answer format."""
    problems = [arithmetic_problem(config.task, "train", i) for i in range(config.problems)]
    texts = [f"{prompt(p.question)} {answer_text(p)}" for p in problems]
    table = pa.table({"id": [f"arithmetic/train/{config.task.seed}/{i}" for i in range(len(texts))], "text": texts})
    write_table_atomic(table, Path(output_path) / DOCS_FILE)
    stats = {"documents": len(texts)}
    write_json_atomic(Path(output_path) / "stats.json", stats)
    return stats


@dataclass(frozen=True)
class RLDemoSettings:
    """Sizes of the RL demo: the SFT stage, the policy, and the RL run."""

    sft_problems: int = 20_000
    """Train problems in the SFT documents (the RL prompts start after them)."""
    vocab_size: int = 512
    """BPE vocabulary (the task's few hundred words)."""
    split_digits: bool = True
    """One token per digit, so arithmetic is learned digit by digit (numbers as whole tokens are facts to memorize,
    and what RL teaches about one pair of numbers then does not carry over to another)."""
    hidden_dim: int = 128
    """The policy's width."""
    num_layers: int = 4
    """The policy's depth."""
    sft_steps: int = 900
    """SFT steps (batch 32 × 128 tokens). Measured on the 2-core machine (greedy held-out exact match, 400 tasks):
    600 steps 0.125, 900 steps 0.58, 1,500 steps 0.85; at 900 the format is learned and the arithmetic half so,
    where RL has right and wrong completions of most prompts to learn from."""
    teacher_hidden_dim: int = 128
    """The distillation teacher's width (the student's: the teacher is the same model trained longer)."""
    teacher_steps: int = 1500
    """The teacher's SFT steps."""
    iterations: int = 100
    """RL iterations. Measured (docs/rl.md): with these defaults 100 raise held-out exact match at T = 1 by 0.152
    in 9 minutes on 2 cores (another sampling seed: 0.139; sampling 64 prompts and training them all: 0.098)."""
    updates_per_iteration: int = 1
    """Updates on each iteration's rollouts (more than one: PPO minibatches or epochs, where the ratio clip acts)."""
    minibatches: int = 1
    """Minibatches each iteration's rollouts are split into (one update each when it equals the updates)."""
    objective: str = "rloo"
    """The policy-gradient objective: "rloo" or "grpo"."""
    prompts: int = 64
    """Prompts trained per iteration (measured, docs/rl.md: 64 × G = 4 gained more held-out exact match than 16 × 8
    at the same learning rate: more prompts average out what an update learns that is specific to one problem)."""
    sampled_prompts: int | None = 256
    """Prompts sampled per iteration, of which the `prompts` groups with a nonzero advantage are trained first
    (`rl.prompts`; None: sample only those trained). About 60 % of groups have all 4 rewards equal, so 256 sampled
    fill 64 trained groups with informative ones; measured (docs/rl.md), 256 gained 0.152, 192 0.131, 64 0.098."""
    group_size: int = 4
    """Completions per prompt (at a reward mean near 0.5, 4 leave few groups with no right or no wrong one)."""
    rollout_rows: int = 128
    """Rows per generate call while sampling (the sampling seeds follow the chunks)."""
    max_new_tokens: int = 40
    """Token budget of a completion (the answer format takes about 15)."""
    seq_len: int = 128
    """Rows of prompt + completion (prompts are about 50 tokens)."""
    peak_lr: float = 3e-4
    """RL learning rate: the SFT's final one. Measured (docs/rl.md): at 1e-3 RLOO and distillation alike make the
    SFT'd model worse (distillation's own loss rises), from fresh Adam moments or the SFT's own: above the rate the
    SFT annealed to, the optimizer undoes its anneal."""
    decay_fraction: float = 0.3
    """The share of the RL steps that decay the learning rate linearly to a tenth (WSD), re-annealing at the end."""
    kl_coef: float = 0.05
    """Weight of the k2 KL penalty to the SFT model."""
    kl_bound: float = 0.5
    """The bound stated for `rl/kl` (nats per token)."""
    heldout_tasks: int = 400
    """Held-out tasks in the exact-match evaluation."""
    eval_temperature: float = 1.0
    """Temperature of the scored held-out completions: 1 scores the policy's own distribution (greedy is reported
    beside it)."""
    eval_samples: int = 4
    """Sampled completions per held-out task."""
    eval_every: int | None = 25
    """Log held-out exact match every this many iterations (the learning curve)."""


TINY = RLDemoSettings(
    sft_problems=400,
    vocab_size=300,
    hidden_dim=32,
    num_layers=1,
    sft_steps=8,
    teacher_hidden_dim=48,
    teacher_steps=8,
    iterations=3,
    prompts=2,
    group_size=4,
    max_new_tokens=12,
    heldout_tasks=16,
    eval_every=None,
    sampled_prompts=None,
)
"""The test size: every step runs in seconds; nothing is learned."""


def policy_model(settings: RLDemoSettings, hidden_dim: int) -> LlamaConfig:
    """A small Llama of width `hidden_dim` over the demo's vocabulary."""
    return LlamaConfig(
        vocab_size=settings.vocab_size,
        hidden_dim=hidden_dim,
        intermediate_dim=4 * hidden_dim,
        num_layers=settings.num_layers,
        num_heads=4,
        num_kv_heads=4,
    )


def sft_train_config(settings: RLDemoSettings, cache: str, model: LlamaConfig, steps: int) -> TrainConfig:
    """Next-token training on the arithmetic cache: batch 32 × 128, WSD to 3e-3, one checkpoint at the end."""
    return TrainConfig(
        model=model,
        data=MixtureConfig(
            caches={"arithmetic": cache},
            stages=(MixtureStage(0, {"arithmetic": 1.0}),),
            seq_len=128,
            batch_schedule=BatchSchedule.constant(32),
        ),
        num_steps=steps,
        optimizer=AdamWConfig(weight_decay=0.0),
        schedule=WSDConfig(peak_lr=3e-3, warmup_steps=min(20, steps // 4), decay_steps=steps // 3, total_steps=steps),
        ema=None,
        checkpoints=CheckpointConfig(every_steps=steps, every_minutes=None),
    )


def build_rl_steps(settings: RLDemoSettings, task: ArithmeticTaskConfig) -> dict[str, Step]:
    """The demo's steps by role: docs, tokenizer, cache, sft, teacher."""
    docs = Step("rl/arithmetic-docs", write_arithmetic_docs, ArithmeticDocsConfig(task, settings.sft_problems))
    tokenizer = Step(
        "rl/tokenizer",
        train_tokenizer,
        TokenizerTrainConfig(inputs=(docs.ref(),), vocab_size=settings.vocab_size, split_digits=settings.split_digits),
    )
    cache = Step(
        "rl/arithmetic-tokenized",
        tokenize_documents,
        TokenizeConfig(input=docs.ref(), tokenizer=tokenizer.ref(TOKENIZER_FILE), engine=INLINE),
    )
    student = policy_model(settings, settings.hidden_dim)
    sft = Step("rl/sft", run_training, sft_train_config(settings, cache.ref(), student, settings.sft_steps))
    teacher_model = policy_model(settings, settings.teacher_hidden_dim)
    teacher = Step(
        "rl/sft-teacher", run_training, sft_train_config(settings, cache.ref(), teacher_model, settings.teacher_steps)
    )
    return {"docs": docs, "tokenizer": tokenizer, "cache": cache, "sft": sft, "teacher": teacher}


def rl_config(
    settings: RLDemoSettings, task: ArithmeticTaskConfig, sft: str, tokenizer: str, teacher: str | None = None
) -> RLConfig:
    """RLOO (or, with `teacher`, on-policy distillation from it) warm-started from the SFT run at `sft`."""
    steps = settings.iterations * settings.updates_per_iteration
    gradient = {"rloo": RLOOObjective, "grpo": GRPOObjective}[settings.objective]
    objective = (
        gradient(clip_eps=0.2, kl=KLConfig("k2", settings.kl_coef))
        if teacher is None
        else DistillObjective(teacher=teacher)
    )
    train = TrainConfig(
        model=policy_model(settings, settings.hidden_dim),
        data=SuppliedRows(
            seq_len=settings.seq_len, batch_size=settings.prompts * settings.group_size // settings.minibatches
        ),
        num_steps=steps,
        optimizer=AdamWConfig(weight_decay=0.0),
        schedule=WSDConfig(
            peak_lr=settings.peak_lr,
            warmup_steps=min(5, steps - 1),
            decay_steps=int(steps * settings.decay_fraction),
            total_steps=steps,
        ),
        ema=None,
        objective=objective,
        warm_start=WarmStartConfig(sft, load_optimizer=False, reset_step=True),
        checkpoints=CheckpointConfig(every_steps=steps, every_minutes=None),
    )
    rl = RLSettings(
        tokenizer=tokenizer,
        environment=task,
        rollout=RolloutConfig(
            group_size=settings.group_size,
            max_new_tokens=settings.max_new_tokens,
            temperature=1.0,
            seed=0,
            batch_rows=settings.rollout_rows,
        ),
        rewards=RewardConfig(),
        updates_per_iteration=settings.updates_per_iteration,
        minibatches=settings.minibatches,
        prompts=settings.sampled_prompts if teacher is None else None,
        kl_bound=settings.kl_bound,
        evaluation=RLEvaluation(
            heldout_tasks=settings.heldout_tasks,
            temperature=settings.eval_temperature,
            samples=settings.eval_samples,
            every_iterations=settings.eval_every,
        ),
        first_task=settings.sft_problems,
    )
    return RLConfig(train=train, rl=rl)


def rl_example(prefix: str, settings: RLDemoSettings, *, distill: bool = False) -> RLConfig:
    """Build the SFT'd starting policy (and the teacher, for distillation) under `prefix`; the RL config over it."""
    task = ArithmeticTaskConfig(seed=0)
    steps = build_rl_steps(settings, task)
    wanted = [steps["sft"], *([steps["teacher"]] if distill else [])]
    report = run_experiment(wanted, prefix)
    if not report.ok:
        raise TootsieError(f"building the RL demo's starting policy failed: {failure_summary(report)}")
    paths = {step.name: step.output_path for step in report.steps}
    tokenizer = f"{paths[steps['tokenizer'].name]}/{TOKENIZER_FILE}"
    teacher = paths[steps["teacher"].name] if distill else None
    return rl_config(settings, task, paths[steps["sft"].name], tokenizer, teacher)
