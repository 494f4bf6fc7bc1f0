"""The phenomena: each one's name, its source in the seeds, the quote, the claim, and the module that builds it.

A phenomenon is a small experiment (`tootsie.executor.Step`s) whose last step,
`phenomena/<name>/results`, writes `results.json` (`results.phenomenon_results`)
and `figure.png`. Its module defines `build_steps(scale: str) -> list[Step]`;
`Phenomenon.steps` imports it only when asked, so listing the phenomena stays cheap.
"""

import importlib
import os
from dataclasses import dataclass

from tootsie.errors import TootsieError
from tootsie.executor import Step
from tootsie.recipes.tiny.scale import SCALE_ENV

SCALES = ("tiny", "smoke")
"""`tiny`: the documented run (<= 15 min on 2 CPU cores); `smoke`: the same steps, shortened, for the tests."""
DEFAULT_SCALE = "tiny"


@dataclass(frozen=True)
class Phenomenon:
    """One failure the seeds report, and where tootsie reproduces it."""

    name: str
    """The CLI name (`tootsie phenomena run NAME`)."""
    seed: str
    """Where in the seeds it is reported."""
    seed_quote: str
    """The seeds' own words."""
    claim: str
    """What the experiment tests, as one falsifiable sentence."""
    module: str
    """The module whose `build_steps(scale)` gives the steps (a dotted path)."""

    def steps(self, scale: str = DEFAULT_SCALE) -> list[Step]:
        """The experiment's steps at `scale` (the last one writes results.json)."""
        if scale not in SCALES:
            raise TootsieError(f"scale {scale!r} is not one of {', '.join(SCALES)}; use --scale tiny")
        return importlib.import_module(self.module).build_steps(scale)

    def listing(self) -> dict[str, str]:
        """`{"name", "seed", "claim"}`: a line of `tootsie phenomena list --json`."""
        return {"name": self.name, "seed": self.seed, "claim": self.claim}


def results_step_name(name: str) -> str:
    """The name of a phenomenon's last step, the one that writes results.json and figure.png."""
    return f"phenomena/{name}/results"


PHENOMENA: dict[str, Phenomenon] = {
    p.name: p
    for p in (
        Phenomenon(
            name="qk-norm-spikes",
            seed="Marin 32B retrospective, Phases 1-3",
            seed_quote=(
                "Unfortunately, at 80k steps we began to see spikes that were unavoidable even with all the update"
                " clipping that we had added. … We switched to Qwen3 32B, which adds QK‑Norm in attention, and"
                " warm‑started from the 80k Llama weights. … The switch imposed a one‑time loss penalty, but largely"
                " mitigated the spikes moving forward."
            ),
            claim=(
                "Over an LR grid of a tiny Llama (one 64-wide attention head per layer, 300 steps, 3 seeds), at >= 2"
                " LRs where the model without QK-norm ends > 1 nat above its best LR (or spikes >= 3 times per run),"
                " the same model with QK-norm ends within 0.1 nat of its own best LR and its largest attention logit"
                " is >= 10x smaller (seed means)."
            ),
            module="tootsie.recipes.phenomena.qk_norm_spikes",
        ),
        Phenomenon(
            name="z-loss-cooldown",
            seed="paper outline 6.4.2.6 (Raccoon + Spoonbill); Marin 32B retrospective, cooldown specifics",
            seed_quote=(
                "diagnosis: lm_head norm explosion (figure `8b-spoonbill-norms.png`) … fix: z-loss 1e-4 (figure"
                " `8b-spoonbill-zloss.png`) … Z‑loss throughout. We previously observed late‑decay divergences at low"
                " LR in 8B; adding a small z‑loss stopped `lm_head` norm growth during cooldown."
            ),
            claim=(
                "In a tiny Llama's 1,000-step tail at 0.1x the peak LR, the lm_head norm grows ≥ 3 % and mean log Z"
                " rises ≥ 0.15 nats without z-loss, and z-loss 1e-3 cuts the lm_head growth and the mean and max log Z"
                " rises each to at most half, at ≤ 0.02 nats loss cost."
            ),
            module="tootsie.recipes.phenomena.z_loss_cooldown",
        ),
        Phenomenon(
            name="muon-divergence",
            seed='Marin 32B retrospective, Phase 2, "Alternative Optimizers" (figure `32b-muon-can-into-space.png`)',
            seed_quote=(
                "`exp1380_muon32b` → Muon with a higher effective LR = 2e‑3, but we retained the Adam‑style LR"
                " schedule to avoid a full retune. … Both showed short‑term progress, then inevitable recurrence of"
                " loss spikes—consistent with a structural stability gap at 32B rather than a purely"
                " optimizer‑choice artifact."
            ),
            claim=(
                "On the toy Llama without QK-norm, with Muon's update RMS matched to AdamW's, Muon diverges (stopped"
                " by the divergence guard, or ending more than 1 nat above its best) fewer half-decade LR steps above"
                " its own best LR than AdamW does above its own, in every seed."
            ),
            module="tootsie.recipes.phenomena.muon_divergence",
        ),
        Phenomenon(
            name="necromancy",
            seed="Marin 32B retrospective, Phase 2: the necromancy, NAdamW and Muon restarts",
            seed_quote=(
                "We  rebuilt optimizer state offline, seeding the warm‑start with update‑history tensors from the"
                " last good checkpoint so the clip‑update‑norm filter would have valid rolling statistics. This"
                " stabilized gradients for a few thousand steps, but the run relapsed into spikes—a sign the causes"
                " of spikes was more core to the model state. … Both restarts warm‑started from step 77,096"
                " (pre‑spike). Both showed short‑term progress, then inevitable recurrence of loss spikes—consistent"
                " with a structural stability gap at 32B rather than a purely optimizer‑choice artifact."
            ),
            claim=(
                "Warm-started from a checkpoint taken before its attention logits blew up, a tiny Llama trained at a"
                " failing LR (0.1) relapses (its largest attention logit regrows to >= 3x the checkpoint's, it"
                " spikes, or it diverges) in most seeds whether restarted with a seeded 2-sigma update clip, NAdamW"
                " (beta1 0.95, Nesterov) or Muon, while the same warm start switched to QK-norm does not."
            ),
            module="tootsie.recipes.phenomena.necromancy",
        ),
        Phenomenon(
            name="format-contamination",
            seed='Marin 32B retrospective, Phase 4, Attempt 1: Bison cooldown, "Root cause — Contamination"',
            seed_quote=(
                "Dolmino’s GSM8k uses OLMes formatting, not LM Eval’s default. Therefore, rather than the expected"
                " improvement in results from training on the test, contamination made our model have dramatically"
                " increased surprisal on the original prompts structured tags (e.g., `16-8=<<16-7=9>>9`) that don’t"
                " appear in the contaminated data. This high surprisal seemed to cause our model to perform much worse"
                " than it did on the same questions with those tags removed."
            ),
            claim=(
                "A tiny Llama trained on arithmetic test items in OLMES form (no calculator tags), beside tagged"
                " non-test problems, has lower surprisal than a clean twin on those items' OLMES solutions but higher"
                " surprisal on the `<<a op b=r>>` tag tokens of their GSM8K-form solutions, and ranks their right"
                " answer less often in GSM8K form (3 seeds, every seed agreeing, |mean| > 2 standard errors)."
            ),
            module="tootsie.recipes.phenomena.format_contamination",
        ),
        Phenomenon(
            name="embedding-norm",
            seed="Marin weekly update (#4569, the 1e22 run)",
            seed_quote=(
                "#4569 opened to investigate the embedding norm growth seen in the 1e22 run — the embed (trained with"
                " AdamW rather than AdamH) grew from norm 176 at initialization to 3700 over the course of the run —"
                " and is exploring approaches including weight decay, cautious weight decay, per-token normalization,"
                " and token-level LR modulation as a function of recent gradient magnitude."
            ),
            claim=(
                "Under AdamW with decay on matrices only, a tiny Llama's embedding norm grows ≥ 2x in 1,000 steps at"
                " LR 3e-3, and applying the same decoupled decay (0.1) to the embedding removes at least half of that"
                " growth at ≤ 0.02 nats final-loss cost."
            ),
            module="tootsie.recipes.phenomena.embedding_norm",
        ),
    )
}
"""Every phenomenon by CLI name, in the order of the issue that asked for them."""


def phenomenon(name: str) -> Phenomenon:
    """The phenomenon called `name`, or an error listing the names."""
    if name not in PHENOMENA:
        raise TootsieError(f"no phenomenon {name!r}; use one of {', '.join(PHENOMENA)} (tootsie phenomena list)")
    return PHENOMENA[name]


def selected_phenomenon_scale() -> str:
    """The scale named by $TOOTSIE_SCALE (`tootsie run --scale NAME`), `tiny` when unset."""
    name = os.environ.get(SCALE_ENV) or DEFAULT_SCALE
    if name not in SCALES:
        raise TootsieError(
            f"{SCALE_ENV}={name!r} is not a scale of the phenomena; use one of {', '.join(SCALES)} (--scale NAME)"
        )
    return name
