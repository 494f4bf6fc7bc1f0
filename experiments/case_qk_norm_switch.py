"""Case study: a Llama run switched to QK-norm mid-run (the 32B phase 3 warm start): loss penalty and recovery.

Steps (see `tootsie.recipes.cases.qk_norm`):

    tiny/...              the tiny recipes' data (shared): web, reference, code, math, qa token caches
    case_qk/base          Llama, steps 0 → 200 on a fixed mixture, constant LR after a 20-step warmup
    case_qk/control       Llama warm-started from base, 200 → 450
    case_qk/qk-norm       warm start with add_qk_norm=True, 200 → 450 (same batches, same LR)
    case_qk/analysis      figure.png + results.json: penalty and recovery in steps and tokens
    case_qk/report        report.html of the three runs

    tootsie run experiments/case_qk_norm_switch.py
"""

from dataclasses import replace

from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.recipes.cases.common import CASE_BATCH, CASE_MODEL, mixture
from tootsie.recipes.cases.qk_norm import QKNormAnalysisConfig, analyze_qk_norm
from tootsie.recipes.tiny.data import tiny_data_steps
from tootsie.recipes.tiny.scale import TINY_SEQ_LEN
from tootsie.report.run_summary import RunSummaryConfig, summarize_runs
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig, WarmStartConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig

WEIGHTS = {"web": 0.5, "code": 0.2, "reference": 0.1, "math": 0.1, "qa": 0.1}
SWITCH_STEP = 200
TOTAL_STEPS = 450


def build_steps(switch_step: int = SWITCH_STEP, total_steps: int = TOTAL_STEPS, eval_every: int = 25) -> list[Step]:
    """The case study's steps for a switch at `switch_step` of a `total_steps` run (tests build a shorter one)."""
    data = tiny_data_steps()
    base_config = TrainConfig(
        model=CASE_MODEL,
        data=mixture({kind: data.train[kind] for kind in WEIGHTS}, WEIGHTS),
        num_steps=switch_step,
        optimizer=AdamWConfig(weight_decay=0.1),
        schedule=WSDConfig(peak_lr=3e-3, warmup_steps=20, decay_steps=0, total_steps=total_steps),
        ema=None,
        eval=InLoopEvalConfig(
            heldout=dict(data.heldout), tokenizer=data.tokenizer, every_steps=eval_every, max_sequences=16
        ),
        checkpoints=CheckpointConfig(every_steps=switch_step),
    )
    base = Step("case_qk/base", run_training, base_config)
    control = Step(
        "case_qk/control",
        run_training,
        replace(base_config, num_steps=total_steps, warm_start=WarmStartConfig(base.ref())),
    )
    qk_norm = Step(
        "case_qk/qk-norm",
        run_training,
        replace(
            base_config,
            model=replace(CASE_MODEL, qk_norm=True),
            num_steps=total_steps,
            warm_start=WarmStartConfig(base.ref(), add_qk_norm=True),
        ),
    )
    runs = {"base": base.ref(), "control": control.ref(), "qk-norm": qk_norm.ref()}
    analysis = Step(
        "case_qk/analysis",
        analyze_qk_norm,
        QKNormAnalysisConfig(runs=runs, switch_step=switch_step, tokens_per_step=CASE_BATCH * TINY_SEQ_LEN),
    )
    figures = {"Case study: the QK-norm warm start, penalty and recovery": analysis.ref("figure.png")}
    return [analysis, Step("case_qk/report", summarize_runs, RunSummaryConfig(runs=runs, figures=figures))]


STEPS = build_steps()
