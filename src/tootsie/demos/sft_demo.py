"""The demo's SFT stage: fine-tune the demo's final checkpoint on a chat set built from stdlib docstrings.

Steps (all through the executor, so a second run skips what is done):

    demo (tokenizer, train/cooldown)       the base model and its tokenizer, as `tootsie demo` builds them
    demo/chat/<set>                        conversations from docstrings (corpora.stdlib_chat), train + heldout
    demo/chat-tokenized/<set>/<split>      chat token caches with loss masks (ChatML template)

`sft_config` then returns a `TrainConfig` that warm-starts from the cooldown
checkpoint (weights only, steps counted from 0), mixes the chat sets with
`CHAT_MIX` weights, packs whole conversations (`packing: {kind:
whole_documents}`) and trains only on assistant tokens. `tootsie sft
--example-config` prints it; `tootsie train --config sft.yaml --out DIR` runs
it; `tootsie sft --evaluate` compares held-out assistant-token loss before
and after.
"""

from dataclasses import dataclass
from typing import Protocol

from tootsie.corpora.stdlib_chat import DEFAULT_MODULES, HELDOUT_FILE, TRAIN_FILE, StdlibChatConfig, build_stdlib_chat
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.data.sequences import WholeDocumentsConfig
from tootsie.datakit.tokenize import ChatTokenizeConfig, tokenize_chat
from tootsie.datakit.tokenizer import TOKENIZER_FILE
from tootsie.demos.stdlib_demo import DemoSettings, build_data_steps, build_steps
from tootsie.errors import TootsieError
from tootsie.executor import Step, failure_summary, run_experiment
from tootsie.models.llama import LlamaConfig
from tootsie.train.config import CheckpointConfig, InLoopEvalConfig, TrainConfig, WarmStartConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig

CHAT_SETS = {"builtins": ("builtins",), "modules": tuple(m for m in DEFAULT_MODULES if m != "builtins")}
"""Chat sets by name: which modules' docstrings each holds."""
CHAT_MIX = {"builtins": 0.4, "modules": 0.6}
"""SFT mixture weights (illustrative, not from the seeds): the card mixes its SFT sets by weight the same way."""
CHAT_TEMPLATE = "chatml"
"""ChatML, not llama3: the demo tokenizer splits a blank line before a word into two newline tokens but keeps
it one token at the end of a prompt, so llama3's header (ending in a blank line) tokenizes one way in training
and another at generation, and the tuned model answers nothing; ChatML's header ends in one newline, the same
token in both places."""
SPLIT_FILES = {"train": TRAIN_FILE, "heldout": HELDOUT_FILE}


@dataclass(frozen=True)
class SftSettings:
    """Length and learning rate of the SFT stage."""

    steps: int = 60
    """Fine-tuning steps."""
    seq_len: int = 256
    """Tokens per sequence: twice the demo's 128, so that whole conversations fit (the demo tokenizer splits
    the template's markers into several tokens each); RoPE models take the longer length as they are."""
    batch_size: int = 8
    """Sequences (each several whole conversations) per step."""
    peak_lr: float = 1e-3
    """Learning rate after warmup (a third of the demo's pretraining peak)."""
    warmup_steps: int = 5
    """Linear warmup steps."""


def build_sft_steps(settings: DemoSettings) -> tuple[Step, Step, dict[tuple[str, str], Step]]:
    """The demo's cooldown step (the base), its tokenizer step, and the chat caches by (set, split)."""
    summary = build_steps(settings)[0]
    base = summary.config.runs["cooldown"].step
    tokenizer, _ = build_data_steps(settings)
    caches = {}
    for name, modules in CHAT_SETS.items():
        chat = Step(f"demo/chat/{name}", build_stdlib_chat, StdlibChatConfig(modules=modules))
        for split, file in SPLIT_FILES.items():
            caches[name, split] = Step(
                f"demo/chat-tokenized/{name}/{split}",
                tokenize_chat,
                ChatTokenizeConfig(
                    input=chat.ref(file), tokenizer=tokenizer.ref(TOKENIZER_FILE), chat_template=CHAT_TEMPLATE
                ),
            )
    return base, tokenizer, caches


def sft_config(
    model: LlamaConfig,
    base: str,
    train_caches: dict[str, str],
    sft: SftSettings,
    evaluation: InLoopEvalConfig | None = None,
) -> TrainConfig:
    """SFT on `train_caches` (weighted by CHAT_MIX), warm-started from the checkpoint or run at `base`.

    `evaluation` names the held-out chat caches (BPB in the loop; `tootsie sft --evaluate` reads them too).
    """
    data = MixtureConfig(
        caches=train_caches,
        stages=(MixtureStage(0, {name: CHAT_MIX[name] for name in train_caches}, name="stdlib-chat"),),
        seq_len=sft.seq_len,
        batch_schedule=BatchSchedule.constant(sft.batch_size),
        packing=WholeDocumentsConfig(),
    )
    return finetune_config(model, data, base, sft, evaluation)


class FinetuneStage(Protocol):
    """The settings a post-training stage shares (`SftSettings`, `dpo_demo.DpoSettings`)."""

    steps: int
    peak_lr: float
    warmup_steps: int


def finetune_config(
    model: LlamaConfig,
    data: MixtureConfig,
    base: str,
    stage: FinetuneStage,
    evaluation: InLoopEvalConfig | None,
) -> TrainConfig:
    """A post-training stage of the demos (SFT, DPO) on `data`, warm-started from `base` with a fresh step count.

    AdamW without weight decay, WSD to `stage.peak_lr` decaying over the last third, one checkpoint at the end.
    """
    return TrainConfig(
        model=model,
        data=data,
        num_steps=stage.steps,
        optimizer=AdamWConfig(weight_decay=0.0),
        schedule=WSDConfig(
            peak_lr=stage.peak_lr,
            warmup_steps=stage.warmup_steps,
            decay_steps=stage.steps // 3,
            total_steps=stage.steps,
        ),
        warm_start=WarmStartConfig(base, load_optimizer=False, reset_step=True),
        checkpoints=CheckpointConfig(every_steps=stage.steps, every_minutes=None),
        eval=evaluation,
    )


def sft_example(prefix: str, settings: DemoSettings, sft: SftSettings) -> TrainConfig:
    """Build the base model and chat caches under `prefix` if missing; the SFT config over them."""
    base, tokenizer, caches = build_sft_steps(settings)
    report = run_experiment([base, tokenizer, *caches.values()], prefix)
    if not report.ok:
        raise TootsieError(f"building the SFT inputs failed: {failure_summary(report)}")
    paths = {step.name: step.output_path for step in report.steps}
    train = {name: paths[caches[name, "train"].name] for name in CHAT_SETS}
    heldout = {name: paths[caches[name, "heldout"].name] for name in CHAT_SETS}
    evaluation = InLoopEvalConfig(
        heldout=heldout, tokenizer=f"{paths[tokenizer.name]}/{TOKENIZER_FILE}", every_steps=sft.steps, max_sequences=16
    )
    return sft_config(base.config.model, paths[base.name], train, sft, evaluation)
