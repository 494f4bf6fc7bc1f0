"""An HF export as `tootsie export hf` reports it: what was written, how long it took, and, with `verify`,
how closely transformers' logits and greedy tokens follow tootsie's on the exported folder.

`verify` needs the `hf` extra (torch, transformers), checked before anything is written. Example record:
`{"checkpoint", "out", "revision", "step", "tokens", "weights", "architecture", ..., "seconds": 1.9,
"max_abs_logit_diff": 8.6e-06, "greedy_match": true, ...}`.
"""

import time
from pathlib import Path
from typing import Any

from tootsie.extras import require
from tootsie.release.hf_export import export_hf
from tootsie.release.hf_verify import verify_export

SUMMARY_KEYS = (
    "out",
    "revision",
    "step",
    "tokens",
    "weights",
    "architecture",
    "bos_token_id",
    "eos_token_id",
    "chat_template",
    "weight_files",
    "safetensors_bytes",
)
"""The fields of `export_hf`'s summary that the record keeps."""


def checked_export(
    checkpoint: str, out: str, *, verify: bool = False, ema: bool = False, **options: Any
) -> dict[str, object]:
    """Export `checkpoint` to `out` (`options` go to `export_hf`) and return the record, verified if asked."""
    if verify:
        require(("hf",), purpose="export hf --verify")
    started = time.perf_counter()
    summary = export_hf(checkpoint, out, ema=ema, **options)
    record = {"checkpoint": str(summary["checkpoint"])} | {key: summary[key] for key in SUMMARY_KEYS}
    record["seconds"] = round(time.perf_counter() - started, 2)
    if verify:
        record |= verify_export(Path(summary["out"]), Path(summary["checkpoint"]), ema=ema)
    return record
