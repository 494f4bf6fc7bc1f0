"""The Marin 8B run as a recipe: Kestrel, Ocelot, Jellyfish, Phoenix, the deep cooldowns, Starling.

Every number comes from `tootsie.recipes.marin.tables_8b` (each with its seed
source; step boundaries are derived there from the seeds' token boundaries).
Steps, each warm-started from its parent (global steps; tokens at seq 4096):

    marin_8b/kestrel          0 → 660,000            WSD-S (1e-3), DCLM mix, 4Mi tokens/step, no EMA        0 → 2.77T
    marin_8b/ocelot           660,000 → 740,407      12Mi tokens/step, WSD at 1.7e-3, EMA 0.995, Llama 3 RoPE  → 3.78T
    marin_8b/jellyfish        740,407 → 819,907      cooldown 1.7e-3 → 1.7e-4 over 79,500 steps, Jellyfish mix → 4.78T
    marin_8b/phoenix          819,907 → 1,322,149    re-warm to 1.7e-3 and mix → Nemotron-CC over 2,000 steps  → 11.1T
    marin_8b/raccoon          819,907 → 827,854      branch: deep cooldown 1.7e-4 → 1.7e-5 (~100B tokens)
    marin_8b/spoonbill        819,907 → 827,854      branch: to 3e-5, + Tulu v3 0.3% and FLAN 1%
    marin_8b/spoonbill-zloss  819,907 → 827,854      branch: Spoonbill with the z-loss 1e-4 fix
    marin_8b/starling         1,322,149 → 1,402,019  cooldown 1.7e-3 → 1.7e-5, 16Mi tokens/step, z-loss,
                                                     Starling mix                                              → 12.44T

The released model is Starling (its lineage: Kestrel, Ocelot, Jellyfish,
Phoenix, Starling); the deep cooldowns are side branches.

    tootsie run experiments/marin_8b.py --dry-run --json      # the plan; runs nothing

`build_steps(scale)` builds the same phases at another `Scale`; `STEPS` and
`PLAN` are the full-scale ones. Component token caches come from the file
named by $TOOTSIE_COMPONENTS (see docs/recipes.md).
"""

from tootsie.recipes.experiment_file import RecipeExperiment
from tootsie.recipes.marin import tables_8b as t
from tootsie.recipes.mix_table import mix_stage
from tootsie.recipes.recipe import Phase, Recipe
from tootsie.recipes.tiny.scale import tiny_scale
from tootsie.train.ema import EMAConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import RewarmConfig, WSDConfig, WSDSConfig
from tootsie.train.stability import StabilityConfig

KESTREL_SCHEDULE = WSDSConfig(
    peak_lr=t.KESTREL_PEAK_LR,
    warmup_steps=t.KESTREL_WARMUP,
    cycles=t.WSD_S_CYCLES,
    decay_fraction=t.WSD_S_DECAY_FRACTION,
    min_lr_ratio=t.WSD_S_MIN_LR_RATIO,
)
# Ocelot holds the peak of the WSD whose decay is Jellyfish (the Jellyfish step warm-starts where the decay begins).
WSD_SCHEDULE = WSDConfig(
    peak_lr=t.OCELOT_PEAK_LR,
    warmup_steps=0,
    decay_steps=t.JELLYFISH_STEPS,
    total_steps=t.JELLYFISH_END,
    min_lr_ratio=t.JELLYFISH_MIN_LR_RATIO,
)
PHOENIX_SCHEDULE = RewarmConfig(
    cycles=(t.JELLYFISH_END, t.REWARM_CYCLE_END),
    peak_lrs=(t.OCELOT_PEAK_LR,),
    warmup_steps=0,
    rewarmup_steps=t.PHOENIX_TRANSITION_STEPS,
    rewarm_from="previous",
    decay_steps=t.JELLYFISH_STEPS,
    min_lr_ratio=t.JELLYFISH_MIN_LR_RATIO,
)
STARLING_SCHEDULE = WSDConfig(
    peak_lr=t.OCELOT_PEAK_LR,
    warmup_steps=0,
    decay_steps=t.STARLING_STEPS,
    total_steps=t.STARLING_END,
    min_lr_ratio=t.STARLING_MIN_LR_RATIO,
)
DEEP_END = t.JELLYFISH_END + t.RACCOON_STEPS


def deep_cooldown(min_lr_ratio: float) -> WSDConfig:
    """A linear decay from Jellyfish's final LR over the deep-cooldown branch."""
    return WSDConfig(
        peak_lr=t.DEEP_COOLDOWN_START_LR,
        warmup_steps=0,
        decay_steps=t.RACCOON_STEPS,
        total_steps=DEEP_END,
        min_lr_ratio=min_lr_ratio,
    )


SHARED = dict(
    optimizer=AdamWConfig(weight_decay=t.WEIGHT_DECAY, max_grad_norm=t.GRAD_CLIP),
    stability=StabilityConfig(clip_update_window=None, skip_bad_steps=False),
    permutation="linear",
)
LATER = dict(SHARED, model="marin-8b-llama3-rope", ema=EMAConfig(beta=t.EMA_BETA))
BRANCH = dict(LATER, start_step=t.JELLYFISH_END, end_step=DEEP_END, parent="jellyfish")

RECIPE = Recipe(
    name="marin_8b",
    seq_len=t.SEQ_LEN,
    final="starling",
    checkpoint_every=t.CHECKPOINT_EVERY,
    notes=t.NOTES,
    phases=(
        Phase(
            name="kestrel",
            retro_phase="kestrel",
            start_step=0,
            end_step=t.KESTREL_END,
            model="marin-8b",
            schedule=KESTREL_SCHEDULE,
            ema=None,
            z_loss_weight=0.0,
            mixture=(mix_stage(0, t.KESTREL_MIX),),
            batch_sizes=((0, t.KESTREL_BATCH),),
            **SHARED,
            note="DCLM + StarCoder + ProofPile 2 with WSD-S (decays every 10k, then 20k steps), Llama 2 RoPE settings",
        ),
        Phase(
            name="ocelot",
            retro_phase="ocelot",
            start_step=t.KESTREL_END,
            end_step=t.OCELOT_END,
            schedule=WSD_SCHEDULE,
            z_loss_weight=0.0,
            batch_sizes=((t.KESTREL_END, t.OCELOT_BATCH),),
            parent="kestrel",
            **LATER,
            note="batch 4Mi -> 12Mi tokens, LR x sqrt(3) to 1.7e-3, WSD, EMA 0.995, RoPE Llama 2 -> Llama 3 settings",
        ),
        Phase(
            name="jellyfish",
            retro_phase="jellyfish",
            start_step=t.OCELOT_END,
            end_step=t.JELLYFISH_END,
            schedule=WSD_SCHEDULE,
            z_loss_weight=0.0,
            mixture=(mix_stage(t.OCELOT_END, t.JELLYFISH_MIX),),
            parent="ocelot",
            **LATER,
            note="first cooldown: 1.7e-3 -> 1.7e-4 over 1e12 tokens on the Dolmino/Dolma high-quality mix",
        ),
        Phase(
            name="phoenix",
            retro_phase="phoenix",
            start_step=t.JELLYFISH_END,
            end_step=t.PHOENIX_END,
            schedule=PHOENIX_SCHEDULE,
            z_loss_weight=0.0,
            mixture=(mix_stage(t.JELLYFISH_END, t.PHOENIX_MIX, transition_steps=t.PHOENIX_TRANSITION_STEPS),),
            parent="jellyfish",
            **LATER,
            note=(
                "reheat: LR 1.7e-4 -> 1.7e-3 and mixture Jellyfish -> Nemotron-CC, both linear over 2,000 steps, "
                "then hold"
            ),
        ),
        Phase(
            name="raccoon",
            retro_phase="raccoon",
            schedule=deep_cooldown(t.RACCOON_MIN_LR_RATIO),
            z_loss_weight=0.0,
            **BRANCH,
            note="deep cooldown 1.7e-4 -> 1.7e-5 over ~100B tokens: the loss creeps up",
        ),
        Phase(
            name="spoonbill",
            retro_phase="spoonbill",
            schedule=deep_cooldown(t.SPOONBILL_MIN_LR / t.DEEP_COOLDOWN_START_LR),
            z_loss_weight=0.0,
            mixture=(mix_stage(t.JELLYFISH_END, t.SPOONBILL_MIX),),
            **BRANCH,
            note="cooldown to 3e-5 with Tulu v3 and FLAN: the creep repeats (lm_head norm explosion)",
        ),
        Phase(
            name="spoonbill-zloss",
            retro_phase="spoonbill-zloss",
            schedule=deep_cooldown(t.SPOONBILL_MIN_LR / t.DEEP_COOLDOWN_START_LR),
            z_loss_weight=t.Z_LOSS,
            mixture=(mix_stage(t.JELLYFISH_END, t.SPOONBILL_MIX),),
            **BRANCH,
            note="Spoonbill with the fix: z-loss 1e-4",
        ),
        Phase(
            name="starling",
            retro_phase="starling",
            start_step=t.PHOENIX_END,
            end_step=t.STARLING_END,
            schedule=STARLING_SCHEDULE,
            z_loss_weight=t.Z_LOSS,
            mixture=(mix_stage(t.PHOENIX_END, t.STARLING_MIX),),
            batch_sizes=((t.PHOENIX_END, t.STARLING_BATCH),),
            parent="phoenix",
            **LATER,
            note=(
                "second cooldown 1.7e-3 -> 1.7e-5 over 1.34T tokens, batch 16Mi, z-loss 1e-4, "
                "Starling mix with oversampling"
            ),
        ),
    ),
)

TINY = tiny_scale(step_factor=1 / 2000, batch_factor=1 / 128)
"""`--scale tiny`: the same phases for real on a CPU, on local-text components (docs/recipes.md, "Tiny scale")."""
TINY_EVAL_EVERY = 25
"""Held-out bits-per-byte every this many steps at tiny scale."""
EXPERIMENT = RecipeExperiment(RECIPE, tiny=TINY, tiny_eval_every=TINY_EVAL_EVERY)
build_steps, plan = EXPERIMENT.build_steps, EXPERIMENT.plan
SCALE, STEPS, PLAN = EXPERIMENT.selected()
