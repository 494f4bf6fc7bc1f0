"""A small preference set built from the stdlib docstring chat sets (`corpora.stdlib_chat`): no network.

Each conversation of a chat set gives one pair: the prompt is its system and
user turns ("What does `json.dumps` do?"), chosen is its own answer (the
docstring's first paragraph), rejected is a wrong one, by `rejection` kind:

- `other_answer`: the answer of another conversation of the same file, drawn
  with a seeded generator (never an identical text);
- `shuffled`: the right answer's words in a seeded random order.

The kinds alternate over conversations in the order given. Train pairs come
from each set's `train.jsonl` and held-out pairs from its `heldout.jsonl`, so
held-out pairs ask about functions training never saw. Files are written
atomically; everything is a function of the config and the chat files.

Example: `builtins.len` gives `{"messages": [system, user "What does `len` do?"],
"chosen": "Return the number of items in a container.", "rejected": "Return the
absolute value of the argument."}`.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tootsie.corpora.stdlib_chat import HELDOUT_FILE, TRAIN_FILE, write_text_atomic
from tootsie.errors import TootsieError

REJECTIONS = ("other_answer", "shuffled")


@dataclass(frozen=True)
class StdlibPreferenceConfig:
    """Which chat sets become preference pairs, how the rejected answers are made, and the seed."""

    chat_sets: tuple[str, ...]
    """Output directories of `corpora.stdlib_chat` steps (each with train.jsonl and heldout.jsonl)."""
    rejection: tuple[str, ...] = REJECTIONS
    """Rejected-answer kinds, alternating over conversations (see REJECTIONS)."""
    seed: int = 0
    """Seed of every random choice (other answers, word orders)."""

    def __post_init__(self) -> None:
        unknown = [kind for kind in self.rejection if kind not in REJECTIONS]
        if not self.rejection or unknown:
            raise ValueError(f"rejection must name kinds among {REJECTIONS}, got {self.rejection}")


def _rejected(answers: list[str], index: int, kind: str, rng: np.random.Generator) -> str | None:
    """A wrong answer for conversation `index`, or None when the kind cannot make one different from the right one."""
    answer = answers[index]
    if kind == "shuffled":
        words = answer.split()
        for _ in range(8):
            candidate = " ".join(words[i] for i in rng.permutation(len(words)))
            if candidate != answer:
                return candidate
        return None
    others = [i for i in range(len(answers)) if answers[i] != answer]
    return answers[others[int(rng.integers(len(others)))]] if others else None


def preference_lines(chat_file: Path, config: StdlibPreferenceConfig) -> list[str]:
    """The preference JSONL lines made from one chat file's conversations."""
    conversations = [json.loads(line)["messages"] for line in chat_file.read_text(encoding="utf-8").splitlines()]
    answers = [messages[-1]["content"] for messages in conversations]
    rng = np.random.default_rng([config.seed, len(answers)])
    lines = []
    for index, messages in enumerate(conversations):
        rejected = _rejected(answers, index, config.rejection[index % len(config.rejection)], rng)
        if rejected is not None:
            pair = {"messages": messages[:-1], "chosen": answers[index], "rejected": rejected}
            lines.append(json.dumps(pair, ensure_ascii=False))
    return lines


def build_stdlib_preferences(config: StdlibPreferenceConfig, output_path: str) -> dict[str, int]:
    """Write `train.jsonl` and `heldout.jsonl` of pairs under `output_path`; return their pair counts."""
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in (TRAIN_FILE, HELDOUT_FILE):
        lines = []
        for chat_set in config.chat_sets:
            file = Path(chat_set) / split
            if not file.is_file():
                raise TootsieError(f"{file} is missing: build the chat set with corpora.stdlib_chat first")
            lines += preference_lines(file, config)
        write_text_atomic(out / split, "".join(line + "\n" for line in lines))
        counts[split.removesuffix(".jsonl")] = len(lines)
    return counts
