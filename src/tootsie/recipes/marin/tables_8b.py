"""Every number of the Marin 8B run, encoded once, each with its source in `seeds/`.

OUTLINE = `seeds/paper-outline-marin-8b-32b.md` (§4 phase table, §6.3, §6.4.2);
CARD = `seeds/marin-8b-model-card.md` (Training Phases); RETRO32 =
`seeds/marin-32b-retrospective.md`. The seeds give the 8B phases in tokens;
step boundaries are derived from them (the derivation is spelled out next to
each). Numbers the seeds do not give are marked "NOT IN SEEDS" with the choice
made and why; `NOTES` repeats them for the plan.
"""

from tootsie.recipes.marin.tables_32b import PRETRAINING_MIX
from tootsie.recipes.mix_table import MixRow, MixTable, rows, with_added
from tootsie.train.schedule_cycles import spaced_cycles

SEQ_LEN = 4096
"""Tokens per sequence (OUTLINE §6.4.2.1: "4Mi tokens/step (1024 x 4096)")."""
KESTREL_BATCH = 1024
"""Kestrel: 4Mi tokens/step = 1024 sequences (OUTLINE §6.4.2.1)."""
OCELOT_BATCH = 3072
"""Ocelot, Jellyfish, Phoenix: 12Mi tokens/step = 3072 sequences (OUTLINE §4, §6.4.2.2)."""
STARLING_BATCH = 4096
"""Starling: 16Mi tokens/step = 4096 sequences (OUTLINE §4, §6.4.2.7)."""


def _steps(tokens: float, batch: int) -> int:
    """Whole steps of `batch` sequences closest to `tokens`."""
    return round(tokens / (batch * SEQ_LEN))


# Kestrel (OUTLINE §6.4.2.1; CARD "Kestrel (DCLM WSD-S Phase) ... (0->2.7T tokens)").
KESTREL_PEAK_LR = 1e-3
"""Peak LR (OUTLINE §6.4.2.1)."""
WEIGHT_DECAY = 0.05
"""Weight decay (OUTLINE §6.4.2.1); kept for every later phase (NOT IN SEEDS that it never changed)."""
GRAD_CLIP = 1.0
"""NOT IN SEEDS: the 8B max grad norm. Chosen: 1.0 (Levanter's and tootsie's default)."""
WSD_S_DECAY_FRACTION = 0.1
"""Each decay lasts 1k of 10k, then 2k of 20k steps (OUTLINE §6.4.2.1)."""
KESTREL_WARMUP = 1000
"""NOT IN SEEDS: Kestrel's warmup. Chosen: 1,000 steps (the length of the first decays)."""
WSD_S_MIN_LR_RATIO = 0.1
"""NOT IN SEEDS: the LR each WSD-S decay reaches. Chosen: 0.1 x peak (Levanter's default min_lr_ratio)."""
KESTREL_END = 660_000
"""Derived: Ocelot's batch increase came "at ~2.77T tokens" (OUTLINE §6.4.2.2): 2.77e12 / 4Mi = 660,419 steps, put on
the 20k-step WSD-S cycle grid = 660,000 steps (2.768T tokens; CARD: Kestrel 0 → 2.7T)."""
WSD_S_CYCLES = spaced_cycles((10_000, 200_000), (20_000, KESTREL_END))
"""WSD-S cycle ends: a decay every 10k steps to ~step 200k, then every 20k (OUTLINE §6.4.2.1), to Kestrel's end."""

# Ocelot (OUTLINE §6.4.2.2; CARD "Ocelot (DCLM WSD Phase): Increased batch size, using WSD. (2.7T->3.78T tokens)").
OCELOT_PEAK_LR = 1.7e-3
"""LR scaled by sqrt(3) to 1.7e-3 with the 3x batch (OUTLINE §6.4.2.2; sqrt(3) x 1e-3 = 1.73e-3, printed as 1.7e-3)."""
EMA_BETA = 0.995
"""EMA from Ocelot on (OUTLINE §6.4.2.2; CARD: every released checkpoint but Kestrel's uses EMA weights)."""
OCELOT_END = KESTREL_END + _steps(3.78e12 - KESTREL_END * KESTREL_BATCH * SEQ_LEN, OCELOT_BATCH)
"""Derived: Ocelot ends at 3.78T tokens (OUTLINE §4, CARD): 660,000 + round((3.78e12 - 2.768e12) / 12Mi) = 740,407."""

# Jellyfish (OUTLINE §6.4.2.4; CARD "Jellyfish (First Cooldown) ... (3.78T->4.78T tokens)").
JELLYFISH_STEPS = 79_500
"""The cooldown: "1.7e-3 → 1.7e-4 over 1e12 tokens (79,500 steps at 12Mi tokens/step)" (OUTLINE §6.4.2.4)."""
JELLYFISH_MIN_LR_RATIO = 0.1
"""1.7e-4 / 1.7e-3 (OUTLINE §6.4.2.4)."""
JELLYFISH_END = OCELOT_END + JELLYFISH_STEPS
"""819,907: 4.780T tokens (CARD: 4.78T)."""

# Phoenix (OUTLINE §6.4.2.5; CARD "Phoenix (Reheated) ... (4.78T->11.1T tokens)").
PHOENIX_TRANSITION_STEPS = 2000
"""Mixture interpolation and LR re-warm 1.7e-4 → 1.7e-3, both over 2,000 steps (~25.2B tokens) (OUTLINE §6.4.2.5)."""
PHOENIX_END = JELLYFISH_END + _steps(
    11.1e12 - (KESTREL_END * KESTREL_BATCH + (JELLYFISH_END - KESTREL_END) * OCELOT_BATCH) * SEQ_LEN, OCELOT_BATCH
)
"""Derived: Phoenix ends at 11.1T tokens (OUTLINE §4, CARD).

819,907 + round((11.1e12 - 4.780e12) / 12Mi) = 1,322,149.
"""
REWARM_CYCLE_END = 1_000_000_000
"""A cycle end after the run: the LR holds at 1.7e-3 after the re-warm (as in the 32B re-warm, RETRO32 Phase 3)."""

# Deep cooldowns (OUTLINE §6.4.2.6): branches off Jellyfish's end, where the LR is 1.7e-4.
RACCOON_STEPS = _steps(100e9, OCELOT_BATCH)
"""Raccoon: "cooldown 1.7e-4 → 1.7e-5 over ~100B tokens" (OUTLINE §6.4.2.6) = 7,947 steps at 12Mi (batch NOT IN SEEDS:
Jellyfish's 12Mi assumed)."""
RACCOON_MIN_LR_RATIO = 0.1
"""1.7e-5 / 1.7e-4 (OUTLINE §6.4.2.6)."""
DEEP_COOLDOWN_START_LR = 1.7e-4
"""Jellyfish's final LR, where Raccoon starts (OUTLINE §6.4.2.6); Spoonbill's start NOT IN SEEDS, the same assumed."""
SPOONBILL_STEPS = RACCOON_STEPS
"""NOT IN SEEDS: Spoonbill's length. Chosen: Raccoon's ~100B tokens (it reproduced Raccoon's anomaly)."""
SPOONBILL_MIN_LR = 3e-5
"""Spoonbill: "cooldown to 3e-5" (OUTLINE §6.4.2.6)."""
TULU_V3_PERCENT = 0.3
"""Spoonbill adds Tulu v3 data (0.3%) (OUTLINE §6.4.2.6)."""
FLAN_PERCENT = 1.0
"""Spoonbill adds FLAN (1%) (OUTLINE §6.4.2.6)."""
Z_LOSS = 1e-4
"""The Spoonbill fix, z-loss 1e-4 (OUTLINE §6.4.2.6); used again in Starling (OUTLINE §6.4.2.7)."""

# Starling (OUTLINE §6.4.2.7; CARD "Starling (Second Cooldown) ... (11.1T->12.75T tokens)").
STARLING_MIN_LR_RATIO = 0.01
"""Deeper cooldown 1.7e-3 → 1.7e-5 (OUTLINE §6.4.2.7)."""
STARLING_STEPS = _steps(1.34e12, STARLING_BATCH)
""""Cooldown length: retro explicitly states 1.34T tokens" (OUTLINE §6.4.2.7) = 79,870 steps at 16Mi. The timeline's
11.1T → 12.75T (1.65T) is approximate (same section), so the phase ends at 12.44T."""
STARLING_END = PHOENIX_END + STARLING_STEPS
CHECKPOINT_EVERY = 20_000
"""Permanent full checkpoint every 20k steps (OUTLINE §6.3.2)."""

# OUTLINE §6.4.2.1 Kestrel "Mix (normalized)".
KESTREL_MIX = MixTable(
    name="kestrel",
    source="paper-outline-marin-8b-32b.md, 6.4.2.1 Phase 1: Kestrel, 'Mix (normalized)'",
    rows=rows(
        ("dclm_baseline", "DCLM Baseline", 92.6),
        ("starcoderdata", "StarCoder Data", 6.1),
        ("proofpile_2", "ProofPile 2", 1.3),
    ),
)

# OUTLINE §6.4.2.4 Jellyfish "Mix (normalized)".
JELLYFISH_MIX = MixTable(
    name="jellyfish",
    source="paper-outline-marin-8b-32b.md, 6.4.2.4 Phase 3: Jellyfish, 'Mix (normalized)'",
    rows=rows(
        ("dolmino/dclm_hq", "Dolmino DCLM HQ", 67.8),
        ("dolma/pes2o", "Dolma peS2o", 10.8),
        ("finemath-3-plus", "FineMath 3+", 6.3),
        ("dolma/arxiv", "Dolma ArXiv", 5.2),
        ("dolma/stackexchange", "Dolma StackExchange", 3.2),
        ("starcoderdata", "StarCoder", 2.2),
        ("dolma/algebraic_stack", "Dolma Algebraic Stack", 2.1),
        ("dolma/open_web_math", "Dolma Open Web Math", 0.9),
        ("dolma/megawika", "Dolma Megawika", 0.8),
        ("dolma/wiki", "Dolma Wikipedia", 0.7),
    ),
)

# RETRO32, Data Mix: the 32B pretraining mix "Mirrors our 8B Phoenix data mix" (Nemotron-CC + StarCoder + ProofPile 2).
PHOENIX_MIX = MixTable(
    name="phoenix",
    source=(
        "marin-32b-retrospective.md, Data Mix & Batch Schedule: the "
        "32B pretraining mix, which 'Mirrors our 8B Phoenix data mix'"
    ),
    rows=PRETRAINING_MIX.rows,
)

# Derived: OUTLINE §6.4.2.6 Spoonbill "add Tulu v3 data (0.3%) + FLAN (1%)" to the cooldown mix (Jellyfish's, assumed).
SPOONBILL_MIX = with_added(
    JELLYFISH_MIX,
    name="spoonbill",
    source="derived: Jellyfish mix scaled to 98.7% + Tulu v3 0.3% + FLAN 1% (paper-outline 6.4.2.6)",
    added=(MixRow("tulu_v3", "Tulu v3", TULU_V3_PERCENT), MixRow("dolmino/flan", "FLAN", FLAN_PERCENT)),
)

# OUTLINE §6.4.2.7 Starling "Mix (proportion + oversampling)": the proportions.
STARLING_MIX = MixTable(
    name="starling",
    source="paper-outline-marin-8b-32b.md, 6.4.2.7 Phase 5: Starling, 'Mix (proportion + oversampling)'",
    rows=rows(
        ("nemotron_cc/medium", "Nemotron CC Medium", 22.1),
        ("nemotron_cc/hq_synth", "Nemotron CC HQ Synth", 17.8),
        ("nemotron_cc/medium_low", "Nemotron CC Medium Low", 10.1),
        ("nemotron_cc/hq_actual", "Nemotron CC HQ Actual", 6.0),
        ("nemotron_cc/medium_high", "Nemotron CC Medium High", 5.4),
        ("nemotron_cc/low_actual", "Nemotron CC Low Actual", 4.6),
        ("nemotron_cc/low_synth", "Nemotron CC Low Synth", 4.1),
        ("arxiv_markdownified", "Marin ArXiv Markdown", 5.2),
        ("dolmino/pes2o", "Dolmino peS2o", 5.2),
        ("starcoderdata", "StarCoder Data", 4.5),
        ("proofpile_2", "ProofPile 2", 4.5),
        ("finemath-3-plus", "FineMath 3+", 3.0),
        ("dolmino/flan", "Dolmino FLAN", 3.0),
        ("dolmino/stackexchange", "Dolmino StackExchange", 1.5),
        ("stackexchange_custom", "Marin StackExchange Markdown", 1.5),
        ("dolmino/math", "Dolmino Math", 0.8),
        ("wikipedia_markdown", "Marin Wikipedia Markdown", 0.3),
        ("dolmino/wiki", "Dolmino Wiki", 0.3),
        ("medu_science_qa", "Marin Datashop Science QA", 0.1),
    ),
)

# OUTLINE §6.4.2.7 Starling, the same table's "Oversampling" column (1x, 5x, 10x).
STARLING_OVERSAMPLING: dict[str, int] = {
    "nemotron_cc/medium": 1,
    "nemotron_cc/hq_synth": 1,
    "nemotron_cc/medium_low": 1,
    "nemotron_cc/hq_actual": 1,
    "nemotron_cc/medium_high": 1,
    "nemotron_cc/low_actual": 1,
    "nemotron_cc/low_synth": 1,
    "arxiv_markdownified": 5,
    "dolmino/pes2o": 5,
    "starcoderdata": 1,
    "proofpile_2": 1,
    "finemath-3-plus": 5,
    "dolmino/flan": 10,
    "dolmino/stackexchange": 5,
    "stackexchange_custom": 5,
    "dolmino/math": 10,
    "wikipedia_markdown": 5,
    "dolmino/wiki": 5,
    "medu_science_qa": 5,
}
"""The seed's oversampling factor of each Starling component, kept as documentation, not a setting: with the
proportions fixed, the epochs a run reads follow from them and the caches' sizes (see `tootsie.recipes.mix_table`)."""

NOTES = (
    (
        "Step boundaries are derived from the seeds' token boundaries "
        "(Kestrel ends on the WSD-S grid at 660,000 = 2.768T)."
    ),
    "Starling uses the stated 1.34T-token cooldown, ending at 12.44T; the timeline's 12.75T is approximate.",
    "Kestrel warmup (1,000 steps), WSD-S decay floor (0.1x) and max grad norm (1.0) are not in the seeds.",
    (
        "The Kestrel -> Ocelot LR change (1e-3 -> 1.7e-3) is taken at once, "
        "and the RoPE fix at the Ocelot boundary; the seeds give neither step."
    ),
    (
        "Ocelot continues the Kestrel (DCLM) mix; Raccoon and Spoonbill "
        "branch off Jellyfish's end on its mix (assumed), ~100B tokens each."
    ),
    "Permutation 'linear' (the LCG used before the 32B Mantis switch) is assumed for every 8B phase.",
)
"""Caveats shown in the plan: numbers not in the seeds and approximations."""
