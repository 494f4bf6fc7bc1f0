"""A Paloma-style BPB suite: a checkpoint's bits-per-byte on every domain of a held-out directory.

`run_bpb_suite` builds (or reuses) one token cache per domain with the
executor (`heldout_domains.domain_cache_steps`, content-addressed on the files
and the tokenizer) and scores the checkpoint with the in-loop evaluation's own
code: `bpb.domain_bpb` per domain and `bpb.summarize` for the macro average
(every domain weighs the same, Paloma's headline) and the micro average
(every byte weighs the same). So `tootsie eval bpb-suite` on a run's last
checkpoint reports the numbers its in-loop `eval/bpb/*` would on the same
caches.

Example: a suite of `code/` and `prose.jsonl` gives `{"bpb": {"code": 1.61,
"prose": 2.05, "macro_avg": 1.83, "micro_avg": 1.78}, "caches": {"code":
{"path": ".../bpb_suite/code-3f2a...", "built": true}, ...}}`; a second call
prints the same numbers with `"built": false`.

A directory in Paloma's released layout (`<source>/val/*.jsonl.gz`, detected by
`paloma.is_paloma_mirror` or asked for with `layout="paloma"`) is scored by
`run_paloma_suite` the way Paloma scores it instead (`tootsie.eval.paloma`):
each document alone, figures per subdomain and macro-averaged per source. The
two modes differ on purpose; docs/paloma.md lists how.
"""

import os
from pathlib import Path
from typing import Any

from tootsie.datakit.token_bytes import TokenBytes
from tootsie.datakit.tokenizer import load_tokenizer
from tootsie.errors import TootsieError
from tootsie.eval.bpb import domain_bpb, summarize
from tootsie.eval.heldout_domains import domain_cache_steps
from tootsie.eval.paloma import evaluate_source, is_paloma_mirror, prepare_mirror
from tootsie.executor import failure_summary, run_experiment
from tootsie.executor.portable import resolve_recorded
from tootsie.jsonfile import read_json
from tootsie.models.llama import LlamaModel
from tootsie.monitor.metrics_log import CONFIG_FILE
from tootsie.train.checkpoint import model_config_of, read_checkpoint_state
from tootsie.train.loading import load_model, resolve_checkpoint

DEFAULT_SEQ_LEN = 128
"""Tokens per evaluated sequence when the run's config does not say (`tootsie eval bpb`'s default)."""
LAYOUTS = ("auto", "folders", "paloma")
"""How a suite directory is read: detected, one domain per entry (`heldout_domains`), or Paloma's release."""


def evaluate_domains(
    model: LlamaModel, caches: dict[str, str], tokenizer: str, seq_len: int, max_sequences: int | None = None
) -> dict[str, dict[str, float]]:
    """BPB per domain with `macro_avg` and `micro_avg` (the in-loop code), and each domain's bytes and tokens."""
    token_bytes = TokenBytes(load_tokenizer(tokenizer))
    results = {
        name: domain_bpb(model, cache, token_bytes, seq_len, max_sequences=max_sequences)
        for name, cache in sorted(caches.items())
    }
    return {
        "bpb": summarize(results),
        "bytes": {name: r.bytes for name, r in results.items()},
        "tokens": {name: r.tokens for name, r in results.items()},
    }


def build_domain_caches(suite_dir: str, tokenizer: str, prefix: str) -> dict[str, dict[str, Any]]:
    """Domain → `{"path", "built"}`: its token cache under `prefix`, built now or reused from an earlier call."""
    steps = domain_cache_steps(suite_dir, tokenizer)
    report = run_experiment(list(steps.values()), prefix)
    failure = failure_summary(report)
    if failure is not None:
        raise TootsieError(f"building the held-out caches of {suite_dir} failed: {failure}")
    by_name = {step.name: step for step in report.steps}
    return {
        name: {
            "path": by_name[step.name].output_path,
            "built": not by_name[step.name].reason.startswith("skip"),
        }
        for name, step in steps.items()
    }


def _run_config(checkpoint: str) -> tuple[dict[str, Any], Path | None]:
    """The training config recorded beside the checkpoint (`<run>/config.json`) and its run directory, or ({}, None)."""
    path = Path(checkpoint)
    for directory in (path, path.parent.parent):
        record = read_json(directory / CONFIG_FILE)
        if isinstance(record, dict):
            return record, directory
    return {}, None


def recorded_tokenizer(checkpoint: str) -> str | None:
    """The eval tokenizer the checkpoint's run recorded, as a path to read (a step's is relative to its prefix)."""
    run, run_dir = _run_config(checkpoint)
    recorded = (run.get("eval") or {}).get("tokenizer")
    if not isinstance(recorded, str) or not recorded or run_dir is None:
        return None
    return resolve_recorded(recorded, run_dir)


def _eval_settings(checkpoint: str, tokenizer: str | None, seq_len: int | None) -> tuple[str, int]:
    """The tokenizer and seq_len to evaluate with: given, else the run's recorded ones."""
    run, _ = _run_config(checkpoint)
    tokenizer = tokenizer or recorded_tokenizer(checkpoint)
    if not tokenizer:
        raise TootsieError(
            f"no tokenizer recorded for {checkpoint} (its config.json has no eval.tokenizer); "
            "pass --tokenizer with the tokenizer.json the model was trained with"
        )
    return tokenizer, int(seq_len or (run.get("data") or {}).get("seq_len") or DEFAULT_SEQ_LEN)


def _load(checkpoint: str, weights: str) -> tuple[Path, LlamaModel]:
    """The checkpoint's location and its model (`weights`: "model" or "ema")."""
    location = resolve_checkpoint(checkpoint)
    return location, load_model(model_config_of(location), str(location), weights=weights)


def _record_head(
    location: Path, weights: str, suite_dir: str, layout: str, tokenizer: str, seq_len: int
) -> dict[str, Any]:
    """What every bpb-suite result starts with: the checkpoint, its step and weights, the suite and the settings."""
    return {
        "checkpoint": str(location),
        "step": read_checkpoint_state(location)["step"],
        "weights": weights,
        "suite": str(Path(suite_dir).resolve()),
        "layout": layout,
        "tokenizer": str(tokenizer),
        "seq_len": int(seq_len),
    }


def run_paloma_suite(
    checkpoint: str,
    mirror: str,
    tokenizer: str | None = None,
    seq_len: int | None = None,
    split: str = "val",
    sources: tuple[str, ...] | None = None,
    max_documents: int | None = None,
    prefix_token: str = "bos",
    weights: str = "model",
) -> dict[str, Any]:
    """Paloma's figures of a checkpoint on a Paloma mirror: per subdomain, and macro and micro per source.

    `bpb` maps each source to its macro BPB (Paloma's per-source figure);
    `sources` holds every figure (`tootsie.eval.paloma.summarize_source`).
    """
    tokenizer, seq_len = _eval_settings(checkpoint, tokenizer, seq_len)
    prepared = prepare_mirror(mirror, tokenizer, seq_len, split, sources, max_documents, prefix_token)
    location, model = _load(checkpoint, weights)
    results = {name: evaluate_source(model, source) for name, source in prepared.items()}
    return {
        **_record_head(location, weights, mirror, "paloma", tokenizer, seq_len),
        "split": split,
        "prefix_token": prefix_token,
        "max_documents": max_documents,
        "bpb": {name: r["macro_bpb"] for name, r in results.items()},
        "sources": results,
    }


def run_bpb_suite(
    checkpoint: str,
    suite_dir: str,
    prefix: str | None = None,
    tokenizer: str | None = None,
    seq_len: int | None = None,
    max_sequences: int | None = None,
    weights: str = "model",
) -> dict[str, Any]:
    """Per-domain BPB of a checkpoint on a suite directory, with micro and macro averages and the caches used.

    `prefix` holds the caches (default $TOOTSIE_PREFIX, else ./out); `tokenizer`
    and `seq_len` default to the run's recorded eval tokenizer and sequence length.
    """
    prefix = prefix or os.environ.get("TOOTSIE_PREFIX") or "out"
    tokenizer, seq_len = _eval_settings(checkpoint, tokenizer, seq_len)
    caches = build_domain_caches(suite_dir, tokenizer, prefix)
    location, model = _load(checkpoint, weights)
    scores = evaluate_domains(model, {name: c["path"] for name, c in caches.items()}, tokenizer, seq_len, max_sequences)
    return {
        **_record_head(location, weights, suite_dir, "folders", tokenizer, seq_len),
        "max_sequences": max_sequences,
        **scores,
        "caches": caches,
    }


def suite_layout(suite_dir: str, layout: str = "auto") -> str:
    """`"paloma"` or `"folders"`: the layout asked for, or (for `"auto"`) the one the directory has."""
    if layout not in LAYOUTS:
        raise TootsieError(f"layout {layout!r} is not one of {LAYOUTS}")
    if layout != "auto":
        return layout
    return "paloma" if is_paloma_mirror(suite_dir) else "folders"
