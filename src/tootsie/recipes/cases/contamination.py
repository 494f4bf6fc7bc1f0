"""Case study: cached contamination (the 32B Bison cooldown's GSM8K test items from a cached math bundle).

What happened (32B retrospective, Bison, "Root cause — Contamination"): the
Dolmino math bundle shipped GSM8K test items in a `test.json`; preprocessing
was later changed to drop it, but the processed dataset had already been
cached, and the executor, which hashes only fields wrapped in `versioned()`,
kept serving the stale cache. At toy scale:

- `write_math_bundle` writes a bundle: `bundle/train.jsonl` (word problems
  of `tootsie.corpora.arithmetic` with answers) and `bundle/test.jsonl` (the
  planted eval split, same templates, other draws), plus the eval set itself,
  `eval/gsm8k_test.jsonl` (`id`, `question`, `answer`: the items of
  test.jsonl in the eval's format).
- `bundle_documents` turns a bundle into documents, leaving out
  `drop_files`; the fix is `drop_files=("test.jsonl",)`. Every field of its
  config is hashed, so the fix gives the step, and everything downstream (the
  token cache), a new output path: the stale cache cannot be read by mistake.
  `MarinStyleBundleDocsConfig` is the same config with `drop_files` unhashed,
  as under Marin's opt-in versioning: the fix then keeps the old path, and the
  executor skips the step and serves the contaminated output.
- `tootsie.datakit.decontaminate` (13-gram overlap) runs on both versions'
  documents against the eval set; `analyze_contamination` compares them and
  writes `figure.png` and `results.json` (caches named relative to the
  prefix, `executor.portable`).

Example: with 100 planted test items, the unfixed documents hold 100 flagged
documents matching 100 eval items; the fixed ones none; the two caches' paths
differ, while the Marin-style version hashes of the two configs are equal.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from jaxtyping import Float64
from matplotlib.figure import Figure

from tootsie.configfile import unhashed
from tootsie.corpora.arithmetic import word_problem
from tootsie.datakit.decontaminate import ATTRIBUTE_SCHEMA
from tootsie.datakit.parquet_io import parquet_files
from tootsie.datakit.stats import STATS_FILE
from tootsie.errors import TootsieError
from tootsie.executor.portable import portable
from tootsie.jsonfile import read_json, write_json_atomic
from tootsie.recipes.cases.common import write_results
from tootsie.recipes.tiny.data import write_jsonl_gz

BUNDLE_DIR, EVAL_FILE = "bundle", "eval/gsm8k_test.jsonl"
TEST_FILE = "test.jsonl"
"""The bundle file holding the eval split (Dolmino's `test.json`)."""


@dataclass(frozen=True)
class MathBundleConfig:
    """How many problems the bundle's train and test files hold."""

    train_problems: int = 2000
    """Problems in bundle/train.jsonl."""
    test_problems: int = 200
    """Problems in bundle/test.jsonl, which are also the eval set."""
    seed: int = 0
    """Seed of the problems (the test split uses the next seed)."""

    def __post_init__(self) -> None:
        if self.train_problems <= 0 or self.test_problems <= 0:
            raise ValueError(
                f"train_problems and test_problems must be positive, got {self.train_problems=}, {self.test_problems=}"
            )


def _bundle_text(question: str, answer: int) -> str:
    return f"Question: {question}\nAnswer: The answer is {answer}."


def _write_jsonl(path: Path, records: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    tmp.replace(path)


def write_math_bundle(config: MathBundleConfig, output_path: str) -> dict[str, int]:
    """Write `bundle/train.jsonl`, `bundle/test.jsonl` and the eval set `eval/gsm8k_test.jsonl`.

    Train never repeats a test question.
    """
    out = Path(output_path)
    test_rng, train_rng = np.random.default_rng(config.seed + 1), np.random.default_rng(config.seed)
    test = [(p.question, p.answer) for p in (word_problem(test_rng) for _ in range(config.test_problems))]
    questions = {question for question, _ in test}
    train = [
        (p.question, p.answer)
        for p in (word_problem(train_rng) for _ in range(config.train_problems))
        if p.question not in questions
    ]
    _write_jsonl(
        out / BUNDLE_DIR / "train.jsonl",
        [{"id": f"train:{i}", "text": _bundle_text(q, a)} for i, (q, a) in enumerate(train)],
    )
    _write_jsonl(
        out / BUNDLE_DIR / TEST_FILE, [{"id": f"test:{i}", "text": _bundle_text(q, a)} for i, (q, a) in enumerate(test)]
    )
    _write_jsonl(
        out / EVAL_FILE, [{"id": f"gsm:{i}", "question": q, "answer": f"#### {a}"} for i, (q, a) in enumerate(test)]
    )
    counts = {"train": len(train), "test": len(test)}
    write_json_atomic(out / STATS_FILE, counts)
    return counts


@dataclass(frozen=True)
class BundleDocsConfig:
    """A math bundle turned into documents; every field is hashed (tootsie's default)."""

    bundle: str
    """A `write_math_bundle` output directory."""
    drop_files: tuple[str, ...] = ()
    """Bundle files left out; the fix for the planted eval split is ("test.jsonl",)."""


@dataclass(frozen=True)
class MarinStyleBundleDocsConfig:
    """The same config as Marin versions it: `drop_files` not wrapped in `versioned()`, so not hashed."""

    bundle: str
    """A `write_math_bundle` output directory."""
    drop_files: tuple[str, ...] = unhashed(())
    """Bundle files left out, unhashed: changing it keeps the output path (and the stale output)."""


def bundle_documents(config: BundleDocsConfig | MarinStyleBundleDocsConfig, output_path: str) -> dict[str, object]:
    """Write the bundle's records, but those of `drop_files`, as `docs-00000.jsonl.gz`.

    Return the files read and the count.
    """
    files = sorted(Path(config.bundle, BUNDLE_DIR).glob("*.jsonl"))
    if not files:
        raise TootsieError(f"{config.bundle}/{BUNDLE_DIR} holds no .jsonl files; pass a write_math_bundle output")
    used = [path for path in files if path.name not in config.drop_files]
    records = [
        json.loads(line) for path in used for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    count = write_jsonl_gz(Path(output_path) / "docs-00000.jsonl.gz", records)
    stats = {"files": [path.name for path in used], "dropped": sorted(set(config.drop_files)), "docs": count}
    write_json_atomic(Path(output_path) / STATS_FILE, stats)
    return stats


def max_overlaps(decontamination: str) -> Float64[np.ndarray, " docs"]:
    """Every document's `max_overlap` from a decontaminate output's attribute files."""
    shards = [path for path in parquet_files(decontamination) if pq.read_schema(path).names == ATTRIBUTE_SCHEMA.names]
    return (
        np.concatenate(
            [pq.read_table(path, columns=["max_overlap"]).column("max_overlap").to_numpy() for path in shards]
        )
        if shards
        else np.zeros(0)
    )


@dataclass(frozen=True)
class ContaminationAnalysisConfig:
    """Both versions' caches and decontamination reports, and the version hashes of their document steps."""

    caches: dict[str, str]
    """Version ("unfixed", "fixed") → its token cache."""
    decontamination: dict[str, str]
    """Version → its decontaminate output (report.json and attributes)."""
    versions: dict[str, dict[str, str]]
    """Versioning rule ("tootsie", "marin_style") → version → the document step's hash under that rule."""


def analyze_contamination(config: ContaminationAnalysisConfig, output_path: str) -> dict[str, object]:
    """Flagged documents and matched eval items per version, cache paths and hashes; `figure.png` and `results.json`."""
    reports = {version: read_json(Path(path) / "report.json") or {} for version, path in config.decontamination.items()}
    overlaps = {version: max_overlaps(path) for version, path in config.decontamination.items()}
    results = {
        "versions": {
            version: {
                "cache": portable(config.caches[version]),
                "docs": reports[version].get("docs"),
                "contaminated_docs": reports[version].get("contaminated"),
                "eval_items": reports[version].get("eval_items"),
                "eval_items_matched": reports[version].get("eval_items_matched"),
                "threshold": reports[version].get("threshold"),
            }
            for version in config.decontamination
        },
        "cache_paths_differ": len(set(config.caches.values())) == len(config.caches),
        "hashes": config.versions,
        "marin_style_fix_keeps_the_path": len(set(config.versions.get("marin_style", {}).values())) == 1,
    }
    figure = Figure(figsize=(11, 4.2))
    left, right = figure.subplots(1, 2)
    names = list(config.decontamination)
    width = 0.38
    for offset, (key, label) in enumerate(
        (("contaminated_docs", "documents flagged"), ("eval_items_matched", "eval items matched"))
    ):
        values = [results["versions"][name][key] or 0 for name in names]
        bars = left.bar(np.arange(len(names)) + (offset - 0.5) * width, values, width, label=label)
        left.bar_label(bars, fontsize=8)
    left.set_xticks(
        np.arange(len(names)), [f"{name}\n…/{Path(config.caches[name]).name}" for name in names], fontsize=8
    )
    left.set_title("13-gram decontamination against the eval set")
    left.legend(fontsize=8)
    bins = np.linspace(0, 1, 21)
    for name in names:
        right.hist(overlaps[name], bins=bins, alpha=0.6, label=name, log=True)
    threshold = next((r["threshold"] for r in results["versions"].values() if r["threshold"] is not None), None)
    if threshold is not None:
        right.axvline(threshold, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold}")
    hashes = "; ".join(
        f"{rule}: " + ", ".join(f"{version} {value}" for version, value in versions.items())
        for rule, versions in config.versions.items()
    )
    figure.suptitle(f"math-docs step version hashes — {hashes}", fontsize=9)
    right.set_xlabel("document's max 13-gram overlap with an eval item")
    right.set_ylabel("documents")
    right.legend(fontsize=8)
    figure.tight_layout()
    return write_results(output_path, results, figure)
