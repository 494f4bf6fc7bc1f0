"""`tootsie import hf`: a local Hugging Face Llama/Qwen3/Mixtral/Qwen3-MoE folder as a tootsie checkpoint.

The output is a training output directory (`<out>/checkpoints/step-N/` with
its arrays and `state.json`), so `WarmStartConfig(checkpoint=<out>)`,
`tootsie eval bpb --checkpoint <out>` and `tootsie export hf <out>` take it as
they are. A folder that tootsie exported keeps its step and token count (from
`tootsie_export.json`); any other starts at step 0. The tokenizer.json, if the
folder has one, is copied next to the checkpoints. Nothing is downloaded:
DIR must be a local directory, and no model code from it is ever run. A
Mixtral or Qwen3-MoE folder imports as an `moe` model that trains dropless
(`capacity_factor: null`), as transformers computes it.
"""

import json
import shutil
from pathlib import Path

from tootsie.configfile import to_plain
from tootsie.datakit.tokenizer import TOKENIZER_FILE
from tootsie.errors import TootsieError
from tootsie.jsonfile import read_json
from tootsie.release.hf_config import model_config_from_hf
from tootsie.release.hf_export import EXPORT_RECORD
from tootsie.release.hf_weights import from_hf_tensors, read_safetensors
from tootsie.train.checkpoint import checkpoint_dir, is_checkpoint, save_checkpoint
from tootsie.train.loading import CHECKPOINTS


def import_hf(directory: str | Path, out: str | Path) -> dict[str, object]:
    """Convert the HF folder `directory` to a tootsie checkpoint under `out`; return where it went and what it holds."""
    source, target = Path(directory), Path(out)
    config_file = source / "config.json"
    if not config_file.is_file():
        raise TootsieError(
            f"{config_file} not found; `tootsie import hf` reads a "
            "local Hugging Face model directory (download it first)"
        )
    try:
        hf = json.loads(config_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TootsieError(f"{config_file} is not valid JSON: {error}") from None
    config, architecture = model_config_from_hf(hf, str(config_file))
    model = from_hf_tensors(read_safetensors(source), config, architecture, source)
    record = read_json(source / EXPORT_RECORD) or {}
    step, tokens = int(record.get("step", 0)), int(record.get("tokens", 0))
    existing = checkpoint_dir(target / CHECKPOINTS, step)
    if is_checkpoint(existing):
        raise TootsieError(f"{existing} already exists; import into a new --out directory")
    state = {"tokens": tokens, "kind": "permanent", "model": to_plain(config), "imported_from": str(source.resolve())}
    path = save_checkpoint(target / CHECKPOINTS, step, {"model": model}, state)
    if (source / TOKENIZER_FILE).is_file():
        shutil.copyfile(source / TOKENIZER_FILE, target / TOKENIZER_FILE)
    return {
        "checkpoint": str(Path(path).resolve()),
        "step": step,
        "tokens": tokens,
        "architecture": hf["architectures"][0],
        "qk_norm": config.qk_norm,
    }
