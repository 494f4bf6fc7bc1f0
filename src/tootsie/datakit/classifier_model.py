"""The quality classifier's model: a linear model over the mean of hashed n-gram features, in a safetensors file.

`score = sigmoid(bias + mean over the document's features of weights[bucket])`.
This is fastText's supervised model with the embedding left out: fastText
averages d-dimensional bucket embeddings, then applies a linear layer, which
for two labels is a rank-d factorization of this same function of the
averaged bag. Without the factorization the loss is convex, so training has
one optimum whatever the seed, and the model is one float per bucket (4 MiB
at 2**20 buckets).

File format (`MODEL_FILE`, safetensors, which holds only tensors and a JSON
header of strings, so loading runs no code): tensors `weights` (float32,
[buckets]) and `bias` (float32, [1]); the header holds `format`, `version`,
`feature_version` and the `FeatureConfig` fields as JSON strings. A file of
another format or version is refused with a message naming it.

Example: a model whose weights are all 0 and bias 0 scores every document 0.5.
"""

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from jaxtyping import Float32
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from tootsie.datakit.hashed_features import FEATURE_VERSION, FeatureConfig, Features, featurize
from tootsie.errors import TootsieError

MODEL_FILE = "classifier.safetensors"
"""The model file inside a train-classifier output directory."""
FORMAT = "tootsie-hashed-linear"
VERSION = "1"
HEADER_KEY = "tootsie"
"""The one safetensors metadata key; its value is the header as JSON with sorted keys."""


@dataclass(frozen=True)
class HashedLinearModel:
    """Weights per hash bucket, a bias, and the feature settings they were trained with."""

    features: FeatureConfig
    """Tokenization and hashing; scoring must use the training settings."""
    weights: Float32[np.ndarray, " buckets"]
    """One weight per hash bucket."""
    bias: float
    """Logit of a document with no features."""

    def __post_init__(self) -> None:
        if self.weights.shape != (self.features.buckets,):
            raise ValueError(
                f"weights have shape {self.weights.shape}, expected ({self.features.buckets},) for"
                f" bucket_bits={self.features.bucket_bits}"
            )

    def logits_of(self, features: Features) -> Float32[np.ndarray, " batch"]:
        """The logit of every document of a featurized batch."""
        sums = np.bincount(features.docs, weights=self.weights[features.buckets], minlength=len(features.counts))
        return (self.bias + sums / np.maximum(features.counts, 1)).astype(np.float32)

    def scores(self, texts: list[str | None]) -> Float32[np.ndarray, " batch"]:
        """The probability of the positive class for each text."""
        logits = self.logits_of(featurize(texts, self.features))
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)


def save_classifier(model: HashedLinearModel, path: Path, extra: dict[str, str] | None = None) -> None:
    """Write the model to `path` atomically (temporary name, then rename); `extra` goes into the header."""
    header = {
        "format": FORMAT,
        "version": VERSION,
        "feature_version": str(FEATURE_VERSION),
        "features": json.dumps(asdict(model.features)),
        **(extra or {}),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tensors = {"weights": model.weights.astype(np.float32), "bias": np.array([model.bias], np.float32)}
    # One metadata key: safetensors writes a map of several keys in a different order on every save, so the same
    # model would get a different sha256 (one hash, one content); a single sorted JSON string is always the same bytes.
    save_file(tensors, str(tmp), metadata={HEADER_KEY: json.dumps(header, sort_keys=True)})
    os.replace(tmp, path)


def _header(stored: dict[str, str], file: Path) -> dict[str, str]:
    """The model's header from the safetensors metadata: one JSON string, or (older files) the keys themselves."""
    if HEADER_KEY not in stored:
        return stored
    try:
        header = json.loads(stored[HEADER_KEY])
    except json.JSONDecodeError as error:
        raise TootsieError(f"{file} has a bad header ({error}); retrain the classifier") from None
    if not isinstance(header, dict):
        raise TootsieError(f"{file} has a header that is not a JSON object; retrain the classifier")
    return {str(key): str(value) for key, value in header.items()}


def model_path(path: str | Path) -> Path:
    """The model file of `path`: the file itself, or `MODEL_FILE` inside a train-classifier output directory."""
    given = Path(path)
    return given / MODEL_FILE if given.is_dir() else given


def load_classifier(path: str | Path) -> HashedLinearModel:
    """Read a model written by `save_classifier` (a file, or the directory holding it), checking its header."""
    file = model_path(path)
    if not file.is_file():
        raise TootsieError(f"classifier model not found: {file}; train one with `tootsie datakit train-classifier`")
    try:
        with safe_open(str(file), framework="numpy") as handle:
            stored = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 - not a dict
    except (SafetensorError, OSError, ValueError) as error:
        raise TootsieError(f"{file} is not a safetensors file ({error}); pass a train-classifier output") from None
    header = _header(stored, file)
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise TootsieError(
            f"{file} has format {header.get('format')!r} version {header.get('version')!r}; this tootsie reads"
            f" {FORMAT!r} version {VERSION!r}: retrain it with `tootsie datakit train-classifier`"
        )
    if header.get("feature_version") != str(FEATURE_VERSION):
        raise TootsieError(
            f"{file} was trained with feature_version {header.get('feature_version')!r}, this tootsie hashes"
            f" features as version {FEATURE_VERSION}: retrain the classifier"
        )
    missing = {"weights", "bias"} - set(tensors)
    if missing:
        raise TootsieError(f"{file} lacks tensors {sorted(missing)}; it has {sorted(tensors)}")
    try:
        features = FeatureConfig(**json.loads(header["features"]))
        return HashedLinearModel(features, tensors["weights"].astype(np.float32), float(tensors["bias"][0]))
    except (KeyError, TypeError, ValueError) as error:
        raise TootsieError(f"{file} has a bad header or tensor shape: {error}; retrain the classifier") from None
