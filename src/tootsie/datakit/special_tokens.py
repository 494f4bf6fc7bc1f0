"""Which tokens mark a document's start and end (BOS/EOS), read from the tokenizer a user brings.

A tokenizer is any HF `tokenizer.json` (tootsie's own, Llama 3's, GPT-2's...).
BOS and EOS are found, each on its own, in this order:

1. `tokenizer_config.json` beside `tokenizer.json` (the file `transformers`
   writes): its `bos_token` / `eos_token`, a string or an `{"content": ...}`
   object; an explicit `null` means the tokenizer has none;
2. the post-processor's template: the special token before `$A` in the
   single-sequence template is BOS, one after it is EOS (Llama 3 prepends
   `<|begin_of_text|>` this way);
3. the added special tokens, by the conventional names in `BOS_NAMES` /
   `EOS_NAMES` (tootsie's own `<|bos|>`/`<|eos|>` first).

Example: a Llama 3 folder gives `bos="<|begin_of_text|>"`, `eos="<|end_of_text|>"`
from its config, and `added` lists `<|eot_id|>` and the other specials with
their ids; the token cache ledger records all of it (`SpecialTokens.ledger`).
"""

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from tootsie.datakit.tokenizer import BOS_TOKEN, EOS_TOKEN, TOKENIZER_FILE, load_tokenizer
from tootsie.errors import TootsieError

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
BOS_NAMES = (BOS_TOKEN, "<|begin_of_text|>", "<s>", "<bos>", "[BOS]", "<|startoftext|>")
"""Conventional BOS names, tootsie's first (the order tokenizers are tried in when nothing else says)."""
EOS_NAMES = (EOS_TOKEN, "<|end_of_text|>", "</s>", "<eos>", "[EOS]", "<|endoftext|>")
"""Conventional EOS names, tootsie's first."""


@dataclass(frozen=True)
class SpecialTokens:
    """BOS/EOS of a tokenizer with their ids, where they were found, and every added special token."""

    bos: str | None
    """The token that starts a document, or None when the tokenizer has none."""
    eos: str | None
    """The token that ends a document, or None when the tokenizer has none."""
    bos_id: int | None
    """Id of `bos`."""
    eos_id: int | None
    """Id of `eos`."""
    source: dict[str, str]
    """Where each was found: `{"bos": "tokenizer_config.json" | "post_processor" | "added_tokens" | "none", ...}`."""
    added: dict[str, int]
    """Every special added token (content → id), e.g. Llama 3's `<|eot_id|>`."""

    def require(self, which: str) -> int:
        """The id of `"bos"` or `"eos"`, or an error saying how to provide it or turn it off."""
        token_id = self.bos_id if which == "bos" else self.eos_id
        if token_id is None:
            raise TootsieError(
                f"the tokenizer has no {which.upper()} token (looked in {TOKENIZER_CONFIG_FILE} `{which}_token`,"
                f" the post-processor and the added tokens {sorted(self.added)}); add `{which}_token` to a"
                f" {TOKENIZER_CONFIG_FILE} beside tokenizer.json, or tokenize with add_{which}=False (--no-{which})"
            )
        return token_id

    def ledger(self) -> dict[str, object]:
        """The record a token cache ledger keeps under `special_tokens` (beside its `bos_id`/`eos_id`)."""
        return {"bos_token": self.bos, "eos_token": self.eos, "source": self.source, "added": self.added}


def _content(value: object, where: str) -> str | None:
    """The token text of a `bos_token`-style config value: a string, `{"content": ...}` or null."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise TootsieError(f"{where} is {value!r}; give a token string or {{'content': TOKEN}}")


def template_tokens(tokenizer: Tokenizer) -> tuple[str | None, str | None]:
    """(special token before `$A`, after `$A`) in the tokenizer's single-sequence post-processor template."""
    return _template_tokens(json.loads(tokenizer.to_str()).get("post_processor"))


def _template_tokens(processor: dict | None) -> tuple[str | None, str | None]:
    """(token before `$A`, token after `$A`) of the first TemplateProcessing found in a post-processor's JSON."""
    if not processor:
        return None, None
    if processor.get("type") == "Sequence":
        for inner in processor.get("processors", []):
            found = _template_tokens(inner)
            if found != (None, None):
                return found
        return None, None
    if processor.get("type") != "TemplateProcessing":
        return None, None
    pieces = [next(iter(piece.items())) for piece in processor.get("single", [])]
    sequence = next((i for i, (kind, _) in enumerate(pieces) if kind == "Sequence"), len(pieces))
    before = [value["id"] for kind, value in pieces[:sequence] if kind == "SpecialToken"]
    after = [value["id"] for kind, value in pieces[sequence + 1 :] if kind == "SpecialToken"]
    return (before[0] if before else None), (after[-1] if after else None)


def resolve_special_tokens(tokenizer: Tokenizer, directory: Path | None) -> SpecialTokens:
    """BOS/EOS of `tokenizer`, whose `tokenizer.json` lies in `directory` (None: no config file to read)."""
    added = {t.content: i for i, t in sorted(tokenizer.get_added_tokens_decoder().items()) if t.special}
    config_file = directory / TOKENIZER_CONFIG_FILE if directory is not None else None
    config: dict = {}
    if config_file is not None and config_file.is_file():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise TootsieError(f"{config_file} is not valid JSON ({error}); fix or delete it") from error
    template = dict(zip(("bos", "eos"), template_tokens(tokenizer)))
    names = {"bos": BOS_NAMES, "eos": EOS_NAMES}
    found: dict[str, str | None] = {}
    source: dict[str, str] = {}
    for which in ("bos", "eos"):
        key = f"{which}_token"
        if key in config:
            found[which], source[which] = _content(config[key], f"{config_file} `{key}`"), TOKENIZER_CONFIG_FILE
        elif template[which] is not None:
            found[which], source[which] = template[which], "post_processor"
        else:
            name = next((n for n in names[which] if n in added), None)
            found[which], source[which] = name, "added_tokens" if name is not None else "none"
    ids = {which: _token_id(tokenizer, token, source[which], config_file) for which, token in found.items()}
    return SpecialTokens(found["bos"], found["eos"], ids["bos"], ids["eos"], source, added)


def _token_id(tokenizer: Tokenizer, token: str | None, source: str, config_file: Path | None) -> int | None:
    """The id of a resolved special token, or an error naming where the unknown token came from."""
    if token is None:
        return None
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        where = config_file if source == TOKENIZER_CONFIG_FILE else f"the tokenizer's {source}"
        raise TootsieError(f"{where} names {token!r}, which is not in the tokenizer's vocabulary; fix the name")
    return token_id


def load_with_special_tokens(path: str | Path) -> tuple[Tokenizer, SpecialTokens]:
    """Load a local `tokenizer.json` (or the one in a directory) and resolve its BOS/EOS beside it."""
    file = Path(path)
    file = file / TOKENIZER_FILE if file.is_dir() else file
    tokenizer = load_tokenizer(file)
    return tokenizer, resolve_special_tokens(tokenizer, file.parent)
