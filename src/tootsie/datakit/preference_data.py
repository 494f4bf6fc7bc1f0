"""Preference pairs for DPO: read JSONL, reject malformed pairs by reason, tokenize into a pair cache.

A line is `{"messages": [...prompt turns...], "chosen": R, "rejected": R}` or
`{"prompt": "text", "chosen": R, "rejected": R}`, where a reply R is an
assistant string or a list of messages (the reply's turns). A prompt string
becomes one user turn. Lines that are not JSON, lack a field, have a malformed
prompt or reply, an unknown role, a non-string or empty content, identical
replies, or tokenize longer than `max_tokens` are dropped and counted under
their reason (`REJECT_REASONS`), as `datakit.chat_data` counts its drops.

The pair cache is a chat token cache (`tokens.bin`, `offsets.bin`,
`loss_mask.bin`, ledger) with one document per pair: the chosen conversation
(prompt + chosen reply, rendered with the chat template) followed by the
rejected one, and `chosen_tokens.npy` (int32, one per pair) saying where the
chosen part ends. The loss mask is on for the reply's assistant tokens only
(and their end of turn), never for the prompt, even for assistant turns inside
a multi-turn prompt. One pair per document keeps the two halves in the same
training row whatever the mixture's shuffle (`packing: {kind: document}`);
`train.dpo` splits the row back into two attention segments, and since RoPE
attention depends only on relative positions, the rejected half scores as it
would at position 0.

Example: `{"prompt": "What does len do?", "chosen": "Return the number of items.",
"rejected": "Return the absolute value."}` under ChatML gives one document
`<|im_start|>user\\nWhat does len do?<|im_end|>\\n<|im_start|>assistant\\nReturn
the number of items.<|im_end|>\\n<|im_start|>user\\n...absolute value.<|im_end|>\\n`
with the mask on the two replies and their `<|im_end|>`.
"""

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tootsie.datakit.chat_data import ChatEncoder, chat_cache_ledger, check_messages, iter_checked
from tootsie.datakit.chat_templates import Message, load_chat_template
from tootsie.datakit.parquet_io import write_npy_atomic
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.datakit.token_cache import TokenCacheWriter
from tootsie.datakit.tokenize import resolve_tokenizer_file

CHOSEN_TOKENS_FILE = "chosen_tokens.npy"
REJECT_REASONS = (
    "bad_json",
    "missing_field",
    "bad_prompt",
    "bad_reply",
    "unknown_role",
    "bad_content",
    "empty",
    "identical",
    "too_long",
)
"""Why a line is dropped: unparsable; not an object with `chosen`, `rejected` and one of `messages`/`prompt`;
a prompt that is not a string nor a non-empty list of message objects (or both kinds given); a reply that is not a
string nor a list of message objects with an assistant turn; a role outside chat_data.ROLES; a non-string
content; an empty (whitespace-only) prompt, reply or content; chosen equal to rejected; a pair longer than
`max_tokens` tokens."""


@dataclass(frozen=True)
class PreferencePair:
    """A prompt and two continuations of it, the first preferred."""

    prompt: list[Message]
    """The turns before the replies (a prompt string is one user turn)."""
    chosen: list[Message]
    """The preferred reply's turns."""
    rejected: list[Message]
    """The other reply's turns."""

    def encode(self, encoder: ChatEncoder) -> tuple[np.ndarray, np.ndarray, int]:
        """One document: chosen conversation then rejected conversation; its mask (on the replies' assistant
        turns only, never the prompt's); the chosen part's length."""
        prompt_replies = sum(m["role"] == "assistant" for m in self.prompt)
        chosen_ids, chosen_mask = encoder.encode(self.prompt + self.chosen, masked_from=prompt_replies)
        rejected_ids, rejected_mask = encoder.encode(self.prompt + self.rejected, masked_from=prompt_replies)
        return (
            np.concatenate([chosen_ids, rejected_ids]),
            np.concatenate([chosen_mask, rejected_mask]),
            len(chosen_ids),
        )


def _prompt(record: dict) -> list[Message] | str:
    if "messages" in record and "prompt" in record:
        return "bad_prompt"
    if "prompt" in record:
        text = record["prompt"]
        if not isinstance(text, str):
            return "bad_prompt"
        return [{"role": "user", "content": text}] if text.strip() else "empty"
    checked = check_messages(record["messages"], empty="empty")
    return "bad_prompt" if checked == "not_messages" else checked


def _reply(value: object) -> list[Message] | str:
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}] if value.strip() else "empty"
    checked = check_messages(value, empty="empty")
    if checked == "not_messages" or (isinstance(checked, list) and not any(m["role"] == "assistant" for m in checked)):
        return "bad_reply"
    return checked


def check_pair(line: str) -> PreferencePair | str:
    """The pair on one JSONL line, or the reason (one of REJECT_REASONS but too_long) it is rejected."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return "bad_json"
    if not (
        isinstance(record, dict)
        and "chosen" in record
        and "rejected" in record
        and ("messages" in record or "prompt" in record)
    ):
        return "missing_field"
    parts = [_prompt(record), _reply(record["chosen"]), _reply(record["rejected"])]
    for part in parts:
        if isinstance(part, str):
            return part
    prompt, chosen, rejected = parts
    return "identical" if chosen == rejected else PreferencePair(prompt, chosen, rejected)


def iter_pairs(path: str | Path, rejected: Counter[str]) -> Iterator[PreferencePair]:
    """Every well-formed pair under `path` (a JSONL file or a directory of them); drops counted by reason."""
    return iter_checked(path, check_pair, rejected)


@dataclass(frozen=True)
class PreferenceTokenizeConfig:
    """Which preference pairs to tokenize, with which tokenizer and chat template, and the longest pair kept."""

    input: str
    """A JSONL file of preference pairs, or a directory of *.jsonl files."""
    tokenizer: str
    """A local tokenizer.json, or a directory holding one."""
    chat_template: str = "llama3"
    """A built-in template name (llama3, chatml) or the path of a Jinja template file."""
    max_tokens: int = 512
    """Longest pair (chosen + rejected tokens) kept: DPO trains with seq_len at least this, one pair per row."""

    def __post_init__(self) -> None:
        if self.max_tokens <= 1:
            raise ValueError(f"max_tokens must be above 1, got {self.max_tokens}; e.g. 512")


def tokenize_preferences(config: PreferenceTokenizeConfig, output_path: str) -> dict[str, object]:
    """Encode every well-formed pair into a pair cache (one document per pair); return its ledger."""
    tokenizer_file = resolve_tokenizer_file(config.tokenizer)
    tokenizer, special = load_with_special_tokens(tokenizer_file)
    template = load_chat_template(config.chat_template)
    encoder = ChatEncoder(tokenizer, template, bos_token=special.bos or "", eos_token=special.eos or "")
    rejected: Counter[str] = Counter()
    ledger_extra = {
        **chat_cache_ledger(tokenizer_file, special, str(config.input), config.chat_template, template),
        "max_tokens": config.max_tokens,
    }
    writer = TokenCacheWriter(
        output_path, vocab_size=tokenizer.get_vocab_size(), ledger_extra=ledger_extra, loss_mask=True
    )
    chosen_tokens, loss_tokens, longest = [], 0, 0
    for pair in iter_pairs(config.input, rejected):
        ids, mask, chosen = pair.encode(encoder)
        if len(ids) > config.max_tokens:
            rejected["too_long"] += 1
            continue
        writer.append(ids, mask)
        chosen_tokens.append(chosen)
        loss_tokens += int(mask.sum())
        longest = max(longest, len(ids))
    write_npy_atomic(np.asarray(chosen_tokens, dtype=np.int32), Path(output_path) / CHOSEN_TOKENS_FILE)
    ledger_extra |= {
        "pairs": len(chosen_tokens),
        "loss_tokens": loss_tokens,
        "longest_pair": longest,
        "rejected": dict(sorted(rejected.items())),
    }
    return writer.close()
