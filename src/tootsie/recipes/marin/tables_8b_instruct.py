"""Every number of the Marin 8B Instruct SFT, encoded once, each with its source in `seeds/`.

CARD = `seeds/marin-8b-model-card.md` ("Datasets used in Marin 8B Instruct",
"SFT Phase"); OUTLINE = `seeds/paper-outline-marin-8b-32b.md` (§6.4.2.8 "8B
Results and SFT Probe"). The card names nine datasets and one phase "for 5.3B
tokens"; the outline adds "5Gi tokens, batch 512Ki, LR 1.7e-4". Numbers the
seeds do not give are marked "NOT IN SEEDS" with the choice made and why;
`NOTES` repeats them for the plan.

The mixture weights are the one large gap: the seeds list the datasets and
give no weights, token or document counts. They are taken from Marin's public
SFT mixture (`marin-community/marin`, `experiments/exp808_sft_mixture.py`:
"Dataset weights set with the naive baseline of the number of documents per
dataset"), which is outside the seeds and marked so.
"""

from tootsie.recipes.mix_table import MixRow, MixTable

CARD_TOKENS = 5.3e9
"""The SFT phase's length: "only one phase for 5.3B tokens" (CARD, SFT Phase)."""
OUTLINE_TOKENS = 5 * 2**30
"""OUTLINE §6.4.2.8: "5Gi tokens" (5.369e9): 1.3 % more than the card's 5.3B; the card's figure sets the length."""
BATCH_TOKENS = 512 * 2**10
"""Tokens per step: "batch 512Ki" (OUTLINE §6.4.2.8)."""
PEAK_LR = 1.7e-4
"""The SFT learning rate: "LR 1.7e-4" (OUTLINE §6.4.2.8)."""
SEQ_LEN = 4096
"""NOT IN SEEDS: the SFT sequence length. Chosen: 4096, the base model's (marin.tables_8b.SEQ_LEN), which makes
the 512Ki-token batch 128 sequences (Marin's SFT configs use max_seq_len 4096 and batch 128)."""
BATCH = BATCH_TOKENS // SEQ_LEN
"""Derived: 512Ki / 4096 = 128 sequences per step."""
STEPS = round(CARD_TOKENS / BATCH_TOKENS)
"""Derived: round(5.3e9 / 512Ki) = 10,109 steps = 5,300,027,392 tokens (the outline's 5Gi would be 10,240)."""
WARMUP_FRACTION = 0.03
"""NOT IN SEEDS: the schedule's shape. Chosen: linear warmup over 3 % of the steps, then linear decay to 0
(Tulu 3's SFT shape; the seeds give only the LR)."""
WARMUP_STEPS = round(STEPS * WARMUP_FRACTION)
"""Derived: 3 % of 10,109 = 303 steps."""
MIN_LR_RATIO = 0.0
"""NOT IN SEEDS: the final LR. Chosen: 0 (linear decay to zero, as Tulu 3's SFT)."""
WEIGHT_DECAY = 0.0
"""NOT IN SEEDS: SFT weight decay. Chosen: 0 (Tulu 3's SFT; tootsie's SFT demo)."""
GRAD_CLIP = 1.0
"""NOT IN SEEDS: SFT max grad norm. Chosen: 1.0 (the 8B recipe's choice, marin.tables_8b.GRAD_CLIP)."""
CHECKPOINT_EVERY = 1000
"""NOT IN SEEDS: checkpoint cadence. Chosen: every 1,000 steps (unhashed; does not change the weights)."""

CARD_DATASETS: dict[str, str] = {
    "acecode_89k": "TIGER-Lab/AceCode-89K",
    "bespoke_stratos_17k": "bespokelabs/Bespoke-Stratos-17k",
    "dolphin_r1": "cognitivecomputations/dolphin-r1",
    "dolphin_r1_reasoning": "tuenguyen/dolphin_r1_reasoning",
    "natural_reasoning": "facebook/natural_reasoning",
    "openthoughts_114k_math": "open-r1/OpenThoughts-114k-math",
    "smoltalk": "HuggingFaceTB/smoltalk",
    "tulu_3_sft_mixture": "allenai/tulu-3-sft-mixture",
    "verifiable_math_problems": "PrimeIntellect/verifiable-math-problems",
}
"""Component → the dataset exactly as CARD ("Datasets used in Marin 8B Instruct") names it, in the card's order."""

DOCUMENTS: dict[str, int] = {
    "acecode_89k": 87_149,
    "bespoke_stratos_17k": 16_710,
    "dolphin_r1": 214_318,
    "dolphin_r1_reasoning": 585_418,
    "natural_reasoning": 1_145_824,
    "openthoughts_114k_math": 89_120,
    "smoltalk": 1_043_917,
    "tulu_3_sft_mixture": 939_343,
    "verifiable_math_problems": 777_457,
}
"""NOT IN SEEDS: documents per dataset (the mixture weights). Chosen: Marin's public exp808 SFT mixture, which
weights each dataset by its document count. Its `dolphin_r1_nonreasoning` count is used for the card's
dolphin-r1 entry and its `dolphin_r1_reasoning` count for tuenguyen/dolphin_r1_reasoning (the card says dolphin-r1
"includes both nonreasoning and reasoning subsets"; that the reasoning subset came from tuenguyen's copy is an
assumption). Token counts per dataset are nowhere in the seeds nor in exp808."""

SFT_MIX = MixTable(
    name="marin-8b-instruct-sft",
    source=(
        "marin-8b-model-card.md, 'Datasets used in Marin 8B Instruct' (the datasets); weights NOT IN SEEDS: "
        "document counts from marin-community/marin experiments/exp808_sft_mixture.py"
    ),
    rows=tuple(
        MixRow(name, display, 100 * DOCUMENTS[name] / sum(DOCUMENTS.values()))
        for name, display in CARD_DATASETS.items()
    ),
)
"""The SFT mixture: the card's nine datasets, weighted by document count (shares in percent)."""

NOTES = (
    "Length: the card's 5.3B tokens at 512Ki tokens/step = 10,109 steps (5.300B); the outline's '5Gi' is 10,240.",
    "Mixture weights are NOT IN SEEDS: document counts from Marin's public exp808 SFT mixture.",
    "Sequence length 4096 (so batch 128), warmup 3 % then linear decay to 0, weight decay 0, grad clip 1.0: "
    "NOT IN SEEDS.",
    "Warm start: the 8B recipe's final step (marin_8b/starling), weights only, steps counted from 0; "
    "EMA and z-loss off during SFT (NOT IN SEEDS).",
    "Marin's public exp1237 (the Starling SFT) ran 10,228 steps of 128 x 4096 at LR 1e-4; the seeds say 1.7e-4.",
)
"""Caveats shown in the plan: numbers not in the seeds and what was chosen."""
