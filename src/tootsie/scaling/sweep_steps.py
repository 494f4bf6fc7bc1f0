"""A sweep plan as executor steps: train each run, score it on held-out data, collect the runs for the fit.

Per planned run there are two steps, `<prefix>/train/<run>` (the trainer, one
final checkpoint, no EMA, and the sweep's divergence rule: a run that diverges
stops and says so in `diverged.json` instead of failing the step) and
`<prefix>/eval/<run>`, which writes `run.json` with the run's `compute`,
`params` (active), `params_total`, `tokens`, `batch_size`, `beta2` and final
held-out `loss`: the
macro average over held-out domains of the next-token loss in nats per token
(Marin's "macro loss"), with bits-per-byte alongside, and the training
output it scored by its name relative to the prefix (`portable`:
`<prefix>/train/<run>-<hash>`), so the same run under another prefix gives
the same `run.json`, holding no clock time (`preregister.training_start`
reads when training started from that output's executor metadata). A
diverged run's `run.json` has `"feasible": false`, its `reason` and a null
loss: the fit lists it as infeasible and goes on without it.
`<prefix>/runs` gathers every `run.json` into `runs.jsonl`, the input of
`tootsie scaling fit`.
Because every step is content-addressed, adding a budget to a plan reruns only
the new runs.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.tokenizer import load_tokenizer
from tootsie.eval.bpb import domain_bpb
from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.executor.portable import portable
from tootsie.executor.step import StepRef
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.models.registry import ModelChoice
from tootsie.scaling.runs import RUN_FILE, RUNS_FILE
from tootsie.scaling.sweep import PlannedRun, SweepPlan
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.divergence import DivergenceConfig, read_divergence
from tootsie.train.loading import load_model
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig


@dataclass(frozen=True)
class RunEvalConfig:
    """Score one trained sweep run on held-out caches and record it for the fit."""

    name: str
    """The planned run's name."""
    compute: float
    """Its budget in FLOPs."""
    params: int
    """Its active parameter count (as the plan counts them)."""
    tokens: int
    """Its training tokens."""
    flops: float
    """Its exact training FLOPs."""
    model: ModelChoice
    """Its shape."""
    checkpoint: str | StepRef
    """Its training output directory."""
    heldout: dict[str, str | StepRef]
    """Domain → held-out token cache."""
    tokenizer: str | StepRef
    """The caches' tokenizer.json (for bytes per token)."""
    seq_len: int = 128
    """Tokens per evaluated sequence."""
    max_sequences: int | None = None
    """Sequences per domain; None for the whole held-out cache."""
    params_total: int | None = None
    """Every parameter (an MoE's experts all counted)."""
    batch_size: int | None = None
    """Sequences per step (the batch-size fit's input)."""
    beta2: float | None = None
    """Its Adam β₂ (None: AdamW's default)."""
    flops_non_embedding: float | None = None
    """Its training FLOPs without the LM head (the seeds' basis)."""


@dataclass(frozen=True)
class CollectRunsConfig:
    """Gather run records into one JSONL file."""

    runs: tuple[str | StepRef, ...]
    """`run.json` files."""


def _described(config: RunEvalConfig) -> dict[str, object]:
    """The planned run's fields of its `run.json` (those that are set)."""
    record = {
        "name": config.name,
        "compute": config.compute,
        "params": config.params,
        "params_total": config.params_total,
        "tokens": config.tokens,
        "batch_size": config.batch_size,
        "beta2": config.beta2,
        "flops": config.flops,
        "flops_non_embedding": config.flops_non_embedding,
        "width": config.model.hidden_dim,
        "num_layers": config.model.num_layers,
        "checkpoint": portable(str(config.checkpoint)),
    }
    return {key: value for key, value in record.items() if value is not None}


def evaluate_run(config: RunEvalConfig, output_path: str) -> dict[str, object]:
    """Write `run.json`: compute, params, tokens and the final held-out macro loss (nats/token).

    It also holds BPB per domain and the training output's portable name. A run
    that diverged (`diverged.json`) is recorded as infeasible with its reason.
    """
    diverged = read_divergence(str(config.checkpoint))
    if diverged is not None:
        record = _described(config) | {"feasible": False, "reason": diverged["reason"], "loss": None}
        write_json_atomic(Path(output_path) / RUN_FILE, record)
        return record
    model = load_model(config.model, str(config.checkpoint))
    token_bytes = TokenBytes(load_tokenizer(str(config.tokenizer)))
    results = {
        name: domain_bpb(model, str(cache), token_bytes, config.seq_len, max_sequences=config.max_sequences)
        for name, cache in sorted(config.heldout.items())
    }
    loss_by_domain = {name: r.nats / max(r.tokens, 1) for name, r in results.items()}
    record = _described(config) | {
        "loss": sum(loss_by_domain.values()) / len(loss_by_domain),
        "loss_by_domain": loss_by_domain,
        "bpb_by_domain": {name: r.bpb for name, r in results.items()},
    }
    if not math.isfinite(record["loss"]):
        record["loss"] = None
    write_json_atomic(Path(output_path) / RUN_FILE, record)
    return record


def collect_runs(config: CollectRunsConfig, output_path: str) -> int:
    """Write every run record as one line of `runs.jsonl`; return how many."""
    lines = [json.dumps(read_json(path), sort_keys=True) for path in map(str, config.runs)]
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{RUNS_FILE}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(out / RUNS_FILE)
    return len(lines)


def train_config(
    run: PlannedRun, plan: SweepPlan, caches: dict[str, str | StepRef], mix: dict[str, float]
) -> TrainConfig:
    """The training config of one planned run: WSD with linear warmup and decay to zero, AdamW, one final checkpoint.

    A diverging run stops as the sweep's divergence rule says and is recorded infeasible.
    """
    config = plan.config
    data = MixtureConfig(
        caches=caches,
        stages=(MixtureStage(0, mix),),
        seq_len=config.seq_len,
        batch_schedule=BatchSchedule.constant(run.batch_size),
        seed=run.seed,
    )
    betas = {name: value for name, value in (("beta1", run.beta1), ("beta2", run.beta2)) if value is not None}
    schedule = WSDConfig(
        peak_lr=run.learning_rate,
        warmup_steps=run.warmup_steps,
        decay_steps=run.decay_steps,
        total_steps=run.steps,
        min_lr_ratio=0.0,
    )
    return TrainConfig(
        model=run.model,
        data=data,
        num_steps=run.steps,
        optimizer=AdamWConfig(weight_decay=config.weight_decay, **betas),
        schedule=schedule,
        ema=None,
        seed=run.seed,
        checkpoints=CheckpointConfig(every_steps=run.steps, every_minutes=None),
        divergence=DivergenceConfig(
            max_loss=config.divergence_loss_factor * math.log(config.vocab_size), patience=config.divergence_patience
        ),
    )


def sweep_steps(
    plan: SweepPlan,
    prefix: str,
    caches: dict[str, str | StepRef],
    mix: dict[str, float],
    heldout: dict[str, str | StepRef],
    tokenizer: str | StepRef,
    max_eval_sequences: int | None = None,
) -> Step:
    """The collect step of the whole sweep (its train and eval steps are its inputs)."""
    records = []
    for run in plan.runs:
        trained = Step(
            f"{prefix}/train/{run.name}",
            run_training,
            train_config(run, plan, caches, mix),
            description=f"isoflop run {run.name}",
        )
        scored = Step(
            f"{prefix}/eval/{run.name}",
            evaluate_run,
            RunEvalConfig(
                name=run.name,
                compute=run.budget,
                params=run.params,
                tokens=run.tokens,
                flops=run.flops,
                model=run.model,
                params_total=run.params_total,
                batch_size=run.batch_size,
                beta2=run.beta2,
                flops_non_embedding=run.flops_non_embedding,
                checkpoint=trained.ref(),
                heldout=heldout,
                tokenizer=tokenizer,
                seq_len=plan.config.seq_len,
                max_sequences=max_eval_sequences,
            ),
        )
        records.append(scored.ref(RUN_FILE))
    return Step(f"{prefix}/runs", collect_runs, CollectRunsConfig(runs=tuple(records)))
