"""Text in, text out: a model, its tokenizer and a chat template around `tootsie.models.generate`.

A plain prompt is encoded after BOS, as every training document starts. A chat
is rendered with the chat template (`add_generation_prompt=True`, the `bos_token`
filled in) and encoded as it stands, so the ids are those `transformers`'
`apply_chat_template` gives. Generation stops at EOS and, for chats, at the
template's end-of-turn marker: its token id when the tokenizer has it as one
token, else as a stop string. The returned text leaves out special tokens and
is cut before the first stop string (and, for chats, the end-of-turn marker). A chat that ends at the template's
end-of-turn marker (token or string) reports `stop_reason` `"end_of_turn"`;
EOS stays `"eos"`.

The chat template is `--chat-template NAME|FILE` when given, else the one the
checkpoint's run trained with (its chat caches' ledgers,
`eval.run_chat_template`), else the `chat_template` in the tokenizer's
`tokenizer_config.json`, else `llama3`.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import jinja2
from tokenizers import Tokenizer

from tootsie.datakit.chat_templates import END_OF_TURN, Message, load_chat_template, render_chat
from tootsie.datakit.special_tokens import TOKENIZER_CONFIG_FILE, SpecialTokens, load_with_special_tokens
from tootsie.datakit.tokenizer import TOKENIZER_FILE
from tootsie.errors import TootsieError
from tootsie.models.generate import SamplingConfig, generate
from tootsie.models.llama import LlamaModel

DEFAULT_CHAT_TEMPLATE = "llama3"
"""The template used when neither the command line, the run nor the tokenizer config names one."""
END_OF_TURN_PROBE = "Hello."
"""An assistant reply rendered to find what a template writes after a reply (`end_of_turn_markers`)."""
END_OF_TURN_STOP = "end_of_turn"
"""The `stop_reason` of a chat reply that ended at the template's end-of-turn marker."""


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


def resolve_chat_template(name_or_file: str | None, tokenizer_path: str | Path, recorded: str | None = None) -> str:
    """The chat template's Jinja source: the one named, else the run's `recorded` one, else the tokenizer
    config's, else llama3."""
    if name_or_file is not None:
        return load_chat_template(name_or_file)
    return recorded or tokenizer_chat_template(tokenizer_path) or load_chat_template(DEFAULT_CHAT_TEMPLATE)


def end_of_turn_markers(template: str, *, bos_token: str = "", eos_token: str = "") -> tuple[str, ...]:
    """What the template writes after an assistant reply (stripped of whitespace): where generation stops.

    Found by rendering a probe reply, so a user's template works too (ChatML gives `<|im_end|>`, llama3
    `<|eot_id|>`, a template closing turns with EOS gives `eos_token`); a template the probe cannot render
    falls back to the built-in markers it contains.
    """
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": END_OF_TURN_PROBE}]
    tokens = {"bos_token": bos_token, "eos_token": eos_token}
    try:
        before = render_chat(template, messages[:1], True, **tokens)
        through = render_chat(template, messages, False, **tokens)
    except jinja2.exceptions.TemplateError:
        return tuple(m for m in END_OF_TURN.values() if m in template)
    if not through.startswith(before + END_OF_TURN_PROBE):
        return tuple(m for m in END_OF_TURN.values() if m in template)
    marker = through[len(before) + len(END_OF_TURN_PROBE) :].strip()
    return (marker,) if marker else ()


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
        markers = end_of_turn_markers(chat_template, bos_token=self.bos_token, eos_token=special.eos or "")
        self.turn_markers = markers
        self.turn_ids = tuple(i for i in map(tokenizer.token_to_id, markers) if i is not None)
        self.turn_strings = tuple(m for m in markers if tokenizer.token_to_id(m) is None)

    @classmethod
    def load(
        cls,
        model: LlamaModel,
        tokenizer_path: str | Path,
        chat_template: str | None = None,
        recorded_template: str | None = None,
    ) -> "TextGenerator":
        """A generator over the tokenizer at `tokenizer_path` (a tokenizer.json or its folder).

        `chat_template` is a name or file (wins); `recorded_template` the Jinja source the model's run trained with.
        """
        path = Path(tokenizer_path)
        if not (path / TOKENIZER_FILE if path.is_dir() else path).is_file():
            raise TootsieError(f"no tokenizer at {path}; pass a tokenizer.json or a folder holding one")
        tokenizer, special = load_with_special_tokens(path)
        return cls(model, tokenizer, special, resolve_chat_template(chat_template, path, recorded_template))

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
            reason = generation.stop_reason
            if chat and self._ends_turn(generation.tokens, reason, text):
                reason = END_OF_TURN_STOP
            for stop in (*stop_strings, *(self.turn_markers if chat else ())):
                text = text.split(stop)[0]
            results.append(TextGeneration(text, generation.tokens, reason))
        return results

    def _ends_turn(self, tokens: Sequence[int], reason: str, text: str) -> bool:
        """Whether a chat reply stopped at the end-of-turn marker: its token, or its string in the text."""
        if reason == "eos":
            return bool(tokens) and tokens[-1] in self.turn_ids
        return reason == "stop_string" and any(marker in text for marker in self.turn_strings)

    def decode(self, ids: list[int]) -> str:
        """Text of ids without special tokens."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)
