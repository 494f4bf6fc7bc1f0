"""The Marin 32B run as a recipe: phase 1 (Llama), phase 3 (QK-norm), the Bison and Mantis cooldowns.

Every number comes from `tootsie.recipes.marin.tables_32b` (each with its seed
source); this file only says which phase uses which. Steps, each warm-started
from the one before (global steps; tokens at seq 4096):

    marin_32b/phase1a   0 → 56,400        Llama 32B, pretraining mix, batch 8192/7680/8192, AdamW 7e-4, grad clip 1.0
    marin_32b/phase1b   56,400 → 72,233   grad clip tightened to 0.2
    marin_32b/phase1c   72,233 → 74,000   + update clipping (rolling 128, 2σ) and skip bad steps
    marin_32b/phase1d   74,000 → 80,000   update clipping accidentally off (as recorded)      phase 1: 2.679T
    marin_32b/phase3    80,000 → 160,000  warm start into QK-norm, 1,000-step re-warm        phase 3: 2.684T
    marin_32b/bison     160k → 192k       Bison mix, linear decay, AdamC, linear permutation (abandoned)
    marin_32b/mantis    160k → 192k       Mantis mix (+ StackV2 Python at ~174k), Feistel    phase 4: 1.074T

The released model is Mantis: `total_tokens` = phase 1 + 3 + Mantis = 6.437T.

    tootsie run experiments/marin_32b.py --dry-run --json     # the plan; runs nothing
    TOOTSIE_COMPONENTS=components.json tootsie run experiments/marin_32b.py

`build_steps(scale)` builds the same phases at another `Scale`; `STEPS` and
`PLAN` are the full-scale ones. Component token caches come from the file
named by $TOOTSIE_COMPONENTS (see docs/recipes.md).
"""

from tootsie.recipes.experiment_file import RecipeExperiment
from tootsie.recipes.marin import tables_32b as t
from tootsie.recipes.mix_table import mix_stage
from tootsie.recipes.recipe import Phase, Recipe
from tootsie.recipes.tiny.scale import tiny_scale
from tootsie.train.ema import EMAConfig
from tootsie.train.optimizer import AdamCConfig, AdamWConfig
from tootsie.train.schedule import RewarmConfig, WSDConfig
from tootsie.train.stability import StabilityConfig

EMA = EMAConfig(beta=t.EMA_BETA)
PRETRAIN_SCHEDULE = WSDConfig(
    peak_lr=t.PEAK_LR,
    warmup_steps=round(t.WARMUP_FRACTION * t.PLANNED_STEPS),
    decay_steps=round(t.DECAY_FRACTION * t.PLANNED_STEPS),
    total_steps=t.PLANNED_STEPS,
)
QK_NORM_SCHEDULE = RewarmConfig(
    cycles=(t.PHASE1_END, t.REWARM_CYCLE_END),
    peak_lrs=(t.PEAK_LR,),
    warmup_steps=PRETRAIN_SCHEDULE.warmup_steps,
    rewarmup_steps=t.REWARMUP_STEPS,
    rewarm_from="zero",
    decay_steps=0,
)
COOLDOWN_SCHEDULE = WSDConfig(
    peak_lr=t.PEAK_LR,
    warmup_steps=0,
    decay_steps=t.COOLDOWN_END - t.PHASE3_END,
    total_steps=t.COOLDOWN_END,
    min_lr_ratio=t.COOLDOWN_MIN_LR_RATIO,
)
NO_GUARDS = StabilityConfig(clip_update_window=None, skip_bad_steps=False)
ALL_GUARDS = StabilityConfig(
    clip_update_window=t.UPDATE_CLIP_WINDOW,
    clip_update_sigma=t.UPDATE_CLIP_SIGMA,
    skip_bad_steps=True,
    skip_window=t.SKIP_WINDOW,
    skip_sigma=t.SKIP_SIGMA,
)
SKIP_ONLY = StabilityConfig(
    clip_update_window=None, skip_bad_steps=True, skip_window=t.SKIP_WINDOW, skip_sigma=t.SKIP_SIGMA
)
ADAMW = AdamWConfig(weight_decay=t.WEIGHT_DECAY, max_grad_norm=t.GRAD_CLIP)
PHASE1_SHARED = dict(
    retro_phase="phase1",
    model="marin-32b",
    schedule=PRETRAIN_SCHEDULE,
    ema=EMA,
    z_loss_weight=t.Z_LOSS,
    permutation="linear",
)
COOLDOWN = dict(
    start_step=t.PHASE3_END,
    end_step=t.COOLDOWN_END,
    model="marin-32b-qk-norm",
    schedule=COOLDOWN_SCHEDULE,
    optimizer=AdamCConfig(weight_decay=t.WEIGHT_DECAY, max_grad_norm=t.GRAD_CLIP),
    stability=ALL_GUARDS,
    ema=EMA,
    z_loss_weight=t.Z_LOSS,
    parent="phase3",
)

RECIPE = Recipe(
    name="marin_32b",
    seq_len=t.SEQ_LEN,
    final="mantis",
    notes=t.NOTES,
    phases=(
        Phase(
            name="phase1a",
            start_step=0,
            end_step=t.GRAD_CLIP_TIGHTENED_AT,
            **PHASE1_SHARED,
            optimizer=AdamWConfig(weight_decay=t.WEIGHT_DECAY, max_grad_norm=t.GRAD_CLIP_BEFORE),
            stability=NO_GUARDS,
            mixture=(mix_stage(0, t.PRETRAINING_MIX),),
            batch_sizes=t.BATCH_SCHEDULE,
            note="exp1295_32b: Llama 32B, Nemotron-CC pretraining mix, AdamW 7e-4, grad clip 1.0",
        ),
        Phase(
            name="phase1b",
            start_step=t.GRAD_CLIP_TIGHTENED_AT,
            end_step=t.UPDATE_CLIP_FROM,
            **PHASE1_SHARED,
            optimizer=ADAMW,
            stability=NO_GUARDS,
            parent="phase1a",
            note="max grad norm tightened 1.0 -> 0.2 at ~56.4k",
        ),
        Phase(
            name="phase1c",
            start_step=t.UPDATE_CLIP_FROM,
            end_step=t.UPDATE_CLIP_OFF_FROM,
            **PHASE1_SHARED,
            optimizer=ADAMW,
            stability=ALL_GUARDS,
            parent="phase1b",
            note="update-norm clipping (rolling 128, 2 sigma) and skip bad steps from 72,233",
        ),
        Phase(
            name="phase1d",
            start_step=t.UPDATE_CLIP_OFF_FROM,
            end_step=t.PHASE1_END,
            **PHASE1_SHARED,
            optimizer=ADAMW,
            stability=SKIP_ONLY,
            parent="phase1c",
            note="update clipping accidentally off ~74k-80k (issue #1390), as recorded",
        ),
        Phase(
            name="phase3",
            retro_phase="phase3",
            start_step=t.PHASE1_END,
            end_step=t.PHASE3_END,
            model="marin-32b-qk-norm",
            schedule=QK_NORM_SCHEDULE,
            optimizer=ADAMW,
            stability=ALL_GUARDS,
            ema=EMA,
            z_loss_weight=t.Z_LOSS,
            permutation="linear",
            parent="phase1d",
            add_qk_norm=True,
            note=(
                "exp1395_qwen3_32b: warm start from the 80k Llama checkpoint into QK-norm, 1,000-step re-warm, LR held"
            ),
        ),
        Phase(
            name="bison",
            retro_phase="bison",
            **COOLDOWN,
            permutation="linear",
            mixture=(mix_stage(t.PHASE3_END, t.BISON_MIX),),
            note="exp1529_32b_bison_cooldown (abandoned): GSM8K-contaminated Dolmino math, LCG phase shift near 190k",
        ),
        Phase(
            name="mantis",
            retro_phase="mantis",
            **COOLDOWN,
            permutation="feistel",
            mixture=(mix_stage(t.PHASE3_END, t.MANTIS_MIX), mix_stage(t.STACKV2_PYTHON_FROM, t.MANTIS_STACKV2_MIX)),
            note="exp1529_32b_mantis_cooldown (released): Feistel shuffle, MegaMath, StackV2 Python from ~174k",
        ),
    ),
)

TINY = tiny_scale(step_factor=1 / 400, batch_factor=1 / 256)
"""`--scale tiny`: the same phases for real on a CPU, on local-text components (docs/recipes.md, "Tiny scale")."""
TINY_EVAL_EVERY = 20
"""Held-out bits-per-byte every this many steps at tiny scale."""
EXPERIMENT = RecipeExperiment(RECIPE, tiny=TINY, tiny_eval_every=TINY_EVAL_EVERY)
build_steps, plan = EXPERIMENT.build_steps, EXPERIMENT.plan
SCALE, STEPS, PLAN = EXPERIMENT.selected()
