"""The demo's DPO stage: preference-tune the demo SFT model on pairs built from stdlib docstrings.

Steps (all through the executor, so a second run skips what is done):

    demo/tokenizer, demo/chat/<set>         as `tootsie sft --example-config` builds them
    demo/preferences                        pairs: the right docstring answer over a wrong one
                                            (corpora.stdlib_preferences), train + heldout
    demo/preferences-tokenized/<split>      pair caches (ChatML, as the SFT stage)
    demo/dpo-reference                      the SFT model's log-probs of the train pairs,
                                            its path hashing the SFT checkpoint's files

`dpo_example` returns a `TrainConfig` that warm-starts from the SFT run's
newest checkpoint (weights only, steps from 0), reads one pair per row
(`packing: {kind: document}`) and minimizes the `dpo` objective against the
reference step. `tootsie dpo --example-config --sft DIR` prints it; `tootsie
train --config dpo.yaml --out DIR` runs it; `tootsie dpo --evaluate` compares
held-out preference accuracy of the SFT and DPO models.
"""

from dataclasses import dataclass, replace

from tootsie.corpora.stdlib_chat import StdlibChatConfig, build_stdlib_chat
from tootsie.corpora.stdlib_preferences import StdlibPreferenceConfig, build_stdlib_preferences
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.data.sequences import DocumentConfig
from tootsie.datakit.preference_data import PreferenceTokenizeConfig, tokenize_preferences
from tootsie.datakit.tokenizer import TOKENIZER_FILE
from tootsie.demos.sft_demo import CHAT_SETS, CHAT_TEMPLATE, SPLIT_FILES, finetune_config
from tootsie.demos.stdlib_demo import DemoSettings, build_data_steps
from tootsie.errors import TootsieError
from tootsie.eval.reference_logprobs import reference_logprobs_step
from tootsie.executor import Step, failure_summary, run_experiment
from tootsie.models.llama import LlamaConfig
from tootsie.train.checkpoint import model_config_of
from tootsie.train.config import InLoopEvalConfig, TrainConfig
from tootsie.train.loading import resolve_checkpoint
from tootsie.train.objectives import DPOObjective

PREFERENCES = "preferences"
"""The one mixture component (and held-out cache) name of the DPO config."""


@dataclass(frozen=True)
class DpoSettings:
    """Length, β and learning rate of the DPO stage."""

    steps: int = 40
    """DPO steps."""
    seq_len: int = 512
    """Tokens per row, one pair (chosen + rejected conversation) per row; longer pairs are dropped at tokenize."""
    batch_size: int = 8
    """Pairs per step."""
    beta: float = 0.1
    """DPO's β (the paper's and Tulu 3's common 0.1)."""
    peak_lr: float = 1e-4
    """Learning rate after warmup (a tenth of the SFT stage's: DPO moves a tuned model a little)."""
    warmup_steps: int = 4
    """Linear warmup steps."""


def build_preference_steps(settings: DemoSettings, dpo: DpoSettings) -> tuple[Step, dict[str, Step]]:
    """The demo's tokenizer step and the preference caches by split (train, heldout)."""
    tokenizer, _ = build_data_steps(settings)
    chats = [Step(f"demo/chat/{name}", build_stdlib_chat, StdlibChatConfig(modules=m)) for name, m in CHAT_SETS.items()]
    pairs = Step(
        "demo/preferences", build_stdlib_preferences, StdlibPreferenceConfig(chat_sets=tuple(c.ref() for c in chats))
    )
    caches = {
        split: Step(
            f"demo/preferences-tokenized/{split}",
            tokenize_preferences,
            PreferenceTokenizeConfig(
                input=pairs.ref(file),
                tokenizer=tokenizer.ref(TOKENIZER_FILE),
                chat_template=CHAT_TEMPLATE,
                max_tokens=dpo.seq_len,
            ),
        )
        for split, file in SPLIT_FILES.items()
    }
    return tokenizer, caches


def dpo_config(
    model: LlamaConfig, sft_run: str, train_cache: str, reference: str, dpo: DpoSettings, evaluation: InLoopEvalConfig
) -> TrainConfig:
    """DPO on `train_cache` against the `reference` step's log-probs, warm-started from `sft_run`."""
    data = MixtureConfig(
        caches={PREFERENCES: train_cache},
        stages=(MixtureStage(0, {PREFERENCES: 1.0}, name="stdlib-preferences"),),
        seq_len=dpo.seq_len,
        batch_schedule=BatchSchedule.constant(dpo.batch_size),
        packing=DocumentConfig(),
    )
    return replace(
        finetune_config(model, data, sft_run, dpo, evaluation),
        objective=DPOObjective(reference=reference, beta=dpo.beta),
    )


def dpo_example(prefix: str, sft_run: str, settings: DemoSettings, dpo: DpoSettings) -> TrainConfig:
    """Build the preference caches and the reference log-probs under `prefix` if missing; the DPO config."""
    model = model_config_of(resolve_checkpoint(sft_run))
    tokenizer, caches = build_preference_steps(settings, dpo)
    reference = reference_logprobs_step("demo/dpo-reference", model, sft_run, caches["train"].ref(), dpo.seq_len)
    report = run_experiment([tokenizer, *caches.values(), reference], prefix)
    if not report.ok:
        raise TootsieError(f"building the DPO inputs failed: {failure_summary(report)}")
    paths = {step.name: step.output_path for step in report.steps}
    evaluation = InLoopEvalConfig(
        heldout={PREFERENCES: paths[caches["heldout"].name]},
        tokenizer=f"{paths[tokenizer.name]}/{TOKENIZER_FILE}",
        every_steps=dpo.steps,
        max_sequences=8,
    )
    return dpo_config(
        model, str(resolve_checkpoint(sft_run)), paths[caches["train"].name], paths[reference.name], dpo, evaluation
    )
