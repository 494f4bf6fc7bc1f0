"""Chat templates: Jinja sources, rendering as `transformers` renders them, and assistant spans.

A chat template turns `[{"role", "content"}, ...]` into one string. tootsie
renders with the engine `transformers.apply_chat_template` uses (a jinja2
`ImmutableSandboxedEnvironment` with `trim_blocks` and `lstrip_blocks`, the
`loopcontrols` extension, a JSON `tojson` filter and a `raise_exception`
global), so the same template and messages give the same text, hence the same
token ids, on both sides.

One difference: `strftime_now`, which transformers answers with the local
date and time (Llama 3.1 and 3.2 put "Today Date: 26 Jul 2024" in the system
header with it), formats a fixed date instead, `date` (default `TEMPLATE_DATE`,
midnight), so a rendered conversation depends on the template and messages,
never on the day or the time zone it was rendered in. transformers renders the
same text when given `date_string="26 Jul 2024"`.

The loss mask needs the characters each assistant turn contributes. They are
found by rendering prefixes: for an assistant message `i`, the text of
`messages[:i]` with the generation prompt ends where the reply starts, and the
text of `messages[:i + 1]` ends where it stops. Whitespace the template adds
after the end-of-turn marker (ChatML's newline) is framing and stays off.
Worked example (chatml, one user and one assistant turn):

    <|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\nHello!<|im_end|>\\n
                                                          ^^^^^^^^^^^^^^^^ the span
"""

import hashlib
import json
from datetime import date as Date
from datetime import datetime, time
from functools import lru_cache, partial
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tootsie.errors import TootsieError

LLAMA3_TEMPLATE = (
    r"{% set loop_messages = messages %}{% for message in loop_messages %}"
    r"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    r"+ message['content'] | trim + '<|eot_id|>' %}"
    r"{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    r"{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
"""The Llama 3 Instruct template (Meta-Llama-3-8B-Instruct's tokenizer_config.json)."""
CHATML_TEMPLATE = (
    r"{% for message in messages %}"
    r"{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    r"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML as Qwen and many SFT mixtures write it, without a default system message."""

CHAT_TEMPLATES: dict[str, str] = {"llama3": LLAMA3_TEMPLATE, "chatml": CHATML_TEMPLATE}
"""Built-in templates by name: `--chat-template NAME` picks one, anything else is read as a Jinja file."""
END_OF_TURN: dict[str, str] = {"llama3": "<|eot_id|>", "chatml": "<|im_end|>"}
"""The marker that closes a turn in each built-in template: generation stops there."""

Message = dict[str, str]
TEMPLATE_DATE = "2024-07-26"
"""The date (ISO) `strftime_now` formats: the one Llama 3.1/3.2's template falls back to ("26 Jul 2024")."""


def load_chat_template(name_or_file: str) -> str:
    """The Jinja source of a built-in template by name, or of a user's template file."""
    if name_or_file in CHAT_TEMPLATES:
        return CHAT_TEMPLATES[name_or_file]
    path = Path(name_or_file)
    if not path.is_file():
        raise TootsieError(
            f"chat template {name_or_file!r} is neither a built-in ({', '.join(CHAT_TEMPLATES)}) nor a file; "
            "pass one of those names or the path of a Jinja template"
        )
    source = path.read_text(encoding="utf-8")
    _compile(source, str(path))
    return source


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: object, ensure_ascii: bool = False, indent: int | None = None, separators: object = None, sort_keys: bool = False
) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_on(day: str, format: str) -> str:
    """`strftime_now` of a template rendered on `day` (ISO date), at midnight: the clock is never read."""
    return datetime.combine(Date.fromisoformat(day), time()).strftime(format)


@lru_cache(maxsize=16)
def _compile(source: str, where: str = "chat template") -> jinja2.Template:
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    try:
        return environment.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as error:
        raise TootsieError(f"{where} is not a valid Jinja template: {error} (line {error.lineno})") from error


def render_chat(
    template: str,
    messages: list[Message],
    add_generation_prompt: bool,
    *,
    bos_token: str = "",
    eos_token: str = "",
    date: str = TEMPLATE_DATE,
) -> str:
    """Render `messages` with a template's Jinja source exactly as `apply_chat_template(tokenize=False)` would.

    A template's `strftime_now(format)` formats `date` (ISO, at midnight), not the clock."""
    return _compile(template).render(
        messages=messages,
        add_generation_prompt=add_generation_prompt,
        bos_token=bos_token,
        eos_token=eos_token,
        strftime_now=partial(_strftime_on, date),
    )


def assistant_spans(
    template: str, messages: list[Message], *, bos_token: str = "", eos_token: str = "", date: str = TEMPLATE_DATE
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the [start, end) character span of each assistant reply with its end of turn."""
    tokens = {"bos_token": bos_token, "eos_token": eos_token, "date": date}
    text = render_chat(template, messages, False, **tokens)
    spans = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render_chat(template, messages[:index], True, **tokens)
        through = render_chat(template, messages[: index + 1], False, **tokens)
        if not (through.startswith(before) and text.startswith(through)):
            raise TootsieError(
                f"the chat template does not render message {index} as a continuation of the ones before it, "
                "so its assistant tokens cannot be located; use a template whose output for a prefix of the "
                "messages (with the generation prompt) is a prefix of the output for all of them"
            )
        end = max(len(through.rstrip()), len(before))
        spans.append((len(before), end))
    return text, spans


def template_sha256(source: str) -> str:
    """The digest a chat cache's ledger records for a template's Jinja source (`chat_template_sha256`)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()
