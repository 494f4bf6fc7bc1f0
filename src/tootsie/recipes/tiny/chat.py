"""Local stand-ins for the SFT datasets: three kinds of conversations, split into one chat set per component.

The Marin 8B Instruct card names nine SFT datasets. At tiny scale each is
backed by a distinct slice of local conversations, so the mixture weights
decide what the model reads:

    kind     conversations                                               components (examples)
    docs     "What does `json.dumps` do?" → its docstring (stdlib_chat)  tulu_3_sft_mixture, smoltalk
    tasks    multi-turn small tasks (sort, reverse, convert; tiny_text)  dolphin_r1, natural_reasoning
    math     word problems → "The answer is N." (tiny_text)              openthoughts_114k_math

`build_tiny_chat` writes `components/<component>.jsonl` (component j of the n
of a kind gets the kind's train conversations i ≡ j mod n, so no two share
one) and `heldout/<kind>.jsonl` (every `heldout_every`-th conversation of each
kind), all atomically, and `stats.json` with the counts.

Example: `json.dumps` becomes `[system: "Answer questions about Python's
standard library in one paragraph.", user: "What does `json.dumps` do?",
assistant: "Serialize ``obj`` to a JSON formatted ``str``. ..."]`.
"""

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tootsie.corpora.stdlib_chat import StdlibChatConfig, stdlib_conversations
from tootsie.datakit.stats import STATS_FILE
from tootsie.jsonfile import write_json_atomic
from tootsie.recipes.tiny.text import instruction_document, math_problem

CHAT_KINDS = ("docs", "tasks", "math")
SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly."
COMPONENTS_DIR = "components"
HELDOUT_DIR = "heldout"

Message = dict[str, str]


@dataclass(frozen=True)
class TinyChatConfig:
    """How many conversations of each kind, which components share them, and how many are held out."""

    components: dict[str, str]
    """Component name → kind (one of CHAT_KINDS); the components of a kind share out its conversations."""
    stdlib: StdlibChatConfig = field(default_factory=lambda: StdlibChatConfig(heldout_every=1_000_000))
    """The docstring conversations (all of them; this step does its own held-out split)."""
    task_conversations: int = 600
    """Synthetic multi-turn task conversations."""
    math_conversations: int = 600
    """Synthetic word-problem conversations."""
    heldout_every: int = 10
    """Every this-many-th conversation of a kind is held out."""
    seed: int = 0
    """Seed of the synthetic conversations."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.components.values()) - set(CHAT_KINDS))
        if unknown:
            raise ValueError(f"components name kinds {unknown}; use kinds from {CHAT_KINDS}")
        if self.task_conversations <= 0 or self.math_conversations <= 0 or self.heldout_every < 2:
            raise ValueError(
                "need task_conversations > 0, math_conversations > 0 and heldout_every >= 2, got "
                f"{self.task_conversations=}, {self.math_conversations=}, {self.heldout_every=}"
            )


def task_conversation(rng: np.random.Generator) -> list[Message]:
    """Two to six small tasks as user/assistant turns (the pairs of `tiny_text.instruction_document`)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for pair in instruction_document(rng).split("\n\n"):
        instruction, response = pair.split("\n", 1)
        messages.append({"role": "user", "content": instruction.removeprefix("Instruction: ")})
        messages.append({"role": "assistant", "content": response.removeprefix("Response: ")})
    return messages


def math_conversation(rng: np.random.Generator) -> list[Message]:
    """One word problem (`tiny_text.math_problem`) and its answer."""
    question, answer = math_problem(rng)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
        {"role": "assistant", "content": f"The answer is {answer}."},
    ]


def conversations_by_kind(config: TinyChatConfig) -> Iterator[tuple[str, list[list[Message]]]]:
    """`(kind, conversations)` for the three kinds, each a function of the config alone."""
    yield "docs", stdlib_conversations(config.stdlib)
    rng = np.random.default_rng(config.seed)
    yield "tasks", [task_conversation(rng) for _ in range(config.task_conversations)]
    yield "math", [math_conversation(rng) for _ in range(config.math_conversations)]


def _write_jsonl(path: Path, conversations: list[list[Message]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(
        "".join(json.dumps({"messages": m}, ensure_ascii=False) + "\n" for m in conversations), encoding="utf-8"
    )
    os.replace(temporary, path)


def build_tiny_chat(config: TinyChatConfig, output_path: str) -> dict[str, dict[str, int]]:
    """Write each component's train JSONL and each kind's held-out JSONL; return conversations per file."""
    out = Path(output_path)
    counts: dict[str, dict[str, int]] = {COMPONENTS_DIR: {}, HELDOUT_DIR: {}}
    for kind, conversations in conversations_by_kind(config):
        every = config.heldout_every
        heldout = [c for i, c in enumerate(conversations) if i % every == every - 1]
        train = [c for i, c in enumerate(conversations) if i % every != every - 1]
        names = sorted(name for name, k in config.components.items() if k == kind)
        if len(train) < len(names):
            raise ValueError(f"kind {kind!r} has {len(train)} train conversations for {len(names)} components")
        _write_jsonl(out / HELDOUT_DIR / f"{kind}.jsonl", heldout)
        counts[HELDOUT_DIR][kind] = len(heldout)
        for j, name in enumerate(names):
            part = train[j :: len(names)]
            _write_jsonl(out / COMPONENTS_DIR / f"{name}.jsonl", part)
            counts[COMPONENTS_DIR][name] = len(part)
    write_json_atomic(out / STATS_FILE, counts)
    return counts
