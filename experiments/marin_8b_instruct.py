"""Marin 8B Instruct as a recipe: one SFT phase of 5.3B tokens on the card's nine chat datasets.

Every number comes from `tootsie.recipes.marin.tables_8b_instruct` (each with its
seed source, or marked NOT IN SEEDS with the choice made):

    marin_8b_instruct/sft   0 → 10,109   warm start from marin_8b/starling (weights only, steps from 0),
                                         128 x 4096 = 512Ki tokens/step, LR 1.7e-4 (3 % warmup, linear to 0),
                                         the SFT mixture (9 datasets, weighted by document count),
                                         whole conversations packed, loss on assistant tokens only  → 5.300B

    tootsie run experiments/marin_8b_instruct.py --dry-run --json   # the plan; runs nothing
    python experiments/marin_8b_instruct.py --dry-run --json        # the same
    tootsie run experiments/marin_8b_instruct.py --scale tiny       # for real on a CPU, ends with a report

At `--scale tiny` the base is the 8B recipe's tiny Starling (its tiny phases
run first, or are reused from the same prefix), the nine datasets are local
conversations (`tootsie.recipes.tiny.chat`) tokenized with ChatML, and the run
ends with `marin_8b_instruct/report` (report.html) and
`marin_8b_instruct/assistant-loss` (held-out assistant-token loss, base vs SFT).
Component chat caches come from the file named by $TOOTSIE_COMPONENTS (docs/recipes.md).
"""

import sys
from dataclasses import replace

from marin_8b import EXPERIMENT as MARIN_8B

from tootsie.recipes.instruct import InstructExperiment
from tootsie.recipes.marin import tables_8b_instruct as t
from tootsie.recipes.mix_table import mix_stage
from tootsie.recipes.recipe import Phase, Recipe
from tootsie.recipes.tiny.scale import tiny_scale
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import LinearScheduleConfig
from tootsie.train.stability import StabilityConfig

RECIPE = Recipe(
    name="marin_8b_instruct",
    seq_len=t.SEQ_LEN,
    final="sft",
    checkpoint_every=t.CHECKPOINT_EVERY,
    notes=t.NOTES,
    phases=(
        Phase(
            name="sft",
            retro_phase="sft",
            start_step=0,
            end_step=t.STEPS,
            model=MARIN_8B.recipe.phase(MARIN_8B.recipe.final).model,
            schedule=LinearScheduleConfig(
                peak_lr=t.PEAK_LR, warmup_steps=t.WARMUP_STEPS, total_steps=t.STEPS, min_lr_ratio=t.MIN_LR_RATIO
            ),
            optimizer=AdamWConfig(weight_decay=t.WEIGHT_DECAY, max_grad_norm=t.GRAD_CLIP),
            stability=StabilityConfig(clip_update_window=None, skip_bad_steps=False),
            ema=None,
            z_loss_weight=0.0,
            permutation="linear",
            mixture=(mix_stage(0, t.SFT_MIX),),
            batch_sizes=((0, t.BATCH),),
            note="SFT: one phase of 5.3B tokens on the card's nine datasets, LR 1.7e-4, batch 512Ki tokens",
        ),
    ),
)

TINY = replace(tiny_scale(step_factor=1 / 100, batch_factor=1 / 32), seq_len=512)
"""`--scale tiny`: 101 steps of 4 x 512 tokens (the longest local conversation is 476 tokens, so none is cut)."""
TINY_COMPONENTS = {
    "tulu_3_sft_mixture": "docs",
    "smoltalk": "docs",
    "acecode_89k": "docs",
    "dolphin_r1": "tasks",
    "natural_reasoning": "tasks",
    "openthoughts_114k_math": "math",
    "verifiable_math_problems": "math",
    "bespoke_stratos_17k": "math",
    "dolphin_r1_reasoning": "math",
}
"""Each dataset's local stand-in: general chat and code Q&A → docstring Q&A; general tasks → multi-turn tasks;
math and reasoning → word problems."""
EXPERIMENT = InstructExperiment(RECIPE, base=MARIN_8B, tiny=TINY, tiny_components=TINY_COMPONENTS)
build_steps, plan = EXPERIMENT.build_steps, EXPERIMENT.plan
SCALE, STEPS, PLAN = EXPERIMENT.selected()

if __name__ == "__main__":
    from tootsie.cli.main import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
