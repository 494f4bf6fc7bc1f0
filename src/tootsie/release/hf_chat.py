"""The chat side of a Hugging Face export: the chat template and the end-of-turn token among the EOS ids.

A chat model must ship two things or `transformers` users cannot talk to it:
`chat_template` in `tokenizer_config.json` (what `apply_chat_template`
renders) and, in `generation_config.json`, an `eos_token_id` list holding the
end-of-turn token as well as the tokenizer's EOS. Marin's first 8B Instruct
export carried only `<|end_of_text|>` (128001), never `<|eot_id|>` (128009),
and its generation never stopped.

Where the template comes from, first found wins:

1. `--chat-template NAME|FILE` on the export command;
2. the run's chat token caches: their ledgers record the template they were
   tokenized with (`eval.run_chat_template`; two different ones are refused);
3. none: a pretraining run exports no chat template, and the export's JSON
   says so (`chat_template.origin`).

The end-of-turn marker is what the template writes after a reply
(`eval.text_generation.end_of_turn_markers`: `<|im_end|>` for ChatML,
`<|eot_id|>` for Llama 3). When the tokenizer has it as one token, its id joins
the EOS ids; when the marker is several ordinary tokens (tootsie's demo
tokenizer knows only `<|bos|>` and `<|eos|>`), no id can stand for it and the
export says so: `transformers` then stops there only with
`generate(stop_strings=[marker], tokenizer=...)`.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

from tootsie.datakit.chat_templates import load_chat_template, template_sha256
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.eval.run_chat_template import checkpoint_chat_template
from tootsie.eval.text_generation import end_of_turn_markers
from tootsie.train.checkpoint import PathOrUrl

FROM_FLAG = "--chat-template"
FROM_RUN = "the run's chat caches"
FROM_NOWHERE = "none: the run trained on no chat cache (pretraining); pass --chat-template NAME|FILE to ship one"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatExport:
    """The chat template an export ships (if any) and the end-of-turn token generation stops at."""

    name: str | None
    """A built-in name or a template file's path, as given or recorded; None when there is no template."""
    source: str | None
    """The Jinja source written to tokenizer_config.json's `chat_template`."""
    origin: str
    """Where it came from: `FROM_FLAG`, `FROM_RUN` or `FROM_NOWHERE`."""
    end_of_turn: str | None
    """What the template writes after a reply (`<|im_end|>`); None without a template."""
    end_of_turn_token_id: int | None
    """The marker's id when the tokenizer has it as one token, else None."""

    def eos_token_ids(self, eos_id: int) -> int | list[int]:
        """generation_config.json's `eos_token_id`: EOS and the end-of-turn token, or EOS alone."""
        if self.end_of_turn_token_id is None or self.end_of_turn_token_id == eos_id:
            return eos_id
        return [eos_id, self.end_of_turn_token_id]

    def record(self) -> dict[str, object]:
        """What the export's JSON and `tootsie_export.json` say about the chat template."""
        return {
            "name": self.name,
            "sha256": template_sha256(self.source) if self.source is not None else None,
            "origin": self.origin,
            "end_of_turn": self.end_of_turn,
            "end_of_turn_token_id": self.end_of_turn_token_id,
        }


def chat_export(checkpoint: PathOrUrl, tokenizer: Path, chat_template: str | None = None) -> ChatExport:
    """The chat template to export with `checkpoint` (the flag's, else the run's, else none) and its end of turn."""
    if chat_template is not None:
        name, source, origin = chat_template, load_chat_template(chat_template), FROM_FLAG
    else:
        recorded = checkpoint_chat_template(Path(checkpoint))
        if recorded is None:
            logger.info("no chat template exported: %s", FROM_NOWHERE)
            return ChatExport(None, None, FROM_NOWHERE, None, None)
        name, source, origin = recorded.name, recorded.source, FROM_RUN
    loaded, special = load_with_special_tokens(tokenizer)
    markers = end_of_turn_markers(source, bos_token=special.bos or "", eos_token=special.eos or "")
    marker = markers[0] if markers else None
    token_id = loaded.token_to_id(marker) if marker is not None else None
    if marker is not None and token_id is None:
        logger.warning(
            "the end of turn %r is not one token of %s, so generation_config.json cannot list it; "
            "transformers stops there only with generate(stop_strings=[%r], tokenizer=...)",
            marker,
            tokenizer,
            marker,
        )
    return ChatExport(name, source, origin, marker, token_id)
