"""The chat template a training run was trained with, read from its chat token caches' ledgers.

A chat token cache's ledger records the template it was rendered with
(`chat_template`: a built-in name or a Jinja file's path) and the SHA-256 of
the template's Jinja source (`chat_template_sha256`, `datakit.tokenize`). A
training run's `config.json` names its caches, so the template of a checkpoint
`<run>/checkpoints/step-N` is found by reading the ledger of every cache the
run trained on. `tootsie generate --chat` and `tootsie export hf` use it, so a
model fine-tuned with ChatML is prompted (and exported) with ChatML without a
flag.

Worked example: the demo SFT run's `config.json` has `data.caches =
{builtins: demo/chat-tokenized/builtins/train-<h>, modules: ...}` (relative to
the prefix, as the executor records paths; read back against the prefix the
run sits in, `resolve_recorded`); both ledgers
say `chatml` with the same digest, so the run's template is ChatML. A run whose
caches have no `chat_template` (pretraining) has none; two caches with
different digests are refused, since the model would have learned two formats
and nothing says which to speak.
"""

from dataclasses import dataclass
from pathlib import Path

from tootsie import storage
from tootsie.datakit.chat_templates import CHAT_TEMPLATES, template_sha256
from tootsie.datakit.token_cache import LEDGER_FILE
from tootsie.errors import TootsieError
from tootsie.executor.portable import resolve_recorded
from tootsie.monitor.metrics_log import CONFIG_FILE
from tootsie.train.loading import CHECKPOINTS


@dataclass(frozen=True)
class RecordedChatTemplate:
    """A run's chat template as its caches recorded it, with the Jinja source that has the recorded digest."""

    name: str
    """What the ledgers recorded: a built-in name (`chatml`) or a template file's path."""
    source: str
    """The Jinja source whose SHA-256 is `sha256`."""
    sha256: str
    """The ledgers' `chat_template_sha256`."""
    caches: tuple[str, ...]
    """The chat caches that recorded it."""


def run_of_checkpoint(checkpoint: str | Path) -> Path:
    """The training output directory of `<run>/checkpoints/step-N` (the path itself otherwise)."""
    checkpoint = Path(checkpoint)
    return checkpoint.parent.parent if checkpoint.parent.name == CHECKPOINTS else checkpoint


def _source_with_digest(name: str, sha256: str, where: str) -> str:
    """The Jinja source of the recorded template: the built-in or file named, else a built-in with that digest."""
    candidates = [CHAT_TEMPLATES[name]] if name in CHAT_TEMPLATES else []
    if name not in CHAT_TEMPLATES and Path(name).is_file():
        candidates.append(Path(name).read_text(encoding="utf-8"))
    candidates.extend(CHAT_TEMPLATES.values())
    for source in candidates:
        if template_sha256(source) == sha256:
            return source
    raise TootsieError(
        f"{where} records chat template {name!r} (sha256 {sha256[:12]}...), but neither a built-in "
        f"({', '.join(CHAT_TEMPLATES)}) nor a file at that path has that source; pass --chat-template FILE "
        "with the template the cache was tokenized with"
    )


def run_chat_template(run: Path) -> RecordedChatTemplate | None:
    """The chat template the run at `run` trained with, or None when it trained on no chat cache."""
    config = storage.read_json(storage.join(str(run), CONFIG_FILE))
    caches = (config or {}).get("data", {}).get("caches", {})
    recorded: dict[str, list[tuple[str, str]]] = {}
    for recorded_cache in caches.values() if isinstance(caches, dict) else ():
        cache = resolve_recorded(recorded_cache, run) if isinstance(recorded_cache, str) else None
        ledger = storage.read_json(storage.join(cache, LEDGER_FILE)) if cache is not None else None
        if ledger is not None and isinstance(ledger.get("chat_template_sha256"), str):
            name = str(ledger["chat_template"])
            name = name if name in CHAT_TEMPLATES else resolve_recorded(name, cache)
            recorded.setdefault(ledger["chat_template_sha256"], []).append((name, cache))
    if not recorded:
        return None
    if len(recorded) > 1:
        listing = "; ".join(f"{entries[0][0]!r} in {[c for _, c in entries]}" for entries in recorded.values())
        raise TootsieError(
            f"the chat caches of {run / CONFIG_FILE} were tokenized with different chat templates ({listing}); "
            "the model has no single format to speak: pass --chat-template NAME|FILE to choose one"
        )
    ((sha256, entries),) = recorded.items()
    name, first = entries[0]
    source = _source_with_digest(name, sha256, f"{first}/{LEDGER_FILE}")
    return RecordedChatTemplate(name=name, source=source, sha256=sha256, caches=tuple(c for _, c in entries))


def checkpoint_chat_template(checkpoint: Path) -> RecordedChatTemplate | None:
    """The chat template of the run a checkpoint (or a run directory) belongs to, if it trained on chat data."""
    return run_chat_template(run_of_checkpoint(checkpoint))
