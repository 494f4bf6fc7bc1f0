"""No silent drift: a resume trains the config its checkpoints were trained with; a warm start says what changed.

The 32B run lost days to update clipping switched off by accident, and the 8B's
Ocelot phase changed RoPE at a warm start; both were config edits nobody was
told about. So every run records, next to its checkpoints:

- `config.json` (`CONFIG_FILE`): the resolved config, as `tootsie report` reads it;
- `config.hashed.json` (`HASHED_CONFIG_FILE`): the hashed fields only (what the
  executor versions), with every input named by its content instead of its
  path: a token cache by a digest of its ledger and samples of its data, a
  checkpoint by the digest of its state record, a file (a tokenizer) by the
  digest of its bytes. A run
  resumed on another machine, where the executor mirrors inputs to other
  local paths, therefore compares equal.

Under the executor both files name every other path inside the prefix (a warm
start's source run, say) relative to it (`executor.portable`), so the same run
under two prefixes writes the same bytes; by hand they hold the paths given.
A resume compares in the same form, and a path relative to the prefix equals
an absolute one ending in it (a record made before paths were portable, or a
resume by hand), so moving a prefix is not drift.

On resume the new config's hashed view is compared field by field with the
recorded one. Any difference is refused with the diff; with
`allow_change=True` (`tootsie train --allow-config-change`) it is accepted and
appended to `config_changes.jsonl` (`CHANGES_FILE`), the run's history of
accepted changes. `num_steps` is the one hashed field a resume may change
silently: it says where the run stops, not what any step computes (raising it
continues the run, as the seeds' runs were extended).

A warm start compares the source run's model config and stability tools with
the new ones (`warm_start_report`): every model field that changes and every
tool that turns off is logged and written to `warm_start_report.json`.

A model recorded before the model registry has no `kind:`; it is a Llama
(`models.registry.recorded_model`), so neither check sees a change there.
"""

import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import xxhash

from tootsie import storage
from tootsie.configfile import is_unhashed, to_plain
from tootsie.datakit.token_cache import LEDGER_FILE, OFFSETS_FILE, TOKENS_FILE
from tootsie.errors import TootsieError
from tootsie.executor.portable import portable, portable_tree
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.models.registry import recorded_model
from tootsie.monitor.metrics_log import CONFIG_FILE
from tootsie.train.checkpoint import STATE_FILE, Location, latest_checkpoint, read_checkpoint_state
from tootsie.train.config import TrainConfig
from tootsie.train.loading import checkpoint_root, resolve_checkpoint
from tootsie.train.sharding import is_main_process

HASHED_CONFIG_FILE = "config.hashed.json"
CHANGES_FILE = "config_changes.jsonl"
WARM_START_REPORT_FILE = "warm_start_report.json"
SAMPLE_WINDOWS, SAMPLE_BYTES = 64, 4096
"""A token cache's content id reads this many windows of this many bytes from each of its data files."""
MAX_DIGEST_BYTES = 64 << 20
"""Files up to this size (a tokenizer.json) are named by their digest in the hashed view, bigger ones by size."""
RESUMABLE_FIELDS = frozenset({"num_steps"})
"""Hashed top-level fields a resume may change without being told: where the run stops, not what a step computes."""

logger = logging.getLogger(__name__)


def _hashed(field: dataclasses.Field[Any]) -> bool:
    return not is_unhashed(field)


def _content_id(value: str) -> str | None:
    """`value` named by content when it is a local token cache, checkpoint or file; None when it names none.

    A token cache is named by its ledger and `SAMPLE_WINDOWS` windows of its
    token and offset files (reading all of a 100 GB cache at every start
    would be too slow; two caches that agree on all of it are the same data
    in practice); a checkpoint by its state record (written last); a file up
    to `MAX_DIGEST_BYTES` by its bytes, a bigger one by its size.
    """
    path = Path(value)
    if (path / LEDGER_FILE).is_file():
        return f"token-cache:{_sampled_digest(path / LEDGER_FILE, path / TOKENS_FILE, path / OFFSETS_FILE)}"
    if (path / STATE_FILE).is_file():
        return f"checkpoint:{_sampled_digest(path / STATE_FILE)}"
    if path.is_file():
        size = path.stat().st_size
        return f"file:{_sampled_digest(path)}" if size <= MAX_DIGEST_BYTES else f"file-of-{size}-bytes"
    return None


def _sampled_digest(whole: Path, *sampled: Path) -> str:
    """xxh3-128 of `whole`'s bytes and of evenly spaced windows of each `sampled` file (with its size)."""
    digest = xxhash.xxh3_128(whole.read_bytes())
    for file in sampled:
        size = file.stat().st_size if file.is_file() else -1
        digest.update(f"{file.name}:{size}".encode())
        if size <= 0:
            continue
        with open(file, "rb") as handle:
            for offset in sorted({size * i // SAMPLE_WINDOWS for i in range(SAMPLE_WINDOWS)}):
                handle.seek(offset)
                digest.update(handle.read(SAMPLE_BYTES))
    return digest.hexdigest()[:16]


def _by_content(value: Any) -> Any:
    """`value` with every string that names a token cache, checkpoint or file replaced by its content id."""
    if isinstance(value, dict):
        return {key: _by_content(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_by_content(item) for item in value]
    if isinstance(value, str) and value:
        return _content_id(value) or value
    return value


def hashed_view(config: TrainConfig) -> dict[str, Any]:
    """The hashed fields of `config` as plain data, inputs named by content (what a resume must not change)."""
    return _by_content(to_plain(config, keep=_hashed))


def _flatten(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {path: leaf for key, item in value.items() for path, leaf in _flatten(item, f"{prefix}.{key}").items()}
    return {prefix: value}


def _is_absolute(path: str) -> bool:
    return os.path.isabs(path) or storage.is_remote(path)


def _same_place(before: Any, after: Any) -> bool:
    """Whether two recorded values are equal, or paths naming one place.

    A path relative to the prefix and an absolute path ending in it (`demo/train/pretrain-ab12` and
    `/runs/demo/train/pretrain-ab12`) name the same step output, whose id is a content hash: recorded under
    another prefix, or before paths were portable.
    """
    if before == after:
        return True
    if not (isinstance(before, str) and isinstance(after, str) and before and after):
        return False
    if _is_absolute(before) == _is_absolute(after):
        return False
    relative, absolute = (after, before) if _is_absolute(before) else (before, after)
    return absolute.rstrip("/").endswith("/" + relative.strip("/"))


def config_diff(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Every leaf that differs between two hashed views, as `{"field", "before", "after"}` (missing: None)."""
    old, new = _flatten(before, "config"), _flatten(after, "config")
    return [
        {"field": name, "before": old.get(name), "after": new.get(name)}
        for name in sorted(old.keys() | new.keys())
        if not _same_place(old.get(name), new.get(name)) and name.split(".")[1] not in RESUMABLE_FIELDS
    ]


def describe_diff(changes: list[dict[str, Any]]) -> str:
    """One line per changed field: `config.optimizer.max_grad_norm: 1.0 -> null`."""
    return "\n".join(
        f"  {change['field']}: {json.dumps(change['before'])} -> {json.dumps(change['after'])}" for change in changes
    )


def check_resume(output: Path, config: TrainConfig, step: int, allow_change: bool) -> list[dict[str, Any]]:
    """Compare `config` with the one `output`'s checkpoints were trained with; refuse a change unless allowed.

    Returns the accepted changes (empty when none). A run recorded before this
    check existed (no `config.hashed.json`) is taken as it is.
    """
    recorded = read_json(output / HASHED_CONFIG_FILE)
    if recorded is None:
        return []
    if isinstance(recorded.get("model"), dict):
        recorded = recorded | {"model": recorded_model(recorded["model"])}
    changes = config_diff(recorded, portable_tree(hashed_view(config)))
    if changes and not allow_change:
        raise TootsieError(
            f"{output} was trained to step {step} with another config ({output / HASHED_CONFIG_FILE}); "
            f"resuming it with these changes is refused:\n{describe_diff(changes)}\n"
            "restore the recorded values, train into a new --out, or rerun with --allow-config-change "
            f"to accept them (recorded in {output / CHANGES_FILE})"
        )
    if changes:
        logger.warning("resuming %s at step %d with accepted config changes:\n%s", output, step, describe_diff(changes))
    return changes


def record_config(output: Path, config: TrainConfig, step: int, changes: list[dict[str, Any]]) -> None:
    """Write `config.json` and `config.hashed.json` (paths `portable`); append accepted `changes` to the history."""
    if changes:
        output.mkdir(parents=True, exist_ok=True)
        entry = {"step": step, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "changes": changes}
        with open(output / CHANGES_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")
    write_json_atomic(output / CONFIG_FILE, portable_tree(to_plain(config)))
    write_json_atomic(output / HASHED_CONFIG_FILE, portable_tree(hashed_view(config)))


STABILITY_TOOLS = {
    "gradient clipping (optimizer.max_grad_norm)": lambda c: _get(c, "optimizer", "max_grad_norm") is not None,
    "update-norm clipping (stability.clip_update_window)": lambda c: (
        _get(c, "stability", "clip_update_window") is not None
    ),
    "bad-step skipping (stability.skip_bad_steps)": lambda c: bool(_get(c, "stability", "skip_bad_steps")),
    "z-loss (z_loss_weight)": lambda c: (_get(c, "z_loss_weight") or 0) > 0,
    "QK-norm (model.qk_norm)": lambda c: bool(_get(c, "model", "qk_norm")),
    "loss-plateau rewind (rewind)": lambda c: _get(c, "rewind") is not None,
}
"""Stability tools by name, each a test of whether a plain config (config.json) has it on."""


def _get(config: dict[str, Any], *keys: str) -> Any:
    value: Any = config
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _source_run_config(checkpoint: Location) -> dict[str, Any] | None:
    """The config.json of the run that wrote `checkpoint` (`<run>/checkpoints/step-N`), when it has one."""
    run = str(checkpoint).rstrip("/").rsplit("/", 2)[0]
    return storage.read_json(storage.join(run, CONFIG_FILE))


def warm_start_report(output: Path, config: TrainConfig, checkpoint: Location) -> dict[str, Any]:
    """Log and write what a warm start from `checkpoint` changes: model fields, and stability tools turned off."""
    source_model = recorded_model(read_checkpoint_state(checkpoint).get("model") or {})
    new_model = to_plain(config.model)
    model_changes = [
        {"field": f"model.{name}", "before": source_model.get(name), "after": new_model.get(name)}
        for name in sorted(source_model.keys() | new_model.keys())
        if source_model.get(name) != new_model.get(name)
    ]
    source = _source_run_config(checkpoint)
    new = to_plain(config)
    turned_off = (
        None
        if source is None
        else [name for name, is_on in STABILITY_TOOLS.items() if is_on(source) and not is_on(new)]
    )
    report = {
        "source": portable(str(checkpoint)),
        "model_changes": model_changes,
        "stability_turned_off": turned_off,
    }
    for change in model_changes:
        logger.warning(
            "warm start from %s changes %s: %s -> %s",
            checkpoint,
            change["field"],
            json.dumps(change["before"]),
            json.dumps(change["after"]),
        )
    if turned_off is None:
        logger.warning(
            "warm start from %s: the source run has no %s, so its stability tools cannot be compared",
            checkpoint,
            CONFIG_FILE,
        )
    for name in turned_off or []:
        logger.warning("warm start from %s turns off %s, which the source run had on", checkpoint, name)
    write_json_atomic(output / WARM_START_REPORT_FILE, report)
    return report


def prepare_run(output: Path, config: TrainConfig, allow_change: bool, final_output: str | None = None) -> None:
    """Before training into `output`: refuse or record a changed config, report a warm start, record the config.

    Every process checks; process 0 writes. Call after `initialize_distributed`: it asks which process this is.
    `final_output` is where the run's checkpoints live when not under `output` (`loading.checkpoint_root`).
    """
    latest = latest_checkpoint(checkpoint_root(output, final_output))
    step = int(read_checkpoint_state(latest)["step"]) if latest is not None else 0
    changes = check_resume(output, config, step, allow_change) if latest is not None else []
    if not is_main_process():
        return
    if latest is None and config.warm_start is not None:
        warm_start_report(output, config, resolve_checkpoint(config.warm_start.checkpoint))
    record_config(output, config, step, changes)
