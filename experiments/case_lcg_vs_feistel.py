"""Case study: LCG vs Feistel shuffling of an ordered corpus (the 32B Bison cooldown's loss phase shift).

Steps (see `tootsie.recipes.cases.shuffle` for the mechanism and the statistics):

    tiny/...                        the tiny recipes' data: web and math token caches (shared)
    case_lcg/ordered-corpus         400k tokens of web, then 400k of math: one component stored by kind,
                                    not pre-shuffled
    case_lcg/seed                   first mixture seed whose LCG stride reads 3 bands N/3 apart that sweep 1-3 times
    case_lcg/train-linear           300 steps with the linear (LCG) permutation
    case_lcg/train-feistel          the same with the Feistel permutation (the Mantis fix)
    case_lcg/analysis               figure.png + results.json: batch composition, R² of train loss on eval BPB
    case_lcg/report                 report.html of both arms

    tootsie run experiments/case_lcg_vs_feistel.py
"""

from tootsie.executor import Step
from tootsie.recipes.cases.common import CASE_MODEL, mixture
from tootsie.recipes.cases.shuffle import (
    ORDERED,
    SEED_FILE,
    SeededTrainConfig,
    SeedSearchConfig,
    ShuffleAnalysisConfig,
    analyze_shuffle,
    find_poor_lcg_seed,
    train_with_found_seed,
)
from tootsie.recipes.tiny.data import ConcatCachesConfig, concatenate_caches, tiny_data_steps
from tootsie.report.run_summary import RunSummaryConfig, summarize_runs
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig

REGIONS = ("web", "math")
TOKENS_EACH = 400_000
"""Equal halves: three bands N/3 apart then hold one or two bands of each kind, so the math share swings 1/3 <-> 2/3."""
TRAIN_STEPS = 300
EVAL_EVERY = 10
PERMUTATIONS = ("linear", "feistel")


def build_steps(train_steps: int = TRAIN_STEPS, eval_every: int = EVAL_EVERY) -> list[Step]:
    """The case study's steps for runs of `train_steps` steps (tests build a shorter one)."""
    data = tiny_data_steps()
    ordered = Step(
        "case_lcg/ordered-corpus",
        concatenate_caches,
        ConcatCachesConfig(tuple(data.train[kind] for kind in REGIONS), tokens_each=TOKENS_EACH),
    )
    seed = Step("case_lcg/seed", find_poor_lcg_seed, SeedSearchConfig(cache=ordered.ref(), steps=train_steps, bands=3))
    arms = {}
    for permutation in PERMUTATIONS:
        train = TrainConfig(
            model=CASE_MODEL,
            data=mixture({ORDERED: ordered.ref()}, {ORDERED: 1.0}, permutation=permutation),
            num_steps=train_steps,
            optimizer=AdamWConfig(weight_decay=0.1),
            schedule=WSDConfig(peak_lr=3e-3, warmup_steps=20, decay_steps=0, total_steps=train_steps),
            ema=None,
            eval=InLoopEvalConfig(
                heldout={kind: data.heldout[kind] for kind in REGIONS},
                tokenizer=data.tokenizer,
                every_steps=eval_every,
                max_sequences=16,
            ),
            checkpoints=CheckpointConfig(every_steps=train_steps),
        )
        arms[permutation] = Step(
            f"case_lcg/train-{permutation}", train_with_found_seed, SeededTrainConfig(train, seed.ref(SEED_FILE))
        )
    runs = {permutation: step.ref() for permutation, step in arms.items()}
    analysis = Step(
        "case_lcg/analysis",
        analyze_shuffle,
        ShuffleAnalysisConfig(
            runs=runs, cache=ordered.ref(), seed_file=seed.ref(SEED_FILE), regions=REGIONS, steps=train_steps
        ),
    )
    figures = {"Case study: LCG vs Feistel on an ordered corpus": analysis.ref("figure.png")}
    return [analysis, Step("case_lcg/report", summarize_runs, RunSummaryConfig(runs=runs, figures=figures))]


STEPS = build_steps()
