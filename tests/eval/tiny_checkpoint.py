"""A random-weight checkpoint as an executor step, a tokenizer and a held-out cache: inputs for eval steps' tests.

No training: the checkpoint step saves a freshly initialized tiny Llama, so
tests of steps that read a checkpoint (lm-eval, sweep run scoring, reference
log-probs) run it under two prefixes in seconds.
"""

from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax
import pyarrow as pa

from tootsie.configfile import to_plain
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.parquet_io import write_table_atomic
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import save_checkpoint

TINY_MODEL = LlamaConfig(
    vocab_size=300, hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2, num_kv_heads=1, attention="xla"
)
TEXTS = [f"def f{i}(x):\n    return x + {i}  # the value {i * i}\n" for i in range(60)]


@dataclass(frozen=True)
class RandomCheckpointConfig:
    """Which model the checkpoint step initializes, with which seed."""

    model: LlamaConfig = TINY_MODEL
    seed: int = 0
    step: int = 5


def write_random_checkpoint(config: RandomCheckpointConfig, output_path: str) -> None:
    """A training output directory holding one permanent checkpoint of fresh weights."""
    params = eqx.filter(LlamaModel(config.model, key=jax.random.PRNGKey(config.seed)), eqx.is_array)
    state = {"kind": "permanent", "model": to_plain(config.model), "tokens": 64 * config.step}
    save_checkpoint(Path(output_path) / "checkpoints", config.step, {"model": params}, state)


def tokenizer_and_cache(root: Path) -> tuple[str, str]:
    """`(tokenizer.json, token cache)` trained and tokenized under `root` from `TEXTS`."""
    table = pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS})
    write_table_atomic(table, root / "docs" / "part-00000.parquet")
    train_tokenizer(TokenizerTrainConfig(inputs=(str(root / "docs"),), vocab_size=300), str(root / "tok"))
    tokenize_documents(
        TokenizeConfig(input=str(root / "docs"), tokenizer=str(root / "tok"), engine=EngineConfig(progress=False)),
        str(root / "cache"),
    )
    return str(root / "tok" / "tokenizer.json"), str(root / "cache")
