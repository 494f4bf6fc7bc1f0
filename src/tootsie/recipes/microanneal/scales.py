"""The microanneal experiment at two scales: the Marin 8B-sized plan, and a tiny run on local text.

`full_microanneal()` is the plan at 8B size: the base checkpoint from
$TOOTSIE_MICROANNEAL_BASE, the sources' token caches from $TOOTSIE_COMPONENTS
(names `pretraining`, `flan` and the candidates), the held-out domains from a
suite directory $TOOTSIE_MICROANNEAL_SUITE tokenized with
$TOOTSIE_MICROANNEAL_TOKENIZER (`tootsie.eval.heldout_domains`); anything
unset is the marker `<unset>`, so the plan still builds and dry-runs.

`tiny_microanneal()` runs on a CPU in minutes, on the tiny recipes' local
text (`tiny.data`): a base trained from scratch on stdlib docstrings + code
(the pretraining mix), synthetic instructions as the FLAN-like source, and
three candidates: `math` (synthetic word problems, the planted one: the
held-out `math` domain is text of the same distribution, which neither the
base nor the control ever reads), `reference` (pydoc topics, prose near the
docstrings) and `patterned` (synthetic counting text unlike any held-out
domain). Held-out domains: web, code, math, qa.

At either scale, $TOOTSIE_MICROANNEAL_TASKS (a suite or benchmark list) and
$TOOTSIE_MICROANNEAL_TASK_DATA (their local files) add benchmark tasks to
every branch.
"""

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.errors import TootsieError
from tootsie.eval.heldout_domains import DomainCacheConfig, domain_cache_steps, tokenize_domain
from tootsie.executor import Step
from tootsie.models.presets import PRESETS
from tootsie.recipes.cases.common import CASE_MODEL
from tootsie.recipes.components import UNSET, components_from_env, train_phase
from tootsie.recipes.microanneal.anneals import FLAN, PRETRAINING, MicroannealSpec
from tootsie.recipes.tiny.data import ConcatCachesConfig, concatenate_caches, tiny_data_steps, write_jsonl_gz
from tootsie.recipes.tiny.scale import TINY_SEQ_LEN
from tootsie.train.config import CheckpointConfig, TrainConfig
from tootsie.train.schedule import LinearScheduleConfig

BASE_ENV, SUITE_ENV, TOKENIZER_ENV = (
    "TOOTSIE_MICROANNEAL_BASE",
    "TOOTSIE_MICROANNEAL_SUITE",
    "TOOTSIE_MICROANNEAL_TOKENIZER",
)
TASKS_ENV, TASK_DATA_ENV = "TOOTSIE_MICROANNEAL_TASKS", "TOOTSIE_MICROANNEAL_TASK_DATA"
"""Optional benchmark tasks per branch: a suite or benchmark list, and the directory of their local files."""
FULL_CANDIDATES = ("finemath-3-plus", "dolmino/stackexchange", "arxiv_markdownified")
"""Candidate high-quality sources of the 8B-sized plan (Dolmino-style HQ sets the 8B cooldowns weighed)."""
TINY_HELDOUT = ("web", "code", "math", "qa")
TINY_BASE_STEPS = 300
"""Steps of the tiny base (about 0.3 M tokens of docstrings and code)."""
PATTERNED_FILE = "docs-00000.jsonl.gz"


def task_settings() -> dict[str, str | None]:
    """`task_suite` and `task_data_dir` from $TOOTSIE_MICROANNEAL_TASKS and $TOOTSIE_MICROANNEAL_TASK_DATA."""
    suite, data_dir = os.environ.get(TASKS_ENV) or None, os.environ.get(TASK_DATA_ENV) or None
    if (suite is None) != (data_dir is None):
        raise TootsieError(
            f"set both {TASKS_ENV} (e.g. arc_easy,piqa) and {TASK_DATA_ENV} (local task files), or neither"
        )
    return {"task_suite": suite, "task_data_dir": data_dir}


def full_microanneal() -> MicroannealSpec:
    """The 8B-sized plan; sizes are this repo's choice (the retrospective gives the 70/15/15 mix, not the lengths)."""
    components = components_from_env()
    suite, tokenizer = os.environ.get(SUITE_ENV), os.environ.get(TOKENIZER_ENV)
    heldout = (
        {name: step.ref() for name, step in domain_cache_steps(suite, tokenizer).items()}
        if suite and tokenizer
        else {"paloma_c4_en": UNSET}
    )
    return MicroannealSpec(
        base=os.environ.get(BASE_ENV, UNSET),
        model=PRESETS["marin-8b"],
        pretraining=components.get(PRETRAINING, UNSET),
        flan=components.get(FLAN, UNSET),
        candidates={name: components.get(name, UNSET) for name in FULL_CANDIDATES},
        heldout=heldout,
        tokenizer=tokenizer or UNSET,
        seq_len=4096,
        batch_size=512,
        steps=2000,
        peak_lr=1.7e-4,  # Marin 8B's cooldown start LR (docs/recipes.md, Raccoon/Spoonbill)
        warmup_steps=20,
        seeds=(0, 1),
        eval_sequences=256,
        compute_dtype="bfloat16",
        **task_settings(),
    )


@dataclass(frozen=True)
class PatternedTextConfig:
    """Synthetic counting text: a candidate source unlike every held-out domain."""

    docs: int = 600
    """Documents written."""
    seed: int = 0
    """Seed of the words and counts."""


def write_patterned_text(config: PatternedTextConfig, output_path: str) -> int:
    """Write `docs-00000.jsonl.gz`: lines like `zuv 17 zuv 18 zuv 19 ...`; return the document count."""
    rng = np.random.default_rng(config.seed)
    letters = np.array(list("bcdfghjklmnpqrstvwxz"))

    def document() -> str:
        words = ["".join(rng.choice(letters, size=3)) for _ in range(4)]
        start = int(rng.integers(0, 500))
        return "\n".join(" ".join(f"{w} {start + i + j}" for j, w in enumerate(words)) for i in range(8))

    return write_jsonl_gz(
        Path(output_path) / PATTERNED_FILE, ({"id": f"pattern:{i}", "text": document()} for i in range(config.docs))
    )


def tiny_microanneal(seeds: tuple[int, ...] = (0, 1, 2), steps: int = 60) -> MicroannealSpec:
    """The tiny spec: the local sources and base as steps (see the module docstring)."""
    data = tiny_data_steps()
    pretraining = Step(
        "microanneal_tiny/pretraining",
        concatenate_caches,
        ConcatCachesConfig(caches=(data.train["web"], data.train["code"])),
        description="pretraining mix: stdlib docstrings then stdlib code",
    )
    patterned_text = Step("microanneal_tiny/patterned-text", write_patterned_text, PatternedTextConfig())
    patterned = Step(
        "microanneal_tiny/patterned",
        tokenize_domain,
        DomainCacheConfig(domain="patterned", files=(patterned_text.ref(PATTERNED_FILE),), tokenizer=data.tokenizer),
    )
    base = Step(
        "microanneal_tiny/base",
        train_phase,
        TrainConfig(
            model=CASE_MODEL,
            data=MixtureConfig(
                caches={PRETRAINING: pretraining.ref()},
                stages=(MixtureStage(0, {PRETRAINING: 1.0}),),
                seq_len=TINY_SEQ_LEN,
                batch_schedule=BatchSchedule.constant(16),
            ),
            num_steps=TINY_BASE_STEPS,
            schedule=LinearScheduleConfig(peak_lr=3e-3, warmup_steps=20, total_steps=TINY_BASE_STEPS, min_lr_ratio=0.3),
            ema=None,
            checkpoints=CheckpointConfig(every_steps=TINY_BASE_STEPS, every_minutes=None),
        ),
        description="the base: trained from scratch on the pretraining mix only",
    )
    return MicroannealSpec(
        base=base.ref(),
        model=CASE_MODEL,
        pretraining=pretraining.ref(),
        flan=data.train["qa"],
        candidates={"math": data.train["math"], "reference": data.train["reference"], "patterned": patterned.ref()},
        heldout={kind: data.heldout[kind] for kind in TINY_HELDOUT},
        tokenizer=data.tokenizer,
        name="microanneal_tiny",
        seq_len=TINY_SEQ_LEN,
        batch_size=16,
        steps=steps,
        peak_lr=1e-3,
        warmup_steps=5,
        seeds=seeds,
        eval_sequences=64,
        **task_settings(),
    )
