"""`tootsie export hf`: a checkpoint as a Hugging Face model folder that `transformers` loads.

The folder holds `config.json` (LlamaForCausalLM, or Qwen3ForCausalLM for
QK-norm models; an MoE model's MixtralForCausalLM or Qwen3MoeForCausalLM),
`model.safetensors` (or shards plus an index past `max_shard_bytes`),
`generation_config.json`, the tokenizer files and
`tootsie_export.json` (which checkpoint, step, tokens and weights it came from,
so `tootsie import hf` restores the step). A chat model also ships its chat
template and lists its end-of-turn token among the EOS ids (`hf_chat`). Any checkpoint exports, raw or EMA
weights, and the export is named like Marin's revisions: `step-N-tokens-T`.

The folder is written under a temporary sibling name and renamed into place,
so a crash never leaves half an export where a complete one is expected; an
existing `--out` is replaced only if it is itself a tootsie export. Only the
model kinds in `hf_config.EXPORTED_KINDS` export; another is refused by name.
"""

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import tootsie
from tootsie.datakit.tokenizer import file_sha256
from tootsie.errors import TootsieError
from tootsie.eval.run_chat_template import run_of_checkpoint
from tootsie.jsonfile import write_json_atomic
from tootsie.models.llama import LlamaConfig
from tootsie.release.hf_chat import ChatExport, chat_export
from tootsie.release.hf_config import check_expressible, choose_architecture, hf_config
from tootsie.release.hf_tokenizer import run_tokenizer, training_tokenizer, write_tokenizer_files
from tootsie.release.hf_weights import model_layout, to_hf_tensors, write_safetensors
from tootsie.release.step_info import StepInfo, read_step
from tootsie.train.checkpoint import STATE_FILE, PathOrUrl, read_checkpoint_state, read_tensors
from tootsie.train.loading import model_config_of, resolve_checkpoint

DEFAULT_MAX_SHARD_BYTES = 5 * 10**9
"""transformers' own `save_pretrained` default shard size ("5GB")."""
DEFAULT_CONTEXT_LENGTH = 2048
"""`max_position_embeddings` when neither RoPE scaling nor the training run gives one (Llama 1's context)."""
EXPORT_RECORD = "tootsie_export.json"


def revision_name(step: int, tokens: int) -> str:
    """Marin's revision name of a checkpoint: `step-N-tokens-T`."""
    return f"step-{step}-tokens-{tokens}"


def read_state(checkpoint: PathOrUrl) -> dict[str, object]:
    """A checkpoint's state.json, which must record the model config."""
    state = read_checkpoint_state(checkpoint)
    if not isinstance(state.get("model"), dict):
        raise TootsieError(
            f"{checkpoint}/{STATE_FILE} records no model config (written by "
            "an older tootsie); resave the checkpoint with a current trainer"
        )
    return state


def training_step(checkpoint: PathOrUrl) -> StepInfo | None:
    """The executor training step a checkpoint belongs to, if any."""
    step = read_step(run_of_checkpoint(Path(checkpoint)))
    return step if step is not None and step.type == "TrainConfig" else None


def checkpoint_tensors(checkpoint: PathOrUrl, config: LlamaConfig, weights: str) -> dict[str, np.ndarray]:
    """A checkpoint's `weights` tensors, checked by name and shape against `config` (read as saved, no model built)."""
    names, shapes, _ = model_layout(config)
    tensors = read_tensors(checkpoint, weights)
    if tensors is None:
        raise TootsieError(
            f"checkpoint {checkpoint} has no {weights} weights"
            + (" (the run trained without EMA); export without --ema" if weights == "ema" else "")
        )
    missing, unexpected = sorted(set(names) - set(tensors)), sorted(set(tensors) - set(names))
    if missing or unexpected:
        raise TootsieError(
            f"{checkpoint}/{weights} does not match its state.json "
            f"model config: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    for name, shape in zip(names, shapes):
        if tensors[name].shape != shape.shape:
            raise TootsieError(
                f"{checkpoint}/{weights}: {name} has shape "
                f"{tensors[name].shape}, the model config implies {shape.shape}"
            )
    return tensors


def context_length(config: LlamaConfig, run: StepInfo | None) -> int:
    """`max_position_embeddings`: the scaled RoPE context, else the training sequence length, else the default."""
    if config.rope_scaling is not None:
        return int(config.rope_scaling.original_max_position * config.rope_scaling.factor)
    seq_len = run.config.get("data", {}).get("seq_len") if run is not None else None
    return int(seq_len) if isinstance(seq_len, int) else DEFAULT_CONTEXT_LENGTH


@contextlib.contextmanager
def staged_directory(out: Path) -> Iterator[Path]:
    """A fresh temporary sibling of `out` to write into; on success it replaces `out`.

    `out` must be new, empty or a tootsie export.
    """
    out = out.resolve()
    if out.is_file() or (out.is_dir() and any(out.iterdir()) and not (out / EXPORT_RECORD).is_file()):
        raise TootsieError(f"{out} exists and is not a tootsie export; choose a new or empty --out directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp, old = out.with_name(f".{out.name}.tmp-{os.getpid()}"), out.with_name(f".{out.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_hf_folder(
    checkpoint: PathOrUrl,
    directory: Path,
    tokenizer: Path,
    *,
    ema: bool = False,
    architecture: str | None = None,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    chat: ChatExport | None = None,
) -> dict[str, object]:
    """Write the HF files of one checkpoint into an existing `directory`; return what was written.

    `chat` is the chat template to ship (default: `hf_chat.chat_export`'s choice for this checkpoint).
    """
    state = read_state(checkpoint)
    check_expressible(state["model"], f"{checkpoint}/{STATE_FILE}")
    config = model_config_of(checkpoint)
    chosen = choose_architecture(config, architecture)
    weights = "ema" if ema else "model"
    length = context_length(config, training_step(checkpoint))
    chat = chat if chat is not None else chat_export(checkpoint, tokenizer)
    special = write_tokenizer_files(tokenizer, directory, length, config.vocab_size, chat.source)
    files = write_safetensors(
        to_hf_tensors(checkpoint_tensors(checkpoint, config, weights), config, chosen), directory, max_shard_bytes
    )
    hf = hf_config(config, chosen, special["bos_token_id"], special["eos_token_id"], length)
    write_json_atomic(directory / "config.json", hf)
    generation = special | {"eos_token_id": chat.eos_token_ids(special["eos_token_id"])}
    write_json_atomic(directory / "generation_config.json", generation)
    step, tokens = int(state["step"]), int(state.get("tokens", 0))
    record = {
        "checkpoint": str(checkpoint),
        "step": step,
        "tokens": tokens,
        "revision": revision_name(step, tokens),
        "weights": weights,
        "architecture": hf["architectures"][0],
        "model": state["model"],
        "tokenizer_sha256": file_sha256(tokenizer),
        "chat_template": chat.record(),
        "tootsie_version": tootsie.__version__,
    }
    write_json_atomic(directory / EXPORT_RECORD, record)
    size = sum(f.stat().st_size for f in directory.iterdir() if f.name.endswith(".safetensors"))
    return {
        **record,
        "files": sorted(f.name for f in directory.iterdir()),
        "weight_files": files,
        "safetensors_bytes": size,
        **generation,
    }


def find_tokenizer(checkpoint: PathOrUrl, tokenizer: str | Path | None) -> Path:
    """The tokenizer to export: the one given, else the one that made the training run's token caches."""
    if tokenizer is not None:
        return Path(tokenizer)
    run = training_step(checkpoint)
    found = training_tokenizer(run) if run is not None else run_tokenizer(run_of_checkpoint(Path(checkpoint)))
    if found is None:
        raise TootsieError(
            f"cannot tell which tokenizer trained {checkpoint} "
            "(no executor record of its token caches); pass --tokenizer FILE"
        )
    return found


def export_hf(
    checkpoint: str | Path,
    out: str | Path,
    *,
    ema: bool = False,
    tokenizer: str | Path | None = None,
    architecture: str | None = None,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    chat_template: str | None = None,
) -> dict[str, object]:
    """Export a checkpoint (or a run directory's newest one) as an HF folder at `out`, atomically.

    `chat_template` (a name or Jinja file) overrides the template the run's chat caches recorded.
    """
    source = resolve_checkpoint(checkpoint)
    tokenizer_path = find_tokenizer(source, tokenizer)
    chat = chat_export(source, tokenizer_path, chat_template)
    with staged_directory(Path(out)) as tmp:
        summary = write_hf_folder(
            source,
            tmp,
            tokenizer_path,
            ema=ema,
            architecture=architecture,
            max_shard_bytes=max_shard_bytes,
            chat=chat,
        )
    return {"out": str(Path(out).resolve()), **summary}
