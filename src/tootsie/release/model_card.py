"""The release's README.md model card, generated from run metadata only.

Sections follow the Marin 8B model card (seed `marin-8b-model-card.md`):
checkpoints (Marin-style `step-N-tokens-T` revisions), inference with
`transformers`, architecture table, training phases with token ranges, data
mixture tables per phase (weights, tokens drawn, oversampling), the data
processing applied to each dataset, optimizer and schedule per phase,
evaluation, files (manifest, metrics history) and provenance. Every figure is
read from a recorded file (state.json, executor records, ledgers, bpb.json,
metrics); a section whose source was not recorded says so instead of guessing.
"""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tootsie.executor.hashing import STEP_KEY, TYPE_KEY
from tootsie.models.llama import LlamaConfig
from tootsie.models.moe import MoeConfig
from tootsie.monitor.metrics_log import METRICS_FILE
from tootsie.release.hf_chat import FROM_RUN
from tootsie.release.manifest import MANIFEST_FILE
from tootsie.release.run_history import Phase, RunHistory

AVERAGES = ("macro_avg", "micro_avg")
TRAINING_ROWS = (
    ("optimizer", "Optimizer"),
    ("schedule", "Learning-rate schedule"),
    ("data.batch_schedule", "Batch size (from step: sequences)"),
    ("data.seq_len", "Sequence length"),
    ("z_loss_weight", "z-loss weight"),
    ("ema", "EMA of weights"),
    ("stability", "Update clipping / bad-step skipping"),
    ("compute_dtype", "Compute dtype"),
    ("microbatches", "Microbatches"),
    ("seed", "Init seed"),
    ("warm_start", "Warm start"),
)
"""(TrainConfig path, row label) of the optimizer and schedule table."""


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _tokens(count: float) -> str:
    """A token count in the style of the Marin card: 13.7T, 2.7B, 614.4K."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(count) >= scale:
            return f"{count / scale:.4g}{unit}"
    return f"{count:.0f}"


def _inline(value: object) -> str:
    """A recorded config value on one line: `AdamW(lr=..., ...)` for a config, a step id for a reference."""
    if isinstance(value, dict) and STEP_KEY in value:
        return f"`{value[STEP_KEY]}`"
    if isinstance(value, dict):
        fields = ", ".join(f"{k}={_inline(v)}" for k, v in sorted(value.items()) if k not in (TYPE_KEY, "engine"))
        return f"{str(value[TYPE_KEY]).removesuffix('Config')}({fields})" if TYPE_KEY in value else "{" + fields + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return "off" if value is None else str(value)


def _lookup(config: dict[str, Any] | None, path: str) -> object:
    value: object = config
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


ROUTER_WEIGHT_NOTES = {"renormalized": "renormalized to sum to 1", "softmax": "kept as they are (not renormalized)"}
"""How the card describes each `MoeConfig.router_weights`."""


def moe_rows(config: MoeConfig) -> list[tuple[str, object]]:
    """The architecture rows of a mixture of experts: experts, k, dense blocks, router and capacity factor."""
    dense = f"{config.dense_layers} (feedforward size {config.dense_width})" if config.dense_layers else "none"
    capacity = "none (dropless)" if config.capacity_factor is None else f"{config.capacity_factor:g}"
    return [
        ("Experts per MoE layer", config.num_experts),
        ("Experts per token (k)", config.experts_per_token),
        ("Shared experts", config.num_shared_experts),
        ("Leading dense layers", dense),
        ("Router weights", "softmax over experts, the top k " + ROUTER_WEIGHT_NOTES[config.router_weights]),
        ("Capacity factor (training)", capacity + "; inference (and transformers) route dropless"),
    ]


def _parameters(count: Callable[..., int]) -> str:
    """A parameter count with and without embeddings (`count(include_embeddings=...)`)."""
    return f"{count():,} ({count(include_embeddings=False):,} without embeddings)"


def architecture_section(config: LlamaConfig, export: dict[str, Any]) -> str:
    """The architecture table (Marin's "Architecture Details"); a mixture of experts adds its
    active parameters and `moe_rows`."""
    scaling = config.rope_scaling
    moe = isinstance(config, MoeConfig)
    parameters = [("Parameters" + (" (total)" if moe else ""), _parameters(config.num_parameters))]
    if moe:
        parameters.append(("Active parameters per token", _parameters(config.active_parameters)))
    qk_note = " (Llama with Qwen3-style QK-norm)" if config.qk_norm and not moe else ""
    rows = [
        ("Architecture", f"`{export['architecture']}`{qk_note}"),
        *parameters,
        ("Hidden size", config.hidden_dim),
        ("Feedforward size" + (" (each expert)" if moe else ""), config.intermediate_dim),
        *(moe_rows(config) if moe else []),
        ("Number of layers", config.num_layers),
        ("Number of attention heads", config.num_heads),
        ("Number of KV heads", config.num_kv_heads),
        ("Head dimension", config.resolved_head_dim),
        ("Vocabulary size", config.vocab_size),
        (
            "RoPE",
            f"theta {config.rope_theta:g}"
            + (f", Llama 3 scaling ×{scaling.factor:g} from {scaling.original_max_position}" if scaling else ""),
        ),
        ("QK-norm", "yes" if config.qk_norm else "no"),
        ("Tied embeddings", "yes" if config.tie_embeddings else "no"),
        ("RMSNorm epsilon", f"{config.norm_eps:g}"),
    ]
    return "## Architecture\n\n" + _table(("", "value"), rows)


def checkpoints_section(history: RunHistory, revisions: Sequence[str]) -> str:
    """Every checkpoint in the lineage, named as revisions; the released one in bold."""
    rows = []
    for phase in history.phases:
        for c in phase.checkpoints:
            name = (
                f"**{c.revision}** (this folder)"
                if c == history.final
                else (f"[{c.revision}](revisions/{c.revision})" if c.revision in revisions else c.revision)
            )
            rows.append((name, phase.name, c.step, f"{c.tokens:,} ({_tokens(c.tokens)})", "yes" if c.has_ema else "no"))
    note = (
        "Exported intermediate checkpoints are under `revisions/`."
        if revisions
        else (
            "Intermediate checkpoints are listed for reference; export any of them with `tootsie export hf CHECKPOINT`."
        )
    )
    return (
        "## Checkpoints\n\n"
        + _table(("Revision", "Phase", "Step", "Training tokens", "EMA saved"), rows)
        + f"\n\n{note}"
    )


def chat_section(chat: dict[str, Any]) -> str:
    """How to talk to a chat export with transformers: its template, and where generation stops."""
    marker, token_id = chat["end_of_turn"], chat["end_of_turn_token_id"]
    stop = "" if token_id is not None else f', stop_strings=["{marker}"], tokenizer=tokenizer'
    where = (
        f"at `{marker}` (id {token_id}, listed with EOS in `generation_config.json`)"
        if token_id is not None
        else f"at `{marker}`, which this tokenizer splits into several tokens, so pass it as a stop string"
    )
    origin = "the template the model was fine-tuned with" if chat["origin"] == FROM_RUN else "chosen at export"
    return f"""### Chat

The folder ships the `{chat["name"]}` chat template in `tokenizer_config.json` ({origin}).

```python
messages = [{{"role": "user", "content": "What does len do?"}}]
inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
output = model.generate(**inputs, max_new_tokens=128, do_sample=False{stop})
print(tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))
```

A reply ends {where}."""


def inference_section(name: str) -> str:
    """How to load the folder with transformers (a local path; no hub needed)."""
    return f"""## Inference

`{name}` is a standard Hugging Face folder: it loads with `transformers` alone, no custom code.

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained("path/to/this/folder")
tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")
inputs = tokenizer(["def fibonacci(n):"], return_tensors="pt", return_token_type_ids=False)
output = model.generate(**inputs, max_new_tokens=40, do_sample=False)
print(tokenizer.batch_decode(output, skip_special_tokens=True)[0])
```

The tokenizer prepends its BOS token, as every training document began with it; generation stops at its EOS token
(`bos_token_id`/`eos_token_id` in `config.json`)."""


def _relative(path: Path, phase: Phase) -> Path:
    """`path` relative to the experiment prefix when it is inside it (step ids read better than absolute paths)."""
    prefix = phase.step.prefix.resolve() if phase.step is not None else None
    return path.resolve().relative_to(prefix) if prefix is not None and path.resolve().is_relative_to(prefix) else path


def phases_section(history: RunHistory) -> str:
    """Training phases with step and token ranges (Marin's "Training Phases")."""
    rows = []
    for phase in history.phases:
        schedule = _inline(_lookup(phase.train_config, "schedule")) if phase.train_config else "not recorded"
        origin = f"`{_relative(phase.warm_start, phase)}`" if phase.warm_start else "random init"
        rows.append(
            (
                f"*{phase.name}*",
                f"{phase.start_step} → {phase.end_step}",
                f"{_tokens(phase.start_tokens)} → {_tokens(phase.end_tokens)}",
                origin,
                schedule,
            )
        )
    return "## Training phases\n\n" + _table(("Phase", "Steps", "Tokens", "Started from", "LR schedule"), rows)


def _weights(stages: list[dict[str, Any]], name: str) -> str:
    return " → ".join(
        f"{s['weights'][name]:.3g}" + (f" (from step {s['start_step']})" if len(stages) > 1 else "") for s in stages
    )


def _listed(transforms: list[dict[str, Any]]) -> str:
    """One cell of the processing table: each transform's name, with the documents it removed when recorded."""
    found = [
        f"{t['name']} (−{t['documents_removed']} docs)" if t.get("documents_removed") is not None else t["name"]
        for t in transforms
    ]
    return ", ".join(found) or "none recorded"


def mixture_section(manifest: dict[str, Any]) -> str:
    """Per phase, every dataset's weight, tokens drawn and oversampling; then how each dataset was processed."""
    datasets = {d["step"] or d["path"]: d for d in manifest["datasets"]}
    parts = [
        "## Data mixture",
        f"Full details, including every upstream step and its statistics, are in [`{MANIFEST_FILE}`]({MANIFEST_FILE}).",
    ]
    for phase in manifest["phases"]:
        parts.append(f"### Phase *{phase['phase']}* (steps {phase['steps'][0]} → {phase['steps'][1]})")
        if phase.get("components") is None:
            parts.append(phase["note"])
            continue
        rows = []
        for name, component in phase["components"].items():
            dataset = datasets[component["dataset"]]
            epochs = component["epochs"]
            rows.append(
                (
                    name,
                    f"`{dataset['step'] or dataset['path']}`",
                    f"{dataset['documents']:,}",
                    _tokens(dataset["tokens"]),
                    _weights(phase["stages"], name),
                    _tokens(component["tokens"]),
                    f"{epochs:.3f}" if epochs is not None else "-",
                )
            )
        parts.append(
            _table(
                (
                    "Dataset",
                    "Token cache step",
                    "Documents",
                    "Tokens",
                    "Weight",
                    "Tokens drawn",
                    "Epochs (oversampling)",
                ),
                rows,
            )
        )
    rows = []
    for dataset in manifest["datasets"]:
        rows.append((dataset["name"], *(_listed(dataset[kind]) for kind in ("filters", "dedup", "decontamination"))))
    parts += ["### Data processing", _table(("Dataset", "Filters", "Deduplication", "Decontamination"), rows)]
    tokenizer = manifest.get("tokenizer")
    if tokenizer:
        parts.append(f"Tokenizer: `{tokenizer['step'] or tokenizer['path']}` (sha256 `{tokenizer['sha256'][:16]}…`).")
    return "\n\n".join(parts)


def training_section(history: RunHistory) -> str:
    """Optimizer, schedule and the other training settings, one column per phase."""
    phases = [p for p in history.phases if p.train_config is not None]
    if not phases:
        return (
            "## Optimizer and schedule\n\n"
            "Not recorded: the run was trained outside the executor, whose step records hold the full training config."
        )
    rows = [(label, *(_inline(_lookup(p.train_config, path)) for p in phases)) for path, label in TRAINING_ROWS]
    return "## Optimizer and schedule\n\n" + _table(("", *(p.name for p in phases)), rows)


def evaluation_section(bpb_rows: list[dict[str, Any]], in_loop_rows: list[dict[str, Any]]) -> str:
    """Held-out bits-per-byte tables (lower is better)."""
    parts = ["## Evaluation"]
    if bpb_rows:
        domains = sorted(bpb_rows[0]["bpb"], key=lambda d: (d in AVERAGES, d))
        rows = [
            (r["label"], r["phase"], r["weights"], *(f"{r['bpb'].get(d, float('nan')):.4f}" for d in domains))
            for r in bpb_rows
        ]
        parts += [
            f"Held-out bits per byte (lower is better), from `{bpb_rows[0]['step']}`:",
            _table(("Checkpoint", "Phase", "Weights", *domains), rows),
        ]
    if in_loop_rows:
        domains = sorted({d for r in in_loop_rows for d in r["bpb"]})
        rows = [
            (
                r["phase"],
                r["step"],
                *(f"{r['bpb'][d]:.4f}" if isinstance(r["bpb"].get(d), (int, float)) else "-" for d in domains),
            )
            for r in in_loop_rows
        ]
        parts += ["Last in-loop evaluation of each phase (bits per byte):", _table(("Phase", "Step", *domains), rows)]
    if len(parts) == 1:
        parts.append(
            "No evaluation of this run was recorded "
            "(run `tootsie eval bpb` or an `EvalBPBConfig` step on its checkpoints)."
        )
    return "\n\n".join(parts)


def provenance_section(history: RunHistory) -> str:
    """Files of the release and the code versions that made it."""
    lines = [
        "## Files and provenance",
        "",
        (
            f"- [`{MANIFEST_FILE}`]({MANIFEST_FILE}): every dataset "
            "(step hash, documents, tokens, weight per phase, filters and dedup applied)."
        ),
        (
            f"- [`{METRICS_FILE}`]({METRICS_FILE}): the metrics history of every phase "
            "(one JSON object per step, tagged with its phase)."
        ),
        "- `tootsie_export.json`: the checkpoint, step, tokens and weights (raw or EMA) this folder was exported from.",
    ]
    for phase in history.phases:
        record = phase.step.record if phase.step is not None else {}
        git = record.get("git") or {}
        lines.append(
            f"- Phase *{phase.name}*: `{phase.step.id if phase.step else phase.directory}`, tootsie "
            f"{record.get('tootsie_version', '?')}, commit `{git.get('tootsie') or 'unknown'}`"
        )
    return "\n".join(lines)


def model_card(
    name: str,
    config: LlamaConfig,
    history: RunHistory,
    manifest: dict[str, Any],
    export: dict[str, Any],
    bpb_rows: list[dict[str, Any]],
    in_loop_rows: list[dict[str, Any]],
    revisions: Sequence[str] = (),
) -> str:
    """The README.md text."""
    final = history.final
    weights = (
        "an exponential moving average (EMA) of the weights"
        if export["weights"] == "ema"
        else "the raw (non-EMA) weights"
    )
    front = "---\nlibrary_name: transformers\npipeline_tag: text-generation\ntags:\n- tootsie\n---"
    intro = (
        f"# Model Card for {name}\n\n"
        f"A {_tokens(config.num_parameters())}-parameter decoder-only language model"
        + (
            f" (a mixture of experts, {_tokens(config.active_parameters())} active per token)"
            if isinstance(config, MoeConfig)
            else ""
        )
        + " trained with tootsie. "
        f"This folder holds revision `{final.revision}`: step {final.step} after {final.tokens:,} training tokens "
        f"over {len(history.phases)} phase(s), exported from `{Path(export['checkpoint'])}` with {weights}."
    )
    limits = (
        "## Bias, Risks, and Limitations\n\n"
        "Like any base language model without safety filtering, this model can be prompted to generate "
        "harmful or false content, and may do so unprompted. It is small and trained on little data: "
        "treat its outputs as unverified."
    )
    sections = [
        front,
        intro,
        checkpoints_section(history, revisions),
        inference_section(name),
        *([chat_section(export["chat_template"])] if export["chat_template"]["name"] else []),
        architecture_section(config, export),
        phases_section(history),
        mixture_section(manifest),
        training_section(history),
        evaluation_section(bpb_rows, in_loop_rows),
        provenance_section(history),
        limits,
    ]
    return "\n\n".join(sections) + "\n"
