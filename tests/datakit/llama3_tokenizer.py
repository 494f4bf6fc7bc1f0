"""A Llama 3-style tokenizer built locally: same pre-tokenizer regex, same special-token layout, small vocabulary.

Llama 3's `tokenizer.json` splits text with the regex below (isolated), then
maps bytes with ByteLevel (no regex of its own), decodes with ByteLevel, and
numbers its special tokens right after the 128,000 BPE tokens:
`<|begin_of_text|>` = 128000, `<|end_of_text|>` = 128001, ..., `<|eot_id|>` =
128009. Here the BPE part is trained on a few strings, so the specials start
at `base` (the trained size) in the same order. The post-processor prepends
`<|begin_of_text|>` as Llama 3's does, and `tokenizer_config.json` names BOS
and EOS as the Llama 3 base model's does.
"""

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|reserved_special_token_2|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
)
"""Llama 3's first ten special tokens, ids 128000-128009 there and base + 0..9 here."""
TEXTS = [
    f"Document {i}: the café serves naïve crêpes — ½ price on day {i}. 日本語のテキスト {i * 7}! 🙂\n"
    f"def handler_{i}(request):\n    return {{'status': {200 + i}, \"body\": 'ok'}}\n"
    for i in range(120)
]
"""Training and test text with 2-, 3- and 4-byte UTF-8 characters, so byte counts are not token counts."""


def build_llama3_tokenizer(directory: Path, vocab_size: int = 400, config: bool = True) -> Path:
    """Write `tokenizer.json` (and, if `config`, `tokenizer_config.json`) under `directory`; return the json path."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TEXTS, trainer=trainer)
    base = tokenizer.get_vocab_size()
    tokenizer.add_special_tokens(list(LLAMA3_SPECIALS))
    tokenizer.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A:0",
                pair="<|begin_of_text|> $A:0 <|begin_of_text|>:1 $B:1",
                special_tokens=[("<|begin_of_text|>", base)],
            ),
        ]
    )
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    if config:
        (directory / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "bos_token": "<|begin_of_text|>",
                    "eos_token": "<|end_of_text|>",
                    "tokenizer_class": "PreTrainedTokenizerFast",
                    "model_max_length": 131072,
                }
            ),
            encoding="utf-8",
        )
    return directory / "tokenizer.json"
