"""Phenomenon `format-contamination`: test items trained on in one format, evaluated in two.

The 32B Bison cooldown trained on GSM8K's test items in OLMES's format (no
calculator tags); under LM-Eval's prompt, whose solutions carry tags such as
`<<16-7=9>>`, the model showed high surprisal on the tags and scored ~22
points below the weakest baseline (32B retrospective, Bison). At toy scale,
with the shared generator `tootsie.corpora.arithmetic`:

    problems        test items, unseen items (trained on by neither arm) and train problems (no test question)
    normalized, tokenized (x2)  train problems in GSM8K's tagged format; test items in OLMES's format
    clean-s{seed}   the tiny mixture + tagged train problems (what Marin's models saw of GSM8K train)
    contaminated-s{seed}  the same, with CONTAMINATION_WEIGHT of web moved to the OLMES test items
    eval-{arm}-s{seed}    surprisal and accuracy on test and unseen items, in both formats
    results         paired differences over seeds, the verdict, figure.png

Both arms of a seed share the model initialization and data seed. Problem
documents are whole sequences (`document_packed`): a question is always read
with its solution.

Measured per run (`evaluate_formats`) on the final weights, per split (test,
unseen) and format: surprisal, the mean negative log-likelihood in nats per
token of the solution given `Question: ...\nAnswer:` (for the tagged format
also over the tag tokens alone, ` <<a op b=r>>`, and over the rest); and
ranked accuracy, the share of items whose gold solution is more likely than
each of three copies with a wrong final answer (N-1, N+1, N+10, changed in
the last step, its tag and the answer line; chance is 1 in 4). A 64-wide
model cannot do the arithmetic: greedy generation, forced into either format,
got 0-1 % right in both arms while exploring; ranking is the accuracy that
can move.

Criteria (`verdict`), on contaminated - clean differences paired by seed,
test items: an effect holds when every seed's difference has the expected
sign and |mean| > 2·sd/√n (n >= 2, `significant`). Help: OLMES surprisal
falls. Harm: tag-token surprisal rises (the seeds' mechanism); tagged
accuracy falls (their outcome). `reproduced` when all three hold, `partial`
when a harm holds but not all three, `not_reproduced` when neither harm
holds. The unseen items are the control: `item_specific` numbers subtract
their difference, separating what the test items did to themselves from what
the untagged format did to every problem.
"""

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int
from matplotlib.figure import Figure

from tootsie.corpora.arithmetic import (
    SOLUTION_FORMATS,
    document,
    problem_from_record,
    problem_record,
    prompt,
    word_problem,
)
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.datakit.stats import STATS_FILE
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.recipes.cases.common import mixture
from tootsie.recipes.phenomena.common import MIXTURE_WEIGHTS, SEEDS, phenomenon_train_config
from tootsie.recipes.phenomena.registry import results_step_name
from tootsie.recipes.phenomena.results import over_seeds, write_phenomenon
from tootsie.recipes.tiny.data import INLINE, TinyData, tiny_data_steps, write_jsonl_gz
from tootsie.train.divergence import read_divergence
from tootsie.train.loading import load_model, model_config_of, resolve_checkpoint

NAME = "format-contamination"
ARMS = ("clean", "contaminated")
SPLITS = ("test", "unseen")
TAGGED, UNTAGGED = "gsm8k", "olmes"
TAG = re.compile(r" <<[^>]*>>")
"""A calculator tag with its leading space (` <<16-7=9>>`): in the train problems, not in the OLMES test items."""
ANSWER_OFFSETS = (-1, 1, 10)
"""Wrong final answers each gold solution is ranked against (chance: 1 in 4)."""
SEQ_LEN = 128
"""Tokens per sequence: a problem document fits (1 % of tagged ones, up to 135 tokens, lose their end)."""
EVAL_WIDTH = 160
"""Padded length of scored documents: the longest tagged two-step problem with BOS is ~135 tokens."""
ITEMS_FILE, EVAL_FILE = "items.jsonl", "eval.json"
TRAIN_DOCS, TEST_DOCS = "train-gsm8k", "test-olmes"


@dataclass(frozen=True)
class ProblemsConfig:
    """How many test, unseen and train problems, and their seed."""

    test_problems: int = 200
    """Test items (the contaminated arm trains on them in OLMES's format)."""
    unseen_problems: int = 200
    """Items neither arm trains on: the control."""
    train_problems: int = 4000
    """Train problems in GSM8K's tagged format (both arms); none repeats a test or unseen question."""
    seed: int = 0
    """Seed of the problems (test, unseen and train draw from seed, seed + 1, seed + 2)."""

    def __post_init__(self) -> None:
        for name in ("test_problems", "unseen_problems", "train_problems"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def write_problems(config: ProblemsConfig, output_path: str) -> dict[str, int]:
    """Write `items.jsonl` (test and unseen records), the tagged train documents and the OLMES test documents."""
    rngs = [np.random.default_rng(config.seed + offset) for offset in range(3)]
    seen: set[str] = set()
    splits: dict[str, list] = {}
    for split, rng, count in zip(
        (*SPLITS, "train"), rngs, (config.test_problems, config.unseen_problems, config.train_problems), strict=True
    ):
        drawn = [word_problem(rng) for _ in range(count)]
        splits[split] = [p for p in drawn if p.question not in seen]
        seen |= {p.question for p in drawn}
    out = Path(output_path)
    items = [{"split": split, **problem_record(p)} for split in SPLITS for p in splits[split]]
    tmp = out / f".{ITEMS_FILE}.tmp"
    out.mkdir(parents=True, exist_ok=True)
    tmp.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    tmp.replace(out / ITEMS_FILE)
    write_jsonl_gz(
        out / TRAIN_DOCS / "docs-00000.jsonl.gz",
        ({"id": f"train:{i}", "text": document(p, TAGGED)} for i, p in enumerate(splits["train"])),
    )
    write_jsonl_gz(
        out / TEST_DOCS / "docs-00000.jsonl.gz",
        ({"id": f"test:{i}", "text": document(p, UNTAGGED)} for i, p in enumerate(splits["test"])),
    )
    counts = {split: len(problems) for split, problems in splits.items()}
    write_json_atomic(out / STATS_FILE, counts)
    return counts


@dataclass(frozen=True)
class FormatEvalConfig:
    """A trained run and the items it is scored on."""

    run: str
    """A training run's output directory."""
    tokenizer: str
    """The tokenizer.json the run's data was tokenized with."""
    items: str
    """A `write_problems` items.jsonl."""


@eqx.filter_jit
def _surprisals(model: eqx.Module, tokens: Int[Array, "batch seq"]) -> Float[Array, "batch seq"]:
    """Negative log-likelihood of each next token (position i scores token i + 1; the last column is padding)."""
    logprobs = jax.nn.log_softmax(model(tokens).astype(jnp.float32), axis=-1)
    targets = jnp.concatenate([tokens[:, 1:], tokens[:, -1:]], axis=1)
    return -jnp.take_along_axis(logprobs, targets[..., None], axis=-1)[..., 0]


def _scored_tokens(tokenizer: object, bos: int, text: str, start: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    """`text`'s ids after BOS, and masks of the ids at or after character `start` and of those in a tag."""
    encoding = tokenizer.encode(text, add_special_tokens=False)
    tags = [match.span() for match in TAG.finditer(text)]
    solution = np.array([begin >= start for begin, _ in encoding.offsets])
    tagged = np.array([any(b < end and begin < e for b, e in tags) for begin, end in encoding.offsets])
    return [bos, *encoding.ids], solution, tagged


def _row_surprisals(model: eqx.Module, rows: list[list[int]]) -> list[np.ndarray]:
    """Each row's surprisal at every token after the first (nats), in batches of 32 rows of EVAL_WIDTH (one compile)."""
    longest = max(len(ids) for ids in rows)
    if longest > EVAL_WIDTH:
        raise ValueError(f"a scored document has {longest} tokens, more than {EVAL_WIDTH=}; raise EVAL_WIDTH")
    out = []
    for start in range(0, len(rows), 32):
        chunk = rows[start : start + 32]
        tokens = np.zeros((32, EVAL_WIDTH), np.int32)
        for row, ids in enumerate(chunk):
            tokens[row, : len(ids)] = ids
        nll = np.asarray(_surprisals(model, jnp.asarray(tokens)))
        out += [nll[row, : len(ids) - 1] for row, ids in enumerate(chunk)]
    return out


def _token_means(model: eqx.Module, rows: list[tuple[list[int], np.ndarray, np.ndarray]]) -> dict[str, float | None]:
    """Mean surprisal (nats/token) over the solution, its tag tokens and its other tokens (None where none)."""
    sums, counts = np.zeros(3), np.zeros(3)
    for values, (_, solution, tagged) in zip(_row_surprisals(model, [ids for ids, _, _ in rows]), rows, strict=True):
        for column, mask in enumerate((solution, tagged, solution & ~tagged)):
            sums[column] += values[mask].sum()
            counts[column] += mask.sum()
    means = [float(total / count) if count else None for total, count in zip(sums, counts, strict=True)]
    return dict(zip(("solution", "tags", "other"), means, strict=True))


def with_answer(text: str, answer: int, value: int) -> str:
    """The document `text` with its final answer shown as `value`: in the last step's result, its tag, the last line."""
    head, step, last = text.rsplit("\n", 2)
    cut = step.rindex("=")
    step = step[:cut] + re.sub(rf"(?<![\d*+/-]){answer}\b", str(value), step[cut:], count=2)
    return "\n".join((head, step, re.sub(rf"\b{answer}\b", str(value), last)))


def _ranked_correct(model: eqx.Module, tokenizer: object, bos: int, texts: list[str], answers: list[int]) -> list[bool]:
    """Whether the gold solution is strictly more likely than each of its ANSWER_OFFSETS variants, per item."""
    rows = [
        [bos, *tokenizer.encode(with_answer(text, answer, answer + offset), add_special_tokens=False).ids]
        for text, answer in zip(texts, answers, strict=True)
        for offset in (0, *ANSWER_OFFSETS)
    ]
    totals = np.array([values.sum() for values in _row_surprisals(model, rows)]).reshape(len(texts), -1)
    return [bool(row[0] < row[1:].min()) for row in totals]


def evaluate_formats(config: FormatEvalConfig, output_path: str) -> dict[str, object]:
    """Surprisal and ranked accuracy of the run's final weights on every split and format; `eval.json`."""
    diverged = read_divergence(config.run)
    if diverged is not None:
        results: dict[str, object] = {"diverged": diverged}
        write_json_atomic(Path(output_path) / EVAL_FILE, results)
        return results
    checkpoint = resolve_checkpoint(config.run)
    model = load_model(model_config_of(checkpoint), checkpoint)
    tokenizer, special = load_with_special_tokens(config.tokenizer)
    bos = special.require("bos")
    records = [json.loads(line) for line in Path(config.items).read_text(encoding="utf-8").splitlines()]
    results = {}
    for split in SPLITS:
        problems = [problem_from_record(r) for r in records if r["split"] == split]
        for solution_format in SOLUTION_FORMATS:
            texts = [document(p, solution_format) for p in problems]
            starts = [len(prompt(p.question)) for p in problems]
            surprisal = _token_means(
                model, [_scored_tokens(tokenizer, bos, t, s) for t, s in zip(texts, starts, strict=True)]
            )
            ranked = _ranked_correct(model, tokenizer, bos, texts, [p.answer for p in problems])
            results[f"{split}/{solution_format}"] = {
                "surprisal": surprisal,
                "ranked_accuracy": float(np.mean(ranked)),
                "items": len(problems),
            }
    write_json_atomic(Path(output_path) / EVAL_FILE, results)
    return results


def significant(differences: list[float], sign: int) -> bool:
    """Every difference has `sign` (+1/-1) and |mean| > 2·sd/√n, over n >= 2 seeds."""
    values = np.asarray(differences, dtype=np.float64)
    if len(values) < 2 or not np.all(np.sign(values) == sign):
        return False
    return bool(abs(values.mean()) > 2 * values.std(ddof=1) / np.sqrt(len(values)))


def verdict(helps_olmes: bool, tags_surprise: bool, tagged_accuracy_falls: bool) -> str:
    """`reproduced` when all three hold, `partial` when a harm holds but not all three, else `not_reproduced`."""
    if helps_olmes and tags_surprise and tagged_accuracy_falls:
        return "reproduced"
    return "partial" if tags_surprise or tagged_accuracy_falls else "not_reproduced"


@dataclass(frozen=True)
class ResultsConfig:
    """Every run's evaluation, by arm and seed."""

    evals: dict[str, dict[str, str]]
    """Arm ("clean", "contaminated") → seed (as a string) → its `evaluate_formats` output."""
    steps: int
    """Training steps per run (reported)."""
    contamination_weight: float
    """Mixture weight of the OLMES test items in the contaminated arm (reported)."""


SIGNALS = {
    "surprisal_olmes": (UNTAGGED, "surprisal", "solution"),
    "surprisal_gsm8k": (TAGGED, "surprisal", "solution"),
    "surprisal_gsm8k_tags": (TAGGED, "surprisal", "tags"),
    "surprisal_gsm8k_other": (TAGGED, "surprisal", "other"),
    "accuracy_olmes": (UNTAGGED, "ranked_accuracy", None),
    "accuracy_gsm8k": (TAGGED, "ranked_accuracy", None),
}
"""Number name → (format, metric, part) in eval.json; on test items, and on unseen ones as `unseen_<name>`."""


def _value(evaluation: dict, key: str, metric: str, part: str | None) -> float:
    value = evaluation[key][metric]
    return float(value[part] if part is not None else value)


def analyze_format_contamination(config: ResultsConfig, output_path: str) -> dict[str, object]:
    """Per-arm numbers over seeds, the paired differences, the verdict; `results.json` and `figure.png`.

    `item_specific` is the test items' contaminated − clean difference minus the unseen items': what the
    contamination did to the items themselves rather than to the formats.
    """
    loaded = {
        arm: {seed: read_json(Path(path) / EVAL_FILE) for seed, path in runs.items()}
        for arm, runs in config.evals.items()
    }
    diverged = {arm: sorted(s for s, e in runs.items() if "diverged" in e) for arm, runs in loaded.items()}
    seeds = sorted(set.intersection(*(set(runs) - set(diverged[arm]) for arm, runs in loaded.items())), key=int)
    per_arm, differences = {}, {}
    for split in SPLITS:
        for name, (solution_format, metric, part) in SIGNALS.items():
            label = name if split == "test" else f"unseen_{name}"
            values = {
                arm: [_value(loaded[arm][s], f"{split}/{solution_format}", metric, part) for s in seeds] for arm in ARMS
            }
            per_arm[label] = {arm: over_seeds(v) for arm, v in values.items()} if seeds else {}
            differences[label] = [c - k for c, k in zip(values["contaminated"], values["clean"], strict=True)]
    item_specific = {
        name: [t - u for t, u in zip(differences[name], differences[f"unseen_{name}"], strict=True)] for name in SIGNALS
    }
    criteria = {
        "olmes_surprisal_falls": significant(differences["surprisal_olmes"], -1),
        "tag_surprisal_rises": significant(differences["surprisal_gsm8k_tags"], +1),
        "tagged_accuracy_falls": significant(differences["accuracy_gsm8k"], -1),
        "olmes_accuracy_rises": significant(differences["accuracy_olmes"], +1),
        "tag_surprisal_rise_is_item_specific": significant(item_specific["surprisal_gsm8k_tags"], +1),
        "olmes_surprisal_fall_is_item_specific": significant(item_specific["surprisal_olmes"], -1),
    }
    numbers: dict[str, object] = {
        "steps": config.steps,
        "contamination_weight": config.contamination_weight,
        "seeds": [int(s) for s in seeds],
        "diverged": diverged,
        "per_arm": per_arm,
        "contaminated_minus_clean": {k: over_seeds(v) for k, v in differences.items() if v},
        "item_specific": {k: over_seeds(v) for k, v in item_specific.items() if v},
        "criteria": criteria,
    }
    result = verdict(
        criteria["olmes_surprisal_falls"], criteria["tag_surprisal_rises"], criteria["tagged_accuracy_falls"]
    )
    return write_phenomenon(output_path, NAME, result, numbers, _figure(per_arm, config))


def _figure(per_arm: dict[str, dict[str, dict]], config: ResultsConfig) -> Figure:
    """Surprisal per format and accuracy per format, per arm, bars at the seed mean with each seed's dot."""
    figure = Figure(figsize=(12, 4.6))
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    panels = (
        (
            left,
            ("surprisal_olmes", "surprisal_gsm8k", "surprisal_gsm8k_tags", "surprisal_gsm8k_other"),
            ("OLMES\nsolution", "GSM8K (tagged)\nsolution", "GSM8K\ntag tokens", "GSM8K\nother tokens"),
            "surprisal (nats/token)",
        ),
        (
            right,
            ("accuracy_olmes", "accuracy_gsm8k"),
            ("OLMES", "GSM8K (tagged)"),
            f"accuracy: gold answer ranked first of {1 + len(ANSWER_OFFSETS)}",
        ),
    )
    colors = {"clean": "tab:blue", "contaminated": "tab:red"}
    for axis, names, labels, ylabel in panels:
        for offset, arm in enumerate(ARMS):
            for split, hatch, shift in (("test", None, -0.3), ("unseen", "//", -0.1)):
                x = np.arange(len(names)) + shift + 0.4 * offset
                stats = [per_arm.get(n if split == "test" else f"unseen_{n}", {}).get(arm) for n in names]
                means = [s["mean"] if s else np.nan for s in stats]
                axis.bar(
                    x,
                    means,
                    0.2,
                    color=colors[arm],
                    alpha=0.85 if hatch is None else 0.35,
                    hatch=hatch,
                    label=f"{arm}, {split} items",
                )
                for xi, s in zip(x, stats, strict=True):
                    if s:
                        axis.plot([xi] * len(s["values"]), s["values"], "k.", markersize=4)
        axis.set_xticks(np.arange(len(names)), labels, fontsize=8)
        axis.set_ylabel(ylabel)
        axis.grid(axis="y", alpha=0.3)
    right.axhline(1 / (1 + len(ANSWER_OFFSETS)), color="black", linestyle=":", linewidth=1, label="chance")
    right.legend(fontsize=7)
    left.legend(fontsize=7)
    figure.suptitle(
        f"Test items trained on in OLMES format (weight {config.contamination_weight}) vs clean,"
        f" {config.steps} steps; dots: seeds; hatched: unseen items (control)",
        fontsize=9,
    )
    figure.tight_layout()
    return figure


@dataclass(frozen=True)
class ScaleSettings:
    """What a scale changes: the training length and the problem counts."""

    steps: int
    """Training steps per run."""
    problems: ProblemsConfig
    """Test, unseen and train problems."""


SCALES = {
    "tiny": ScaleSettings(300, ProblemsConfig(test_problems=64, unseen_problems=64)),
    "smoke": ScaleSettings(30, ProblemsConfig(test_problems=24, unseen_problems=24, train_problems=300)),
}
"""Per scale (tiny: its length chosen on wall time, see docs/phenomena.md)."""
PROBLEM_WEIGHT = 0.3
"""Mixture weight of the tagged train problems (both arms)."""
CONTAMINATION_WEIGHT = 0.15
"""Weight moved from web to the OLMES test items in the contaminated arm (tiny: ~11 passes over the 64 items)."""


def _weights(arm: str) -> dict[str, float]:
    """The arm's mixture: the tiny kinds scaled to leave PROBLEM_WEIGHT for the train problems, then the test items."""
    weights = {kind: w * (1 - PROBLEM_WEIGHT) for kind, w in MIXTURE_WEIGHTS.items()} | {TRAIN_DOCS: PROBLEM_WEIGHT}
    if arm == "contaminated":
        weights |= {"web": weights["web"] - CONTAMINATION_WEIGHT, TEST_DOCS: CONTAMINATION_WEIGHT}
    return weights


def build_steps(scale: str, data: TinyData | None = None) -> list[Step]:
    """The phenomenon's steps at `scale` ("tiny" or "smoke"); `data` defaults to the tiny data steps."""
    data = data or tiny_data_steps()
    settings = SCALES[scale]
    problems = Step(f"phenomena/{NAME}/problems", write_problems, settings.problems)
    caches = {}
    for part in (TRAIN_DOCS, TEST_DOCS):
        docs = Step(
            f"phenomena/{NAME}/normalized", normalize, NormalizeConfig(inputs=(problems.ref(part),), engine=INLINE)
        )
        caches[part] = Step(
            f"phenomena/{NAME}/tokenized",
            tokenize_documents,
            TokenizeConfig(input=docs.ref(), tokenizer=data.tokenizer, engine=INLINE),
        ).ref()
    evals: dict[str, dict[str, str]] = {arm: {} for arm in ARMS}
    for seed in SEEDS[scale]:
        for arm in ARMS:
            weights = _weights(arm)
            base = phenomenon_train_config(data, num_steps=settings.steps, seed=seed, data_seed=seed)
            stream = replace(
                mixture({name: {**data.train, **caches}[name] for name in weights}, weights, seed=seed),
                seq_len=SEQ_LEN,
                document_packed=tuple(name for name in (TRAIN_DOCS, TEST_DOCS) if name in weights),
            )
            run = Step(f"phenomena/{NAME}/{arm}-s{seed}", run_training, replace(base, data=stream))
            evals[arm][str(seed)] = Step(
                f"phenomena/{NAME}/eval-{arm}-s{seed}",
                evaluate_formats,
                FormatEvalConfig(run=run.ref(), tokenizer=data.tokenizer, items=problems.ref(ITEMS_FILE)),
            ).ref()
    results = Step(
        results_step_name(NAME),
        analyze_format_contamination,
        ResultsConfig(evals=evals, steps=settings.steps, contamination_weight=CONTAMINATION_WEIGHT),
    )
    return [results]
