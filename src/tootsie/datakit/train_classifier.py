"""Train a DCLM-style quality classifier: positive vs negative documents, a held-out split, accuracy and AUC.

The model (`classifier_model`) is logistic regression on the mean of a
document's hashed word unigram + bigram features, trained full-batch with
Optax Adam in one jitted `lax.scan` over `steps`, from zero weights, with
each class weighted to half of the loss (so a 10:1 imbalance does not move the
decision threshold). Every document's features are held in memory (16 bytes a
feature, about 2 features a word): a few hundred thousand documents, DCLM's
classifier training size, fit in a few GB.

Held-out split: a document is held out when `xxh3_64(id, seed) / 2**64 <
heldout_fraction`, so the split depends on the seed and the text alone, and a
text can never be on both sides. A text listed more than once in one class is
used once (`duplicate`); a text in both classes is dropped (`conflicting_label`).

Output directory: `classifier.safetensors` (`classifier_model.MODEL_FILE`,
whose header names the positive and negative inputs as the config gives them,
a step's output relative to the prefix), `timings.json` (`{"train_seconds"}`,
wall time, declared volatile) and `stats.json` (written last) with
`{"train_docs", "heldout_docs", "accuracy", "auc", "train_accuracy",
"positive_docs", "negative_docs", "final_loss", "buckets", "steps", "seed"}`
and the shared `total` / `kept` / `dropped`: the same step under another
prefix writes the same model and stats.

Example: 200 docstrings vs 200 license texts with `heldout_fraction=0.2` train
on about 320 documents and report accuracy and AUC on the other 80.
"""

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
from jaxtyping import Bool, Float, Int32

from tootsie.configfile import unhashed
from tootsie.datakit.classifier_model import MODEL_FILE, HashedLinearModel, save_classifier
from tootsie.datakit.hashed_features import FeatureConfig, Features, featurize
from tootsie.datakit.parquet_io import iter_batches
from tootsie.datakit.stats import StageStats, finish_stage
from tootsie.errors import TootsieError
from tootsie.executor.manifest import TIMINGS_FILE
from tootsie.executor.portable import portable_tree
from tootsie.executor.step import volatile_outputs
from tootsie.jsonfile import write_json_atomic


@dataclass(frozen=True)
class TrainClassifierConfig:
    """Which documents are positive and negative, how they are featurized, and how the model is fit."""

    positive: tuple[str, ...]
    """Document directories of the class to score high (e.g. reference-quality text)."""
    negative: tuple[str, ...]
    """Document directories of the class to score low (e.g. random web text)."""
    features: FeatureConfig = field(default_factory=FeatureConfig)
    """Tokenization and hashing, saved with the model."""
    heldout_fraction: float = 0.1
    """Expected share of documents held out for accuracy and AUC."""
    seed: int = 0
    """Chooses the held-out documents."""
    steps: int = 200
    """Full-batch Adam steps."""
    learning_rate: float = 0.1
    """Adam step size (the loss is convex and full-batch: no schedule needed)."""
    l2: float = 1e-5
    """L2 penalty on the weights, per unit of the mean loss."""
    batch_rows: int = unhashed(1024)
    """Documents featurized at a time."""

    def __post_init__(self) -> None:
        if not self.positive or not self.negative:
            raise ValueError(
                f"need document directories for both classes, got {self.positive=}, {self.negative=};"
                " pass --positive DIR... and --negative DIR..."
            )
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}")
        if self.steps < 1 or self.learning_rate <= 0 or self.l2 < 0 or self.batch_rows < 1:
            raise ValueError(
                "need steps >= 1, learning_rate > 0, l2 >= 0, batch_rows >= 1;"
                f" got {self.steps=}, {self.learning_rate=}, {self.l2=}, {self.batch_rows=}"
            )


@dataclass
class _Corpus:
    """Featurized documents of both classes, concatenated."""

    buckets: list[np.ndarray] = field(default_factory=list)
    docs: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)

    def add(self, texts: list[str | None], ids: list[str], label: int, config: FeatureConfig) -> None:
        features = featurize(texts, config)
        self.buckets.append(features.buckets)
        self.docs.append(features.docs + len(self.ids))
        self.counts.append(features.counts)
        self.ids.extend(ids)
        self.labels.extend([label] * len(ids))


def _read(config: TrainClassifierConfig) -> _Corpus:
    corpus = _Corpus()
    for label, directories in ((1, config.positive), (0, config.negative)):
        for directory in directories:
            for batch in iter_batches(directory, ["id", "text"], config.batch_rows):
                corpus.add(batch.column("text").to_pylist(), batch.column("id").to_pylist(), label, config.features)
    return corpus


def usable(ids: list[str], labels: list[int], stats: StageStats) -> Bool[np.ndarray, " docs"]:
    """First occurrence of each id within its class, and no id found in both classes; counts the rest."""
    classes: dict[str, set[int]] = {}
    for doc_id, label in zip(ids, labels, strict=True):
        classes.setdefault(doc_id, set()).add(label)
    seen: set[tuple[str, int]] = set()
    keep = np.zeros(len(ids), dtype=bool)
    for row, (doc_id, label) in enumerate(zip(ids, labels, strict=True)):
        if len(classes[doc_id]) > 1:
            stats.drop("conflicting_label")
        elif (doc_id, label) in seen:
            stats.drop("duplicate")
        else:
            seen.add((doc_id, label))
            keep[row] = True
            stats.keep()
    return keep


def heldout_mask(ids: list[str], fraction: float, seed: int) -> Bool[np.ndarray, " docs"]:
    """True for the documents held out: `xxh3_64(id, seed)` in the lowest `fraction` of the 64-bit range."""
    cut = int(fraction * 2**64)
    return np.array([xxhash.xxh3_64_intdigest(doc_id.encode("utf-8"), seed=seed) < cut for doc_id in ids], bool)


def roc_auc(scores: Float[np.ndarray, " n"], labels: Int32[np.ndarray, " n"]) -> float:
    """Area under the ROC curve: the chance a random positive outscores a random negative (ties count half)."""
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]  # average 1-based rank of each tie group
    return float((ranks[labels == 1].sum() - positives * (positives + 1) / 2.0) / (positives * negatives))


@volatile_outputs(TIMINGS_FILE)
def train_classifier(config: TrainClassifierConfig, output_path: str) -> dict[str, Any]:
    """Train on the non-held-out documents, score the held-out ones, write the model, `timings.json` and `stats.json`.

    Returns `stats.json`'s content with the timings added."""
    out = Path(output_path)
    corpus = _read(config)
    stats = StageStats()
    keep = usable(corpus.ids, corpus.labels, stats)
    labels = np.array(corpus.labels, np.int32)
    heldout = heldout_mask(corpus.ids, config.heldout_fraction, config.seed) & keep
    train = keep & ~heldout
    for name, mask in (("train", train), ("held-out", heldout)):
        if labels[mask].min(initial=1) == 1 or labels[mask].max(initial=0) == 0:
            raise TootsieError(
                f"the {name} split lacks a class ({int(labels[mask].sum())} positive, {int((1 - labels[mask]).sum())}"
                f" negative of {int(mask.sum())}); give more documents of each class or change heldout_fraction"
            )
    buckets = np.concatenate(corpus.buckets)
    docs = np.concatenate(corpus.docs)
    counts = np.concatenate(corpus.counts)
    # Renumber the training documents 0..n-1 and keep only their features.
    new_index = np.cumsum(train) - 1
    in_train = train[docs]
    train_labels = labels[train]
    positives = int(train_labels.sum())
    weights = np.where(train_labels == 1, 0.5 / positives, 0.5 / (len(train_labels) - positives)).astype(np.float32)
    from tootsie.datakit.classifier_fit import fit  # JAX only when training: datakit commands never import it

    started = time.perf_counter()
    w, b, losses = fit(
        buckets[in_train],
        new_index[docs[in_train]],
        1.0 / np.maximum(counts[train], 1),
        train_labels,
        weights,
        learning_rate=config.learning_rate,
        l2=config.l2,
        steps=config.steps,
        num_buckets=config.features.buckets,
    )
    model = HashedLinearModel(config.features, np.asarray(w, np.float32), float(b))
    train_seconds = time.perf_counter() - started
    all_scores = 1.0 / (1.0 + np.exp(-model.logits_of(Features(buckets, docs, counts))))
    inputs = {name: repr(tuple(portable_tree(list(getattr(config, name))))) for name in ("positive", "negative")}
    save_classifier(model, out / MODEL_FILE, inputs)
    timings = {"train_seconds": round(train_seconds, 3)}
    write_json_atomic(out / TIMINGS_FILE, timings)
    details = {
        "train_docs": int(train.sum()),
        "heldout_docs": int(heldout.sum()),
        "accuracy": _accuracy(all_scores[heldout], labels[heldout]),
        "auc": roc_auc(all_scores[heldout], labels[heldout]),
        "train_accuracy": _accuracy(all_scores[train], labels[train]),
        "positive_docs": int(labels[keep].sum()),
        "negative_docs": int((1 - labels[keep]).sum()),
        "final_loss": float(losses[-1]),
        "buckets": config.features.buckets,
        "steps": config.steps,
        "seed": config.seed,
    }
    return {**finish_stage(out, stats, details), **timings}


def _accuracy(scores: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean((scores >= 0.5) == (labels == 1)))
