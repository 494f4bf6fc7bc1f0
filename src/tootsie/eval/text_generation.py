"""Text in, text out: a model, its tokenizer and a chat template around `tootsie.models.generate`.

A plain prompt is encoded after BOS, as every training document starts. A chat
is rendered with the chat template (`add_generation_prompt=True`, the `bos_token`
filled in) and encoded as it stands, so the ids are those `transformers`'
`apply_chat_template` gives. Generation stops at EOS and, for chats, at the
template's end-of-turn marker: its token id when the tokenizer has it as one
token, else as a stop string. The returned text leaves out special tokens and
is cut before the first stop string.

The chat template is `--chat-template NAME|FILE` when given, else the
`chat_template` in the tokenizer's `tokenizer_config.json`, else `llama3`.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tokenizers import Tokenizer

from tootsie.datakit.chat_templates import END_OF_TURN, Message, load_chat_template, render_chat
from tootsie.datakit.special_tokens import TOKENIZER_CONFIG_FILE, SpecialTokens, load_with_special_tokens
from tootsie.datakit.tokenizer import TOKENIZER_FILE
from tootsie.errors import TootsieError
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.llama import LlamaModel

DEFAULT_CHAT_TEMPLATE = "llama3"
"""The template used when neither the command line nor the tokenizer config names one."""


@dataclass(frozen=True)
class TextGeneration:
    """One prompt's continuation: the text, the generated ids, and why it stopped."""

    text: str
    tokens: tuple[int, ...]
    stop_reason: str


def tokenizer_chat_template(tokenizer_path: str | Path) -> str | None:
    """The `chat_template` string in the tokenizer's `tokenizer_config.json`, if there is one."""
    path = Path(tokenizer_path)
    config = (path if path.is_dir() else path.parent) / TOKENIZER_CONFIG_FILE
    if not config.is_file():
        return None
    try:
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
    except json.JSONDecodeError as error:
        raise TootsieError(f"{config} is not valid JSON ({error}); fix or delete it") from error
    return template if isinstance(template, str) else None


def resolve_chat_template(name_or_file: str | None, tokenizer_path: str | Path) -> str:
    """The chat template's Jinja source: the one named, else the tokenizer config's, else llama3."""
    if name_or_file is not None:
        return load_chat_template(name_or_file)
    return tokenizer_chat_template(tokenizer_path) or load_chat_template(DEFAULT_CHAT_TEMPLATE)


class TextGenerator:
    """A model and its tokenizer, generating from text prompts or chats."""

    def __init__(self, model: LlamaModel, tokenizer: Tokenizer, special: SpecialTokens, chat_template: str) -> None:
        if tokenizer.get_vocab_size() > model.config.vocab_size:
            raise TootsieError(
                f"the tokenizer has {tokenizer.get_vocab_size()} tokens but the model only"
                f" {model.config.vocab_size}; pass the tokenizer the model was trained with"
            )
        self.model, self.tokenizer, self.chat_template = model, tokenizer, chat_template
        self.bos_id, self.eos_id = special.require("bos"), special.require("eos")
        self.bos_token = special.bos or ""
        markers = [m for m in END_OF_TURN.values() if m in chat_template]
        self.turn_ids = tuple(i for i in map(tokenizer.token_to_id, markers) if i is not None)
        self.turn_strings = tuple(m for m in markers if tokenizer.token_to_id(m) is None)

    @classmethod
    def load(cls, model: LlamaModel, tokenizer_path: str | Path, chat_template: str | None = None) -> "TextGenerator":
        """A generator over the tokenizer at `tokenizer_path` (a tokenizer.json or its folder)."""
        path = Path(tokenizer_path)
        if not (path / TOKENIZER_FILE if path.is_dir() else path).is_file():
            raise TootsieError(f"no tokenizer at {path}; pass a tokenizer.json or a folder holding one")
        tokenizer, special = load_with_special_tokens(path)
        return cls(model, tokenizer, special, resolve_chat_template(chat_template, path))

    def encode_prompt(self, text: str) -> list[int]:
        """Ids of a plain prompt, after BOS unless the text already starts with it."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids if ids[:1] == [self.bos_id] else [self.bos_id, *ids]

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        """Ids of a conversation rendered with the chat template, ending with the assistant's header."""
        text = render_chat(self.chat_template, list(messages), add_generation_prompt=True, bos_token=self.bos_token)
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def generate(
        self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig, chat: bool = False
    ) -> list[TextGeneration]:
        """Continue encoded prompts; stops at EOS (and the end of turn when `chat`) and at `sampling.stop_strings`."""
        stop_tokens = (self.eos_id, *(self.turn_ids if chat else ()), *sampling.stop_tokens)
        stop_strings = (*sampling.stop_strings, *(self.turn_strings if chat else ()))
        sampling = replace(sampling, stop_tokens=tuple(dict.fromkeys(stop_tokens)), stop_strings=stop_strings)
        results = []
        for generation in generate(self.model, prompts, sampling, self.decode):
            text = self.decode(list(generation.tokens))
            for stop in stop_strings:
                text = text.split(stop)[0]
            results.append(TextGeneration(text, generation.tokens, generation.stop_reason))
        return results

    def decode(self, ids: list[int]) -> str:
        """Text of ids without special tokens."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)
