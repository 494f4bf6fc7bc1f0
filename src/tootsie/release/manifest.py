"""The mixture manifest: every dataset a release was trained on, where it came from, and how much of it each phase used.

Each phase's recorded `MixtureConfig` names its components' token caches. For
every cache the manifest gives its step id and hash, the document and token
counts from its `ledger.json`, and its lineage: every upstream step, found by
following the step references in the recorded configs (tokenize → consolidate →
split → ... → raw source), with each step's settings and `stats.json`. From the
lineage it lists the treatments applied: quality filters and dedup (the
attributes a consolidate step dropped on, with the documents they removed),
exact-content dedup at normalization, and decontamination.

Per phase it gives the stages (weights normalized, as the data loader uses
them) and per component the target tokens drawn and the oversampling
(`epochs` = tokens drawn / tokens in the cache; above 1 the data repeats).
Tokens drawn are the mixture's exact target: each stage's weights times the
tokens of its steps, step by step inside a transition window.

Example (demo cooldown, 100 steps of 16 × 128 tokens at 30/70): code draws
61,440 tokens, prose 143,360.
"""

from pathlib import Path
from typing import Any

import numpy as np

from tootsie.configfile import from_plain, kind_of, to_plain
from tootsie.data.mixture import MixtureConfig
from tootsie.datakit.token_cache import LEDGER_FILE
from tootsie.datakit.tokenizer import file_sha256
from tootsie.errors import TootsieError
from tootsie.release.run_history import Phase, RunHistory
from tootsie.release.step_info import STEP_KEY, StepInfo, load_json, plain, read_step, step_refs, summary

MANIFEST_FILE = "mixture_manifest.json"
"""The manifest's name in a release folder (`release.release` writes it there; the model card links it)."""
MANIFEST_FORMAT = "tootsie-mixture-manifest/1"
TREATMENT_OF_ATTRIBUTE = {"QualityConfig": "filters", "DedupConfig": "dedup", "DecontaminateConfig": "decontamination"}
"""Config type of the step that scored an attribute → the manifest list a drop on it belongs to."""
SETTINGS_LEFT_OUT = ("input", "inputs", "attributes")
LINEAGE_SKIPPED = ("tokenizer",)
"""Config keys whose inputs are not where a dataset's documents came from."""


def _settings(step: StepInfo) -> object:
    return summary({key: value for key, value in step.config.items() if key not in SETTINGS_LEFT_OUT})


def lineage(step: StepInfo) -> list[StepInfo]:
    """`step` and every step its documents came from, each once, nearest first.

    The tokenizer input is not followed: it was trained on every dataset, so
    following it would list the other datasets' processing under this one.
    """
    found, queue = {step.id: step}, [step]
    while queue:
        current = queue.pop(0)
        for ref in step_refs({key: value for key, value in current.config.items() if key not in LINEAGE_SKIPPED}):
            upstream = read_step(current.resolve({STEP_KEY: ref[STEP_KEY]}))
            if upstream is not None and upstream.id not in found:
                found[upstream.id] = upstream
                queue.append(upstream)
    return list(found.values())


def treatments(steps: list[StepInfo]) -> dict[str, list[dict[str, object]]]:
    """The filters, dedup and decontamination applied along a lineage, with the documents each removed."""
    out: dict[str, list[dict[str, object]]] = {"filters": [], "dedup": [], "decontamination": []}
    for step in steps:
        stats = step.stats() or {}
        if step.type == "NormalizeConfig":
            out["dedup"].append(
                {
                    "name": "exact_content",
                    "applied_by": step.id,
                    "rule": "identical text (same xxh3_128 id)",
                    "documents_removed": stats.get("exact_duplicates"),
                }
            )
            rejected = stats.get("rejected") or {}
            out["filters"].append(
                {
                    "name": "normalize_guards",
                    "applied_by": step.id,
                    "settings": _settings(step),
                    "documents_removed": sum(rejected.values()),
                    "by_reason": rejected,
                }
            )
        if step.type != "ConsolidateConfig":
            continue
        for rule in step.config.get("attributes", []):
            scored_by = read_step(step.resolve(rule["attributes"]))
            kind = TREATMENT_OF_ATTRIBUTE.get(scored_by.type if scored_by else "", "filters")
            out[kind].append(
                {
                    "name": rule["name"],
                    "applied_by": step.id,
                    "attribute_step": scored_by.id if scored_by else str(step.resolve(rule["attributes"])),
                    "drop_when": {
                        key: rule[key]
                        for key in ("column", "drop_value", "drop_above", "drop_below")
                        if rule.get(key) is not None
                    },
                    "settings": _settings(scored_by) if scored_by else None,
                    "documents_removed": (stats.get("removed_by") or {}).get(rule["name"]),
                    "chars_removed": (stats.get("chars_removed_by") or {}).get(rule["name"]),
                }
            )
    return out


def dataset_entry(cache: Path) -> dict[str, object]:
    """A token cache's identity, counts, tokenizer and lineage."""
    ledger = load_json(cache / LEDGER_FILE)
    step = read_step(cache)
    steps = lineage(step) if step is not None else []
    return {
        "step": step.id if step else None,
        "hash": step.hash if step else None,
        "path": str(cache),
        "documents": ledger.get("num_docs"),
        "tokens": ledger.get("num_tokens"),
        "tokenizer_sha256": ledger.get("tokenizer_sha256"),
        "bos_id": ledger.get("bos_id"),
        "eos_id": ledger.get("eos_id"),
        **treatments(steps),
        "lineage": [{"step": s.id, "type": s.type, "settings": _settings(s), "stats": s.stats()} for s in steps[1:]],
    }


def mixture_of(phase: Phase) -> MixtureConfig | None:
    """The phase's MixtureConfig rebuilt from its executor record (cache refs as paths), or None without a record."""
    if phase.step is None:
        return None
    return from_plain(
        MixtureConfig, plain(phase.step.config["data"], phase.step), f"{phase.step.directory}: config.data"
    )


def component_tokens(mixture: MixtureConfig, start: int, end: int) -> np.ndarray:
    """Target tokens of each component (in `component_names` order) over steps [start, end)."""
    edges = {start, end}
    for stage in mixture.stages:
        edges |= {stage.start_step, stage.start_step + stage.transition_steps}
    points = sorted(e for e in edges if start <= e <= end)
    total = np.zeros(len(mixture.component_names))
    for a, b in zip(points, points[1:]):
        if np.allclose(mixture.weights_at(a), mixture.weights_at(b - 1)):
            total += mixture.weights_at(a) * (mixture.batch_schedule.offset(b) - mixture.batch_schedule.offset(a))
        else:
            total += sum(mixture.weights_at(s) * mixture.batch_schedule.batch_size(s) for s in range(a, b))
    return total * mixture.seq_len


def phase_stages(mixture: MixtureConfig, start: int, end: int) -> list[dict[str, object]]:
    """The mixture stages active in [start, end), clipped to it, with normalized weights."""
    stages = []
    for index, stage in enumerate(mixture.stages):
        stop = mixture.stages[index + 1].start_step if index + 1 < len(mixture.stages) else end
        if stage.start_step < end and stop > start:
            weights = mixture.weights_at(stage.start_step + stage.transition_steps)
            stages.append(
                {
                    "start_step": max(stage.start_step, start),
                    "end_step": min(stop, end),
                    "transition_steps": stage.transition_steps,
                    "weights": {name: round(float(w), 6) for name, w in zip(mixture.component_names, weights)},
                }
            )
    return stages


def mixture_manifest(history: RunHistory) -> dict[str, Any]:
    """The manifest of every dataset and every phase's mixture in `history`."""
    datasets: dict[str, dict[str, Any]] = {}
    phases = []
    for phase in history.phases:
        mixture = mixture_of(phase)
        entry: dict[str, Any] = {
            "phase": phase.name,
            "step": phase.step.id if phase.step else None,
            "steps": [phase.start_step, phase.end_step],
            "tokens": [phase.start_tokens, phase.end_tokens],
        }
        if mixture is None:
            phases.append(
                {
                    **entry,
                    "mixture": None,
                    "note": (
                        f"{phase.directory} was not trained through the executor, so its data mixture was not recorded"
                    ),
                }
            )
            continue
        drawn = component_tokens(mixture, phase.start_step, phase.end_step)
        components = {}
        for name, tokens in zip(mixture.component_names, drawn):
            cache = Path(mixture.caches[name])
            dataset = datasets.setdefault(str(cache), {"name": name, **dataset_entry(cache), "phases": {}})
            epochs = float(tokens) / dataset["tokens"] if dataset["tokens"] else None
            components[name] = {
                "dataset": dataset["step"] or dataset["path"],
                "tokens": int(round(tokens)),
                "epochs": epochs,
            }
            dataset["phases"][phase.name] = {
                "tokens": int(round(tokens)),
                "epochs": epochs,
                "weights": [s["weights"][name] for s in phase_stages(mixture, phase.start_step, phase.end_step)],
            }
        phases.append(
            {
                **entry,
                "seq_len": mixture.seq_len,
                "seed": mixture.seed,
                "permutation": kind_of(mixture.permutation),
                "permutation_config": to_plain(mixture.permutation),
                "block_size": mixture.block_size,
                "stages": phase_stages(mixture, phase.start_step, phase.end_step),
                "components": components,
            }
        )
    return {
        "format": MANIFEST_FORMAT,
        "released": history.final.revision,
        "tokenizer": _tokenizer(list(datasets.values())),
        "datasets": list(datasets.values()),
        "phases": phases,
    }


def _tokenizer(datasets: list[dict[str, Any]]) -> dict[str, object] | None:
    """The tokenizer every dataset was tokenized with (one, or an error), from the tokenize step's record."""
    hashes = {d["tokenizer_sha256"] for d in datasets}
    if len(hashes) > 1:
        raise TootsieError(
            "the datasets were tokenized with different tokenizers "
            f"(sha256 {sorted(map(str, hashes))}); a release needs one tokenizer"
        )
    for dataset in datasets:
        step = read_step(Path(dataset["path"]))
        source = step.resolve(step.config.get("tokenizer")) if step is not None else None
        if source is not None and source.is_file():
            tokenizer_step = read_step(source.parent)
            return {
                "sha256": file_sha256(source),
                "path": str(source),
                "step": tokenizer_step.id if tokenizer_step else None,
            }
    return {"sha256": hashes.pop(), "path": None, "step": None} if hashes else None
