"""Microannealing: short anneals branched from one checkpoint, one per candidate data source, ranked by BPB.

Design (Marin 8B retrospective, "Interlude: Microannealing"): to decide what
goes into a cooldown, branch short linear-decay anneals from a pretraining
checkpoint. The control anneals on 70 % pretraining / 30 % FLAN-like data;
each candidate takes half of the FLAN share, 70 / 15 / 15 (pretraining /
FLAN-like / candidate), the mix the retrospective reports best. Every branch
warm-starts from the same base (weights only, steps counted from 0), anneals
with the same linear schedule, and is repeated over data-order seeds; the
spread across seeds is the noise a candidate's gain must clear. Each branch's
final checkpoint is scored on the held-out domains with the BPB evaluation
(`tootsie.eval.bpb_step`: `domain_bpb` and `summarize`, the code of the
in-loop eval and of `tootsie eval bpb-suite`), and `microanneal_rank` writes
the ranking against the control, `figure.png` and `results.json`.

Steps, for a spec named "microanneal" with candidates a, b and seeds 0, 1:

    microanneal/control/seed-0, .../seed-1      anneal on {pretraining: 0.7, flan: 0.3}
    microanneal/a/seed-0, microanneal/a/seed-1  anneal on {pretraining: 0.7, flan: 0.15, a: 0.15}
    microanneal/b/seed-*                        the same for b
    microanneal/<branch>/seed-*/bpb             held-out BPB of each anneal's final checkpoint
    microanneal/<branch>/seed-*/tasks           benchmark tasks of it (only with `task_suite`)
    microanneal/ranking                         results.json and figure.png
"""

from dataclasses import dataclass
from typing import Any

from tootsie.configfile import to_plain
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.eval.bpb_step import BPB_FILE, EvalBPBConfig, evaluate_bpb
from tootsie.executor import Step, StepRef
from tootsie.models.llama import LlamaConfig
from tootsie.recipes.components import train_phase
from tootsie.recipes.microanneal.rank import RankConfig, rank_microanneal
from tootsie.recipes.microanneal.tasks import TASKS_FILE, BranchTasksConfig, branch_tasks
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.schedule import LinearScheduleConfig

CONTROL = "control"
"""Branch name of the control anneal (no candidate)."""
PRETRAINING, FLAN = "pretraining", "flan"
"""Mixture component names of the two shared sources."""
CONTROL_WEIGHTS = {PRETRAINING: 0.7, FLAN: 0.3}
"""The control mix: 70 % pretraining / 30 % FLAN-like (Marin 8B microannealing)."""
CANDIDATE_WEIGHTS = (0.7, 0.15, 0.15)
"""Pretraining / FLAN-like / candidate shares of a candidate branch (Marin 8B: best reported 70/15/15)."""

PathOrRef = str | StepRef


@dataclass(frozen=True)
class MicroannealSpec:
    """The base, the sources, the held-out domains and the anneal every branch runs."""

    base: PathOrRef
    """Base checkpoint, or a training output directory (its newest checkpoint)."""
    model: LlamaConfig
    """Architecture of the base."""
    pretraining: PathOrRef
    """Token cache of the pretraining mix."""
    flan: PathOrRef
    """Token cache of the FLAN-like (instruction) data."""
    candidates: dict[str, PathOrRef]
    """Candidate name → its token cache."""
    heldout: dict[str, PathOrRef]
    """Held-out domain name → token cache (the same tokenizer)."""
    tokenizer: PathOrRef
    """The tokenizer.json of every cache (for byte counts)."""
    name: str = "microanneal"
    """Prefix of every step name."""
    seq_len: int = 64
    """Tokens per sequence."""
    batch_size: int = 16
    """Sequences per step."""
    steps: int = 60
    """Steps of each anneal."""
    peak_lr: float = 1e-3
    """Learning rate after the warmup; the linear decay then goes to zero."""
    warmup_steps: int = 5
    """Steps of the linear warmup."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Data-order seeds: each branch runs once per seed (the noise bars)."""
    eval_sequences: int | None = 64
    """Held-out sequences per domain; None for all."""
    noise_sigmas: float = 2.0
    """A candidate beats the control when its BPB gain exceeds this many standard errors."""
    compute_dtype: str = "float32"
    """Forward/backward dtype."""
    task_suite: str | None = None
    """Benchmarks each branch runs too (`tootsie eval suite`: a suite or "arc_easy,piqa"); None for none."""
    task_data_dir: str | None = None
    """Local copies of the task files (`tootsie eval mirror`); needed with task_suite."""
    task_limit: int | None = 50
    """Documents per task."""

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("candidates is empty; name at least one candidate component and its token cache")
        clash = sorted(set(self.candidates) & {CONTROL, PRETRAINING, FLAN})
        if clash:
            raise ValueError(f"candidate names {clash} are reserved; rename them")
        if not self.heldout:
            raise ValueError("heldout is empty; name at least one held-out domain cache")
        if len(set(self.seeds)) != len(self.seeds) or not self.seeds:
            raise ValueError(f"seeds must be distinct and non-empty, got {self.seeds}")
        if (self.task_suite is None) != (self.task_data_dir is None):
            raise ValueError(f"task_suite and task_data_dir go together, got {self.task_suite=}, {self.task_data_dir=}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ValueError(f"need 0 <= warmup_steps < steps, got {self.warmup_steps=}, {self.steps=}")


def branch_weights(candidate: str | None) -> dict[str, float]:
    """The mixture of one branch: the control's 70/30, or 70/15/15 with the candidate."""
    if candidate is None:
        return dict(CONTROL_WEIGHTS)
    return dict(zip((PRETRAINING, FLAN, candidate), CANDIDATE_WEIGHTS, strict=True))


def branch_config(spec: MicroannealSpec, candidate: str | None, seed: int) -> TrainConfig:
    """The anneal of one branch and seed: warm start from the base, linear decay to zero, seeded data order."""
    caches = {PRETRAINING: spec.pretraining, FLAN: spec.flan}
    if candidate is not None:
        caches[candidate] = spec.candidates[candidate]
    return TrainConfig(
        model=spec.model,
        data=MixtureConfig(
            caches=caches,
            stages=(MixtureStage(0, branch_weights(candidate)),),
            seq_len=spec.seq_len,
            batch_schedule=BatchSchedule.constant(spec.batch_size),
            seed=seed,
        ),
        num_steps=spec.steps,
        schedule=LinearScheduleConfig(
            peak_lr=spec.peak_lr, warmup_steps=spec.warmup_steps, total_steps=spec.steps, min_lr_ratio=0.0
        ),
        ema=None,
        compute_dtype=spec.compute_dtype,
        warm_start=WarmStartConfig(spec.base, load_optimizer=False, reset_step=True),
        checkpoints=CheckpointConfig(every_steps=spec.steps, every_minutes=None),
    )


def branches(spec: MicroannealSpec) -> dict[str, str | None]:
    """Branch name → its candidate (None for the control), control first."""
    return {CONTROL: None} | {name: name for name in sorted(spec.candidates)}


def microanneal_steps(spec: MicroannealSpec) -> dict[str, Any]:
    """The anneal, evaluation and ranking steps.

    `{"train": {(branch, seed): step}, "bpb": {...}, "tasks": {...} (empty without a task suite), "ranking": step}`.
    """
    train, bpb, tasks = {}, {}, {}
    for branch, candidate in branches(spec).items():
        for seed in spec.seeds:
            run = Step(
                f"{spec.name}/{branch}/seed-{seed}",
                train_phase,
                branch_config(spec, candidate, seed),
                description=f"anneal {branch} (seed {seed}) on {branch_weights(candidate)}",
            )
            train[branch, seed] = run
            bpb[branch, seed] = Step(
                f"{spec.name}/{branch}/seed-{seed}/bpb",
                evaluate_bpb,
                EvalBPBConfig(
                    model=spec.model,
                    checkpoints={"final": run.ref()},
                    heldout=dict(spec.heldout),
                    tokenizer=spec.tokenizer,
                    seq_len=spec.seq_len,
                    max_sequences=spec.eval_sequences,
                    ema=False,
                ),
                description=f"held-out BPB of {branch} seed {seed}",
            )
            if spec.task_suite is not None and spec.task_data_dir is not None:
                tasks[branch, seed] = Step(
                    f"{spec.name}/{branch}/seed-{seed}/tasks",
                    branch_tasks,
                    BranchTasksConfig(
                        checkpoint=run.ref(),
                        tokenizer=spec.tokenizer,
                        suite=spec.task_suite,
                        data_dir=spec.task_data_dir,
                        limit=spec.task_limit,
                        max_length=spec.seq_len,
                    ),
                    description=f"{spec.task_suite} tasks of {branch} seed {seed}",
                )
    ranking = Step(
        f"{spec.name}/ranking",
        rank_microanneal,
        RankConfig(
            bpb={
                branch: {str(seed): bpb[branch, seed].ref(BPB_FILE) for seed in spec.seeds} for branch in branches(spec)
            },
            tasks={
                branch: {str(seed): tasks[branch, seed].ref(TASKS_FILE) for seed in spec.seeds}
                for branch in branches(spec)
                if tasks
            },
            control=CONTROL,
            noise_sigmas=spec.noise_sigmas,
            weights={branch: branch_weights(candidate) for branch, candidate in branches(spec).items()},
        ),
        description="ranking against the control with seed noise: results.json, figure.png",
    )
    return {"train": train, "bpb": bpb, "tasks": tasks, "ranking": ranking}


def _where(value: PathOrRef) -> str:
    return (
        f"step {value.step.name}" + (f"/{value.subpath}" if value.subpath else "")
        if isinstance(value, StepRef)
        else value
    )


def microanneal_plan(spec: MicroannealSpec) -> dict[str, Any]:
    """The JSON plan: every branch's mixture, seeds, warm start, schedule, tokens, and the held-out domains."""
    tokens = spec.steps * spec.batch_size * spec.seq_len
    control = branch_config(spec, None, spec.seeds[0])
    warm_start = control.warm_start
    assert warm_start is not None
    return {
        "microanneal": {
            "name": spec.name,
            "base": _where(spec.base),
            "warm_start": {"load_optimizer": warm_start.load_optimizer, "reset_step": warm_start.reset_step},
            "schedule": to_plain(control.schedule),
            "steps": spec.steps,
            "tokens_per_branch": tokens,
            "seeds": list(spec.seeds),
            "branches": [
                {
                    "name": branch,
                    "candidate": candidate,
                    "weights": branch_weights(candidate),
                    "runs": [f"{spec.name}/{branch}/seed-{seed}" for seed in spec.seeds],
                }
                for branch, candidate in branches(spec).items()
            ],
            "sources": {
                PRETRAINING: _where(spec.pretraining),
                FLAN: _where(spec.flan),
                **{name: _where(path) for name, path in sorted(spec.candidates.items())},
            },
            "heldout": {name: _where(path) for name, path in sorted(spec.heldout.items())},
            "train_runs": len(branches(spec)) * len(spec.seeds),
            "noise_sigmas": spec.noise_sigmas,
            "tasks": None if spec.task_suite is None else {"suite": spec.task_suite, "limit": spec.task_limit},
        }
    }
