"""Every number of the Marin 32B run, encoded once, each with its source in `seeds/`.

RETRO = `seeds/marin-32b-retrospective.md`; OUTLINE = `seeds/paper-outline-marin-8b-32b.md`;
CURVES = `seeds/reading-training-curves.md`. Numbers the seeds do not give are
marked "NOT IN SEEDS" with the choice made and why; `NOTES` repeats them for
the plan. Tests compare the tables with the seed text.
"""

from tootsie.recipes.mix_table import MixRow, MixTable, rows, with_added

SEQ_LEN = 4096
"""Tokens per sequence (RETRO, Architecture: `seq_len` 4096)."""

BATCH_SCHEDULE = ((0, 8192), (18_500, 7680), (21_010, 8192))
"""(start step, global batch in sequences) (RETRO, Data Mix & Batch Schedule: "Batch schedule (seq_len = 4096)")."""

# Steps (RETRO, Training Phases; OUTLINE §4 phase table).
PHASE1_END = 80_000
"""Phase 1 (Llama 32B): steps 0 → 80k, ≈2.679T tokens (RETRO, Phase 1 "Tokens trained")."""
GRAD_CLIP_TIGHTENED_AT = 56_400
"""max_grad_norm 1.0 → 0.2 "around 56.4k steps" (OUTLINE §6.4.3.2; CURVES, Mitigations)."""
UPDATE_CLIP_FROM = 72_233
"""Update-norm clipping (and skip bad steps) added at 72,233 (OUTLINE §6.4.3.2; CURVES Panel 3 "same window")."""
UPDATE_CLIP_OFF_FROM = 74_000
"""Update clipping "briefly off ~74k–80k": an accident, kept as recorded.

Source: RETRO, Optimizer & Schedule table; issue #1390 per OUTLINE.
"""
PHASE3_END = 160_000
"""Phase 3 (QK-norm): warm start at 80k, trained to 160k, ≈2.684T tokens (RETRO, Phase 3)."""
COOLDOWN_END = 192_000
"""Phase 4 cooldowns (Bison, Mantis): 160k → 192k, 32,000 steps, ≈1.074T tokens each (RETRO, Phase 4)."""
STACKV2_PYTHON_FROM = 174_000
"""Mantis adds StackV2 Python "around 174k" (RETRO, Attempt 2 — Mantis Cooldown, Notes)."""

# Optimizer (RETRO, Optimizer & Schedule: "Baseline (exp1295_32b) hyperparameters").
PEAK_LR = 7e-4
"""Peak LR (RETRO, baseline table); also the cooldowns' starting LR (phase 3 holds the peak after its re-warmup)."""
WARMUP_FRACTION = 0.01
"""Warmup 1 % of steps (RETRO, baseline table)."""
DECAY_FRACTION = 0.40
"""Decay 40 % of steps (RETRO, baseline table)."""
PLANNED_STEPS = 192_000
"""NOT IN SEEDS: the step count the 1 % / 40 % refer to. Chosen: the run's final length (192k), giving a 1,920-step
warmup and a decay from 115,200 that phase 1 never reaches (any plan of >= 133,334 steps gives phase 1 the same
warmup-then-hold shape)."""
WEIGHT_DECAY = 0.05
"""Weight decay (RETRO, baseline table)."""
GRAD_CLIP_BEFORE = 1.0
"""max_grad_norm before ~56.4k (OUTLINE §6.4.3.2: "tighten max grad norm from 1.0 → 0.2")."""
GRAD_CLIP = 0.2
"""max_grad_norm from ~56.4k on (RETRO, baseline table: 0.2)."""
UPDATE_CLIP_WINDOW = 128
"""Update-norm clipping history (RETRO, baseline table: rolling=128)."""
UPDATE_CLIP_SIGMA = 2.0
"""Update-norm clipping threshold mean + 2σ (RETRO, baseline table: σ=2.0)."""
SKIP_WINDOW = 128
"""Skip-bad-steps history (OUTLINE §6.4.3.2: "add skip bad steps (2-sigma, rolling 128)")."""
SKIP_SIGMA = 2.0
"""Skip-bad-steps threshold (OUTLINE §6.4.3.2)."""
EMA_BETA = 0.995
"""EMA beta (RETRO, baseline table)."""
Z_LOSS = 1e-4
"""z-loss weight (RETRO, baseline table; Bison "Z-loss throughout")."""
REWARMUP_STEPS = 1000
"""Phase 3 re-warmup (RETRO, "Warm-start + rewarm parameters": Re-warmup 1,000 steps; cycles [80k, 1,000,000,000])."""
REWARM_CYCLE_END = 1_000_000_000
"""The second cycle's end (RETRO, same table): never reached, so the LR holds after the re-warmup."""
COOLDOWN_MIN_LR_RATIO = 0.01
"""NOT IN SEEDS: the cooldowns' final LR. Chosen: 1 % of the peak (7e-6), because Bison "mirrored our Starling-style
cooldown" (RETRO, Phase 4) and Starling decayed 1.7e-3 → 1.7e-5 (OUTLINE §6.4.2.7)."""
STACKV2_PYTHON_PERCENT = 1.59
"""NOT IN SEEDS: StackV2 Python's share after ~174k. Chosen: starcoderdata's share (1.59 %), taken out of the
high-quality (non-Nemotron) part, which is renormalized so Nemotron-CC keeps its 68.07 % (RETRO: "re-normalized the
HQ portion accordingly")."""

# RETRO, Data Mix & Batch Schedule: "Pretraining mixture (normalized share)"
# (also 8B Phoenix: "Mirrors our 8B Phoenix data mix").
PRETRAINING_MIX = MixTable(
    name="32b-pretraining",
    source="marin-32b-retrospective.md, Data Mix & Batch Schedule, 'Pretraining mixture (normalized share)'",
    rows=rows(
        ("nemotron_cc/medium", 30.69),
        ("nemotron_cc/hq_synth", 24.70),
        ("nemotron_cc/medium_low", 13.98),
        ("nemotron_cc/hq_actual", 8.30),
        ("nemotron_cc/medium_high", 7.49),
        ("nemotron_cc/low_actual", 6.37),
        ("nemotron_cc/low_synth", 5.70),
        ("starcoderdata", 2.27),
        ("proofpile_2", 0.50),
    ),
)

NEMOTRON_COOLDOWN_ROWS = rows(
    ("nemotron_cc/medium", 21.49),
    ("nemotron_cc/hq_synth", 17.29),
    ("nemotron_cc/medium_low", 9.79),
    ("nemotron_cc/hq_actual", 5.81),
    ("nemotron_cc/medium_high", 5.24),
    ("nemotron_cc/low_actual", 4.46),
    ("nemotron_cc/low_synth", 3.99),
)
"""The Nemotron-CC rows shared by the Bison and Mantis tables (68.07 % together)."""

# RETRO, Attempt 1 — Bison Cooldown: "Cooldown mixture (normalized share)" (sums to 100.02 % as printed).
BISON_MIX = MixTable(
    name="bison",
    source="marin-32b-retrospective.md, Phase 4, Attempt 1 — Bison Cooldown, 'Cooldown mixture (normalized share)'",
    rows=NEMOTRON_COOLDOWN_ROWS
    + rows(
        ("arxiv_markdownified", 7.41),
        ("dolmino/pes2o", 7.41),
        ("finemath-3-plus", 4.33),
        ("dolmino/flan", 4.33),
        ("stackexchange_custom", 2.18),
        ("dolmino/stackexchange", 2.18),
        ("starcoderdata", 1.59),
        ("all_math", 1.08),
        ("proofpile_2", 0.35),
        ("wikipedia_markdown", 0.47),
        ("dolmino/wiki", 0.47),
        ("medu_science_qa", 0.15),
    ),
)

# RETRO, Attempt 2 — Mantis Cooldown: "Cooldown mixture (normalized share)" (sums to 100.04 % as printed).
MANTIS_MIX = MixTable(
    name="mantis",
    source="marin-32b-retrospective.md, Phase 4, Attempt 2 — Mantis Cooldown, 'Cooldown mixture (normalized share)'",
    rows=NEMOTRON_COOLDOWN_ROWS
    + rows(
        ("megamath/web", 5.57),
        ("arxiv_markdownified", 4.54),
        ("megamath/text_code_block", 4.24),
        ("dolmino/pes2o", 4.54),
        ("megamath/web_pro", 1.27),
        ("megamath/translated_code", 0.61),
        ("megamath/qa", 0.59),
        ("finemath-3-plus", 2.66),
        ("dolmino/flan", 2.66),
        ("stackexchange_custom", 1.34),
        ("dolmino/stackexchange", 1.34),
        ("starcoderdata", 1.59),
        ("proofpile_2", 0.35),
        ("wikipedia_markdown", 0.29),
        ("dolmino/wiki", 0.29),
        ("medu_science_qa", 0.09),
    ),
)

# Derived: RETRO, Mantis Notes ("At ~174k steps, we introduced common_pile_stackv2_edu_filtered_python and
# re-normalized the HQ portion accordingly"); the share is STACKV2_PYTHON_PERCENT (NOT IN SEEDS).
MANTIS_STACKV2_MIX = with_added(
    MANTIS_MIX,
    name="mantis+stackv2-python",
    source=(
        "derived: Mantis table + common_pile_stackv2_edu_filtered_python "
        "at ~174k, HQ part renormalized (share not in seeds: 1.59 %)"
    ),
    added=(
        MixRow(
            "common_pile_stackv2_edu_filtered_python", "common_pile_stackv2_edu_filtered_python", STACKV2_PYTHON_PERCENT
        ),
    ),
    rescale=[row.component for row in MANTIS_MIX.rows if not row.component.startswith("nemotron_cc/")],
)

NOTES = (
    (
        "Phase 1 warmup/decay fractions refer to a planned length "
        "the seeds do not give; 192,000 steps assumed (warmup 1,920)."
    ),
    "Bison/Mantis final LR not in seeds; 1% of 7e-4 assumed (Starling-style).",
    "Phase 3 re-warmup start not in seeds; from 0 assumed (rewarm_from='zero').",
    "StackV2 Python share after ~174k not in seeds; 1.59% assumed, HQ part renormalized.",
    "Update clipping 'briefly off ~74k-80k' is kept as recorded (phase1d); the boundary 74,000 is approximate.",
)
"""Caveats shown in the plan: numbers not in the seeds and approximations."""
