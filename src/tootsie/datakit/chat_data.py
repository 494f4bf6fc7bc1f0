"""Chat conversations: read JSONL, reject malformed ones by reason, encode with a per-token loss mask.

A line is `{"messages": [{"role": "system"|"user"|"assistant", "content": str}, ...]}`
(the OpenAI / Tulu shape). A line that is not valid JSON, not that shape, uses
another role (tool and function calls are not supported), has an empty or
non-string content, or has no assistant turn is dropped and counted under its
reason, as every datakit stage counts what it drops.

Encoding renders the conversation with the chat template (see
`datakit.chat_templates`), tokenizes the whole text once, as
`apply_chat_template(tokenize=True)` does, and turns the assistant character
spans into a token mask with the tokenizer's offsets: a token is on when it
starts inside an assistant span (the reply and its end-of-turn marker).
"""

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from tokenizers import Tokenizer

from tootsie.datakit.chat_templates import CHAT_TEMPLATES, Message, assistant_spans, template_sha256
from tootsie.datakit.special_tokens import SpecialTokens
from tootsie.datakit.tokenizer import file_sha256
from tootsie.errors import TootsieError
from tootsie.executor.portable import portable

T = TypeVar("T")
ROLES = ("system", "user", "assistant")
REJECT_REASONS = ("bad_json", "not_a_conversation", "unknown_role", "bad_content", "empty_content", "no_assistant_turn")
"""Why a line is dropped: unparsable, no `messages` list of objects, a role outside ROLES, a content that
is not a string, an empty (or whitespace-only) content, and no assistant message to learn from."""


def check_messages(value: object, *, empty: str = "empty_content") -> list[Message] | str:
    """`value` as messages (role and content only), or why it is not: "not_messages" (not a non-empty list of
    objects), "unknown_role", "bad_content" (not a string) or `empty` (a whitespace-only content)."""
    if not isinstance(value, list) or not value or not all(isinstance(m, dict) for m in value):
        return "not_messages"
    if any(m.get("role") not in ROLES for m in value):
        return "unknown_role"
    if any(not isinstance(m.get("content"), str) for m in value):
        return "bad_content"
    if any(not m["content"].strip() for m in value):
        return empty
    return [{"role": m["role"], "content": m["content"]} for m in value]


def check_conversation(line: str) -> list[Message] | str:
    """The messages of one JSONL line, or the reason (one of REJECT_REASONS) it is rejected."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return "bad_json"
    messages = check_messages(record.get("messages") if isinstance(record, dict) else None)
    if messages == "not_messages":
        return "not_a_conversation"
    if isinstance(messages, list) and not any(m["role"] == "assistant" for m in messages):
        return "no_assistant_turn"
    return messages


def chat_files(path: str | Path) -> list[Path]:
    """The JSONL file itself, or every `*.jsonl` file under a directory, sorted."""
    root = Path(path)
    files = sorted(root.rglob("*.jsonl")) if root.is_dir() else [root]
    if not files or not all(file.is_file() for file in files):
        raise TootsieError(f"chat input {root} is not a JSONL file nor a directory holding *.jsonl files")
    return files


def iter_checked(path: str | Path, check: Callable[[str], T | str], rejected: Counter[str]) -> Iterator[T]:
    """What `check` makes of every non-blank line under `path`; each line it rejects adds one to `rejected[reason]`."""
    for file in chat_files(path):
        with open(file, encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                checked = check(line)
                if isinstance(checked, str):
                    rejected[checked] += 1
                else:
                    yield checked


def iter_conversations(path: str | Path, rejected: Counter[str]) -> Iterator[list[Message]]:
    """Every well-formed conversation under `path`; each rejected line adds one to `rejected[reason]`."""
    return iter_checked(path, check_conversation, rejected)


def encode_spans(tokenizer: Tokenizer, text: str, spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Ids (int64) of `text`, tokenized once, and the uint8 mask on the tokens that start inside a span."""
    encoding = tokenizer.encode(text, add_special_tokens=False)
    starts = np.fromiter((start for start, _ in encoding.offsets), dtype=np.int64, count=len(encoding.ids))
    mask = np.zeros(len(starts), dtype=np.uint8)
    for start, end in spans:
        mask |= ((starts >= start) & (starts < end)).astype(np.uint8)
    return np.asarray(encoding.ids, dtype=np.int64), mask


@dataclass(frozen=True)
class ChatEncoder:
    """A tokenizer and a chat template that turn messages into token ids and a loss mask."""

    tokenizer: Tokenizer
    """Encodes the rendered text once, with character offsets."""
    template: str
    """The Jinja chat template's source."""
    bos_token: str = ""
    """What the template's `bos_token` renders as ("" for none)."""
    eos_token: str = ""
    """What the template's `eos_token` renders as ("" for none)."""

    def encode(self, messages: list[Message], *, masked_from: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (int64) and the uint8 mask that is 1 on the assistant replies (from the `masked_from`-th one
        on: 0 is the first) and their end of turn."""
        text, spans = assistant_spans(self.template, messages, bos_token=self.bos_token, eos_token=self.eos_token)
        return encode_spans(self.tokenizer, text, spans[masked_from:])


def chat_cache_ledger(
    tokenizer_file: Path, special: SpecialTokens, source: str, template_name: str, template: str
) -> dict[str, object]:
    """The ledger fields every chat-templated cache records: its tokenizer, specials, source and template.

    `chat_template_sha256` is what `eval.run_chat_template` matches to find the template a run trained with.
    The source and a template file are named relative to the prefix under the executor (`executor.portable`).
    """
    return {
        "tokenizer_sha256": file_sha256(tokenizer_file),
        "bos_id": None,
        "eos_id": None,
        "special_tokens": special.ledger(),
        "source": portable(source),
        "chat_template": template_name if template_name in CHAT_TEMPLATES else portable(template_name),
        "chat_template_sha256": template_sha256(template),
    }
