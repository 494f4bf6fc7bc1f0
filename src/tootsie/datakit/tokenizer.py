"""Train a byte-level BPE tokenizer with HF `tokenizers`, and load local tokenizer files.

Byte-level BPE maps every input byte to one of 256 printable characters before
merging, so any text is encodable with no unknown token. tootsie's own
tokenizers carry `<|bos|>` and `<|eos|>`; a tokenizer a user brings (any HF
`tokenizer.json`) names its own, found by `datakit.special_tokens`.
"""

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tootsie.configfile import hashed_when_set
from tootsie.datakit.parquet_io import iter_texts
from tootsie.errors import TootsieError
from tootsie.jsonfile import write_json_atomic

BOS_TOKEN = "<|bos|>"
EOS_TOKEN = "<|eos|>"
TOKENIZER_FILE = "tokenizer.json"


@dataclass(frozen=True)
class TokenizerTrainConfig:
    """Training text and vocabulary size of a byte-level BPE tokenizer."""

    inputs: tuple[str, ...]
    """Document directories whose `text` the tokenizer is trained on."""
    vocab_size: int = 4096
    """Final vocabulary size, special tokens and the 256 byte tokens included."""
    min_frequency: int = 2
    """A pair must occur at least this often to be merged."""
    split_digits: bool | None = hashed_when_set()
    """Every digit its own token (Llama 2's choice), so a model can learn arithmetic digit by digit; None: off."""

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError("inputs is empty: give at least one document directory")
        if self.vocab_size < 260:
            raise ValueError(f"vocab_size must be >= 260 (256 bytes + specials), got {self.vocab_size}")


def _texts(inputs: tuple[str, ...]) -> Iterator[str]:
    for directory in inputs:
        for batch in iter_texts(directory):
            yield from batch


def train_bpe(config: TokenizerTrainConfig) -> Tokenizer:
    """Train a byte-level BPE tokenizer on the inputs' texts."""
    tokenizer = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    digits = [pre_tokenizers.Digits(individual_digits=True)] if config.split_digits else []
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([*digits, byte_level]) if digits else byte_level
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=[BOS_TOKEN, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_texts(config.inputs), trainer=trainer)
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, path: Path) -> dict[str, object]:
    """Write `tokenizer.json` atomically at `path`; return its vocab size and sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tokenizer.save(str(tmp))
    tmp.replace(path)
    return {"vocab_size": tokenizer.get_vocab_size(), "sha256": file_sha256(path), "path": str(path)}


def train_tokenizer(config: TokenizerTrainConfig, output_path: str) -> dict[str, object]:
    """Step: train BPE and write `tokenizer.json` plus `tokenizer_info.json` under `output_path`."""
    out = Path(output_path)
    info = save_tokenizer(train_bpe(config), out / TOKENIZER_FILE)
    write_json_atomic(out / "tokenizer_info.json", {k: v for k, v in info.items() if k != "path"})
    return info


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes (identifies a tokenizer in cache ledgers)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a local `tokenizer.json`, or the one inside a directory; never touches a hub."""
    file = Path(path)
    if file.is_dir():
        file = file / TOKENIZER_FILE
    if not file.is_file():
        raise TootsieError(
            f"tokenizer file not found: {file}"
            " (train one with `tootsie datakit train-tokenizer` or pass a tokenizer.json)"
        )
    try:
        return Tokenizer.from_file(str(file))
    except Exception as error:  # tokenizers raises a bare Exception on malformed files
        raise TootsieError(f"cannot load tokenizer {file}: {error}") from error
