"""The DPO reference's log-probs, computed once as an executor step, content-addressed.

`reference_logprobs_step(name, model, checkpoint, cache, seq_len)` scores every
pair of a preference cache (`datakit.preference_data`) under the frozen
reference model: the summed log-probs of the chosen and the rejected reply
tokens, laid out in rows exactly as DPO training reads them (one pair per
row, `train.dpo.pair_logprobs`). The checkpoint and the cache are each a
step reference (versioned by the executor through the step's id) or a plain
directory, which the config names by the sha256 of its files alone
(`DigestedDirectory`: its path is not hashed), so the output path changes when
the reference's weights change, the same reference and data reuse the
finished output across runs, and a copy of the same checkpoint elsewhere (a
moved prefix, another machine) is the same input with the same hash.

Output: `logprobs.npy` (`[pairs, 2]` float32, chosen then rejected),
`chosen_lengths.npy` (`[pairs]` int32) and `reference.json` (written last:
the checkpoint and the cache, each named as its hash names it: a step's
output relative to the prefix (`portable`), or null with its sha256; the
checkpoint's training step, seq_len, pairs, mean log-probs and the fraction
of pairs whose chosen reply the reference already scores higher). Where a
plain directory lay is in the executor's metadata, not the output. No pickle.

Example: a 4-pair cache scored by a run's newest checkpoint gives
`logprobs.npy` like `[[-31.2, -44.0], ...]`; training the reference further
gives a new checkpoint, a new sha256 and a new output directory.
"""

import hashlib
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from tootsie.configfile import unhashed
from tootsie.data.sequences import DocumentSequences, next_token_loss_mask
from tootsie.datakit.parquet_io import write_npy_atomic
from tootsie.datakit.preference_data import CHOSEN_TOKENS_FILE
from tootsie.datakit.token_cache import open_token_cache
from tootsie.errors import TootsieError
from tootsie.executor import Step, StepRef
from tootsie.executor.portable import portable
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig, LlamaModel
from tootsie.train.checkpoint import read_checkpoint_state
from tootsie.train.dpo import CHOSEN_LENGTHS_FILE, REFERENCE_LOGPROBS_FILE, REFERENCE_RECORD_FILE, pair_logprobs
from tootsie.train.loading import load_model, resolve_checkpoint

_jitted_pair_logprobs = eqx.filter_jit(pair_logprobs)


def content_sha256(directory: str | Path) -> str:
    """sha256 over every file under `directory` (relative path and bytes, in sorted order), hidden files skipped."""
    root = Path(directory)
    if not root.is_dir():
        raise TootsieError(f"{root} is not a directory; give a checkpoint or cache directory")
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(str(file.relative_to(root)).encode("utf-8") + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def pair_scores(model: LlamaModel, cache_dir: str, seq_len: int, batch_size: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Summed reply log-probs `[pairs, 2]` (chosen, rejected) of every pair of a cache, and the chosen lengths."""
    cache = open_token_cache(cache_dir)
    lengths_file = Path(cache_dir) / CHOSEN_TOKENS_FILE
    if cache.loss_mask is None or not lengths_file.is_file():
        raise TootsieError(
            f"{cache_dir} is not a preference cache (no loss mask or {CHOSEN_TOKENS_FILE}); "
            "build it with datakit.preference_data.tokenize_preferences"
        )
    longest = int(np.diff(cache.offsets).max(initial=0))
    if longest > seq_len:
        raise TootsieError(
            f"{cache_dir} holds a pair of {longest} tokens, longer than seq_len={seq_len}; "
            f"raise seq_len to at least {longest} (or lower the tokenize step's max_tokens)"
        )
    lengths = np.load(lengths_file, allow_pickle=False).astype(np.int32)
    sequences = DocumentSequences(cache, seq_len)
    scores = np.zeros((cache.num_docs, 2), dtype=np.float32)
    for start in range(0, cache.num_docs, batch_size):
        rows = np.arange(start, start + batch_size)
        rows = np.where(rows < cache.num_docs, rows, start)
        tokens, segments = sequences.read(rows)
        mask = next_token_loss_mask(segments, sequences.token_mask(rows))
        chosen, rejected = _jitted_pair_logprobs(
            model, jnp.asarray(tokens), jnp.asarray(segments), jnp.asarray(mask), jnp.asarray(lengths[rows])
        )
        count = min(batch_size, cache.num_docs - start)
        scores[start : start + count] = np.stack([np.asarray(chosen), np.asarray(rejected)], axis=1)[:count]
    return scores, lengths


@dataclass(frozen=True)
class DigestedDirectory:
    """A directory that is no step's output, named in a step's version by its files' sha256, not by where it lies."""

    sha256: str
    """`content_sha256` of its files: the same files anywhere are the same input, changed files another."""
    path: str = unhashed("")
    """Where it lies here (not hashed; recorded in the executor's metadata)."""


def digested(path: str | Path) -> DigestedDirectory:
    """`path` named by its content (`content_sha256`), hashed when the step is built."""
    return DigestedDirectory(sha256=content_sha256(path), path=str(path))


@dataclass(frozen=True)
class ReferenceLogprobsConfig:
    """Which reference checkpoint scores which preference cache, at which row length."""

    model: LlamaConfig
    """The reference's architecture."""
    checkpoint: str | StepRef | DigestedDirectory
    """A training step's output (its newest checkpoint), or a checkpoint directory named by its content."""
    cache: str | StepRef | DigestedDirectory
    """The preference cache: a tokenize step's output, or a cache directory named by its content."""
    seq_len: int
    """Row length; the DPO run's data.seq_len."""
    batch_size: int = unhashed(8)
    """Pairs scored at once."""


def compute_reference_logprobs(config: ReferenceLogprobsConfig, output_path: str) -> dict[str, object]:
    """Score every pair under the reference and write the table, the chosen lengths and the record (last)."""
    out = Path(output_path)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = resolve_checkpoint(_path(config.checkpoint))
    model = load_model(config.model, str(checkpoint))
    scores, lengths = pair_scores(model, _path(config.cache), config.seq_len, config.batch_size)
    write_npy_atomic(scores, out / REFERENCE_LOGPROBS_FILE)
    write_npy_atomic(lengths, out / CHOSEN_LENGTHS_FILE)
    record = {
        "checkpoint": None if isinstance(config.checkpoint, DigestedDirectory) else portable(str(checkpoint)),
        "checkpoint_sha256": _sha256(config.checkpoint),
        "checkpoint_step": read_checkpoint_state(checkpoint).get("step"),
        "cache": None if isinstance(config.cache, DigestedDirectory) else portable(config.cache),
        "cache_sha256": _sha256(config.cache),
        "seq_len": config.seq_len,
        "pairs": len(scores),
        "mean_chosen_logprob": float(scores[:, 0].mean()) if len(scores) else 0.0,
        "mean_rejected_logprob": float(scores[:, 1].mean()) if len(scores) else 0.0,
        "chosen_preferred": float((scores[:, 0] > scores[:, 1]).mean()) if len(scores) else 0.0,
    }
    write_json_atomic(out / REFERENCE_RECORD_FILE, record)
    return record


def _path(value: str | DigestedDirectory) -> str:
    """Where an input lies when the step runs: a step's resolved output, or a digested directory's path."""
    return value.path if isinstance(value, DigestedDirectory) else value


def _sha256(value: str | DigestedDirectory) -> str | None:
    """A digested directory's sha256; None for a step's output (its step id names it)."""
    return value.sha256 if isinstance(value, DigestedDirectory) else None


def reference_logprobs_step(
    name: str, model: LlamaConfig, checkpoint: str | StepRef, cache: str | StepRef, seq_len: int
) -> Step:
    """The executor step that scores `cache` under `checkpoint`, its path hashing their content or step ids.

    A plain checkpoint (a run directory names its newest checkpoint, resolved now) or cache must exist when the step
    is built: its files are hashed now.
    """
    config = ReferenceLogprobsConfig(
        model=model,
        checkpoint=checkpoint if isinstance(checkpoint, StepRef) else digested(resolve_checkpoint(checkpoint)),
        cache=cache if isinstance(cache, StepRef) else digested(cache),
        seq_len=seq_len,
    )
    return Step(name, compute_reference_logprobs, config)
