"""`tootsie release`: the Hugging Face folder of a run plus everything needed to audit it.

Writes, into one directory (staged and renamed into place like an export):
the HF files of the released checkpoint, `README.md` (the model card),
`mixture_manifest.json`, `metrics.jsonl` (every phase's metrics in the
lineage, tagged with the phase), and with `all_checkpoints` every other
checkpoint of the lineage as `revisions/step-N-tokens-T/` (Marin publishes
these as hub revisions). See `run_history` for what RUN_DIR may be.
"""

import json
from pathlib import Path

from tootsie.jsonfile import write_json_atomic
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.release.evaluations import bpb_step_results, in_loop_results
from tootsie.release.hf_chat import chat_export
from tootsie.release.hf_export import DEFAULT_MAX_SHARD_BYTES, find_tokenizer, staged_directory, write_hf_folder
from tootsie.release.manifest import MANIFEST_FILE, mixture_manifest
from tootsie.release.model_card import model_card
from tootsie.release.run_history import RunHistory, run_history
from tootsie.train.checkpoint import model_config_of


def _write_metrics(history: RunHistory, path: Path) -> int:
    """Every phase's metrics in lineage order as one JSONL file; return the record count."""
    records = [record for phase in history.phases for record in phase.metrics()]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return len(records)


def release(
    run_dir: str | Path,
    out: str | Path,
    *,
    ema: bool = False,
    tokenizer: str | Path | None = None,
    architecture: str | None = None,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    all_checkpoints: bool = False,
    name: str | None = None,
    chat_template: str | None = None,
) -> dict[str, object]:
    """Release RUN_DIR's final checkpoint at `out` with model card, manifest and metrics; return a summary.

    `chat_template` (a name or Jinja file) overrides the one the final run's chat caches recorded, in every
    revision; without it each revision ships its own run's template, if any.
    """
    history = run_history(run_dir)
    final = history.final
    tokenizer_path = find_tokenizer(final.path, tokenizer)
    chat = chat_export(final.path, tokenizer_path, chat_template)
    manifest = mixture_manifest(history)
    bpb_rows, in_loop_rows = bpb_step_results(history), in_loop_results(history)
    last = history.phases[-1]
    title = name or (last.step.name if last.step is not None else last.directory.name)
    options = {"architecture": architecture, "max_shard_bytes": max_shard_bytes}
    with staged_directory(Path(out)) as tmp:
        export = write_hf_folder(final.path, tmp, tokenizer_path, ema=ema, chat=chat, **options)
        revisions, revision_chat = [], chat if chat_template is not None else None
        for checkpoint in (c for phase in history.phases for c in phase.checkpoints if all_checkpoints and c != final):
            directory = tmp / "revisions" / checkpoint.revision
            directory.mkdir(parents=True)
            write_hf_folder(
                checkpoint.path,
                directory,
                tokenizer_path,
                ema=ema and checkpoint.has_ema,
                chat=revision_chat,
                **options,
            )
            revisions.append(checkpoint.revision)
        write_json_atomic(tmp / MANIFEST_FILE, manifest)
        metrics = _write_metrics(history, tmp / METRICS_FILE)
        config = model_config_of(final.path)
        (tmp / "README.md").write_text(
            model_card(title, config, history, manifest, export, bpb_rows, in_loop_rows, revisions), encoding="utf-8"
        )
    return {
        "out": str(Path(out).resolve()),
        "revision": final.revision,
        "checkpoint": str(final.path),
        "weights": export["weights"],
        "architecture": export["architecture"],
        "chat_template": export["chat_template"],
        "phases": [
            {"name": p.name, "steps": [p.start_step, p.end_step], "tokens": [p.start_tokens, p.end_tokens]}
            for p in history.phases
        ],
        "datasets": len(manifest["datasets"]),
        "metrics_records": metrics,
        "evaluations": len(bpb_rows) + len(in_loop_rows),
        "revisions": revisions,
        "safetensors_bytes": export["safetensors_bytes"],
    }
