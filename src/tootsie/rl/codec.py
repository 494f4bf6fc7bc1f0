"""Prompts to token ids and completions back to text, with the policy's own tokenizer (`rl.rollout.Codec`).

Example: `TokenizerCodec.load("tok/tokenizer.json").encode("Question: 2 + 2?\\nAnswer:")` starts with BOS, as
the policy saw every document in training; `decode` drops special tokens (a completion's final EOS).
"""

from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from tootsie.datakit.special_tokens import load_with_special_tokens


@dataclass(frozen=True)
class TokenizerCodec:
    """A local tokenizer.json with its BOS and EOS ids."""

    tokenizer: Tokenizer
    bos_id: int
    eos_id: int

    @classmethod
    def load(cls, path: str | Path) -> "TokenizerCodec":
        """The codec of a tokenizer.json (or a folder holding one); its BOS and EOS must be known."""
        tokenizer, special = load_with_special_tokens(path)
        return cls(tokenizer, special.require("bos"), special.require("eos"))

    def encode(self, text: str) -> list[int]:
        """BOS, then the ids of `text`."""
        return [self.bos_id, *self.tokenizer.encode(text, add_special_tokens=False).ids]

    def decode(self, ids: list[int]) -> str:
        """The text of `ids`, special tokens dropped."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)
