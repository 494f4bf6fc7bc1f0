"""Paloma's released layout and Paloma's own definitions of per-subdomain and per-source perplexity and BPB.

Layout read: a local copy of the `allenai/paloma` dataset (`git clone
https://huggingface.co/datasets/allenai/paloma`, files fetched with git-lfs):

    paloma/
      c4_en/val/*.jsonl.gz            one folder per source, one per split (`val`, `test`)
      c4_100_domains/val/*.jsonl.gz   records {"text", "id", "added", "source", "subdomain", "metadata"}
      ...

A source is scored as OLMo-Eval reads it (`llm_eval/catwalk_tasks/
perplexity_jsonl.py`: every `*.jsonl.gz` file under `<source>/<split>`, one
JSON record per line, the document is `text`), and grouped into subdomains by
the record's `subdomain` field (`llm_eval/steps/run_catwalk.py`,
`ProcessOutputs`); a source whose records have no `subdomain` (c4_en,
4chan_meta_sep, ...) is one subdomain named after the source. Field names are
those of the dataset card's `dataset_info` (huggingface.co/datasets/allenai/paloma).

Definitions, each as Paloma's code computes it:

- Sequences (catwalk `LanguageModel.predict_chunk_perplexity` with lm-eval's
  `get_rolling_token_windows(context_len=1)` and `make_disjoint_window`): each
  document is tokenized alone, without special tokens, and never concatenated
  with another. Its tokens are cut into non-overlapping runs of `seq_len`
  predicted tokens, each scored in its own window of at most `seq_len` input
  tokens: the first token is predicted from one prefix token (catwalk uses the
  tokenizer's EOS as that dummy token; here BOS by default, the token tootsie's
  training puts before every document, or EOS with `prefix_token="eos"`); a
  full later window is conditioned on the one token before it; the last,
  shorter window on as many earlier tokens as fill `seq_len`. Every token of
  the document is predicted once.
- Per subdomain (run_catwalk `ProcessOutputs`): sums over its documents;
  `bpb = -sum(logprob) / (bytes * ln 2)` with `bytes = len(text.encode("utf-8"))`
  per document, and token perplexity `ppl_token = exp(-sum(logprob) / tokens)`.
- Per source: the macro average, the unweighted mean of the per-subdomain
  figures (the paper's Figure 1, "perplexity macro averaged over any domains
  within each of the ... sources", arXiv:2312.10523); beside it the micro
  figure pooled over every document of the source, which is what lm-eval's
  `paloma_*` tasks report (`_paloma_template`: `loglikelihood_rolling` with the
  `bits_per_byte` and `weighted_perplexity` aggregations).

Example: a source with subdomains a (bpb 1.0 over 100 bytes) and b (bpb 3.0
over 300 bytes) has `macro_bpb = 2.0` and `micro_bpb = 2.5`.
"""

import gzip
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from tootsie.datakit.special_tokens import load_with_special_tokens
from tootsie.errors import TootsieError
from tootsie.models.llama import LlamaModel

SPLITS = ("val", "test")
"""Split folders of the release."""
FILE_SUFFIX = ".jsonl.gz"
"""The release's files: gzip-compressed JSON lines."""
PREFIX_TOKENS = ("bos", "eos")
"""Which special token conditions a document's first token."""


@dataclass(frozen=True)
class PalomaDocument:
    """One record of a Paloma file: its subdomain and its text."""

    subdomain: str
    text: str


def _split_files(source_dir: Path, split: str) -> tuple[Path, ...]:
    folder = source_dir / split
    return tuple(sorted(p for p in folder.rglob(f"*{FILE_SUFFIX}") if p.is_file())) if folder.is_dir() else ()


def is_paloma_mirror(root: str | Path) -> bool:
    """Whether `root` looks like Paloma's release: some folder `<source>/val` or `<source>/test` holds `*.jsonl.gz`."""
    path = Path(root)
    return path.is_dir() and any(
        entry.is_dir() and any(_split_files(entry, split) for split in SPLITS) for entry in path.iterdir()
    )


def discover_sources(
    root: str | Path, split: str = "val", sources: Iterable[str] | None = None
) -> dict[str, tuple[Path, ...]]:
    """Source name → its `*.jsonl.gz` files under `<root>/<source>/<split>`, every source named checked to exist."""
    path = Path(root)
    if split not in SPLITS:
        raise TootsieError(f"Paloma split {split!r} is not one of {SPLITS}; pass --split val or --split test")
    if not path.is_dir():
        raise TootsieError(f"Paloma mirror {path} not found; pass a local clone of the allenai/paloma dataset")
    wanted = (
        sorted(sources)
        if sources is not None
        else sorted(e.name for e in path.iterdir() if e.is_dir() and not e.name.startswith("."))
    )
    found: dict[str, tuple[Path, ...]] = {}
    for name in wanted:
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            raise TootsieError(f"Paloma source name {name!r} is not a folder name; name a source such as c4_en")
        files = _split_files(path / name, split)
        if not files:
            raise TootsieError(
                f"Paloma source {name!r}: no {split}/*{FILE_SUFFIX} files under {path / name}; expected the release's "
                f"layout <mirror>/<source>/{split}/*{FILE_SUFFIX} (git-lfs files fetched, not pointers)"
            )
        found[name] = files
    if not found:
        raise TootsieError(f"Paloma mirror {path} holds no source folders; expected <mirror>/<source>/{split}/")
    return found


def read_documents(source: str, files: Iterable[Path], max_documents: int | None = None) -> list[PalomaDocument]:
    """Every record of a source's files in order, `max_documents` per subdomain at most (the first ones)."""
    documents: list[PalomaDocument] = []
    per_subdomain: dict[str, int] = {}
    for path in files:
        try:
            with gzip.open(path, "rt", encoding="utf-8") as lines:
                for number, line in enumerate(lines, start=1):
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise TootsieError(f"{path}:{number}: a Paloma record is a JSON object, got {record!r:.80}")
                    text, subdomain = record.get("text"), record.get("subdomain", source)
                    if not isinstance(text, str) or not isinstance(subdomain, str):
                        raise TootsieError(
                            f"{path}:{number}: a Paloma record needs a string `text` (and a string `subdomain` when "
                            f"present), got text={type(text).__name__}, subdomain={type(subdomain).__name__}"
                        )
                    if max_documents is not None and per_subdomain.get(subdomain, 0) >= max_documents:
                        continue
                    per_subdomain[subdomain] = per_subdomain.get(subdomain, 0) + 1
                    documents.append(PalomaDocument(subdomain, text))
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise TootsieError(
                f"cannot read Paloma file {path}: {error}; expected gzip-compressed JSON lines "
                '{"text": ..., "subdomain": ...} (an LFS pointer means `git lfs pull` was not run)'
            ) from None
    return documents


def rolling_windows(tokens: list[int], prefix_id: int, seq_len: int) -> list[tuple[list[int], list[int], int]]:
    """(inputs, targets, first scored position) of one document's windows: lm-eval's rolling windows, context_len=1.

    `inputs[i]` predicts `targets[i]`; positions from the third value on are
    scored. The scored targets are the document's tokens in non-overlapping
    runs of `seq_len` (the last run shorter); every window's input is the (at
    most `seq_len`) tokens before its last target, `prefix_id` standing before
    the first token. So a full window is conditioned on the one token before it,
    and the last, partial one on as many earlier tokens as fill `seq_len`.
    """
    padded = [prefix_id, *tokens]
    windows = []
    for start in range(0, len(tokens), seq_len):
        end = min(start + seq_len, len(tokens))
        first = max(0, end - seq_len)
        windows.append((padded[first:end], padded[first + 1 : end + 1], start - first))
    return windows


@dataclass(frozen=True)
class PreparedSource:
    """A source tokenized once into Paloma's windows, packed into rows, with its per-subdomain counts.

    Several short windows may share a row: each is its own attention segment
    (`segments`), so no window sees another (rotary positions are relative, so
    where a window sits in the row does not change its scores).
    """

    name: str
    subdomains: tuple[str, ...]
    """Subdomain names, sorted; `position_subdomain` and the count arrays index into them."""
    inputs: np.ndarray
    """[rows, seq_len] input ids (padded with 0)."""
    targets: np.ndarray
    """[rows, seq_len] the id each input position predicts (padded with 0)."""
    segments: np.ndarray
    """[rows, seq_len] the window each position belongs to (its index in the source; -1 for padding)."""
    mask: np.ndarray
    """[rows, seq_len] 1.0 where a target is scored."""
    position_subdomain: np.ndarray
    """[rows, seq_len] the subdomain of each scored target's document; -1 elsewhere."""
    position_document: np.ndarray
    """[rows, seq_len] the index of each scored target's document; -1 elsewhere."""
    bytes: np.ndarray
    """[subdomains] UTF-8 bytes of the documents' text."""
    tokens: np.ndarray
    """[subdomains] predicted tokens."""
    documents: np.ndarray
    """[subdomains] documents."""


def prepare_source(
    name: str, documents: list[PalomaDocument], tokenizer_file: str | Path, seq_len: int, prefix_token: str = "bos"
) -> PreparedSource:
    """Tokenize a source's documents one by one (no special tokens), cut each into its own windows, pack the windows."""
    if prefix_token not in PREFIX_TOKENS:
        raise TootsieError(f"prefix_token {prefix_token!r} is not one of {PREFIX_TOKENS}")
    if seq_len <= 0:
        raise TootsieError(f"seq_len must be positive, got {seq_len}")
    if not documents:
        raise TootsieError(f"Paloma source {name!r} has no documents")
    tokenizer, special = load_with_special_tokens(tokenizer_file)
    prefix_id = special.require(prefix_token)
    subdomains = tuple(sorted({d.subdomain for d in documents}))
    index = {s: i for i, s in enumerate(subdomains)}
    counts = np.zeros((3, len(subdomains)), dtype=np.int64)
    encodings = tokenizer.encode_batch([d.text for d in documents], add_special_tokens=False)
    windows: list[tuple[list[int], list[int], int, int, int]] = []
    for number, (document, encoding) in enumerate(zip(documents, encodings, strict=True)):
        sub = index[document.subdomain]
        counts[:, sub] += (len(document.text.encode("utf-8")), len(encoding.ids), 1)
        windows += [(*window, sub, number) for window in rolling_windows(list(encoding.ids), prefix_id, seq_len)]
    places, row, fill = [], -1, seq_len  # next fit: a window starts a new row when it does not fit the current one
    for window_inputs, *_ in windows:
        if fill + len(window_inputs) > seq_len:
            row, fill = row + 1, 0
        places.append((row, fill))
        fill += len(window_inputs)
    inputs, targets = np.zeros((2, row + 1, seq_len), dtype=np.int32)
    segments, position_subdomain, position_document = np.full((3, row + 1, seq_len), -1, dtype=np.int32)
    mask = np.zeros((row + 1, seq_len), dtype=np.float32)
    for number, ((window_inputs, window_targets, first, sub, doc), (r, at)) in enumerate(zip(windows, places)):
        span, scored = slice(at, at + len(window_inputs)), slice(at + first, at + len(window_targets))
        inputs[r, span], targets[r, span], segments[r, span] = window_inputs, window_targets, number
        mask[r, scored], position_subdomain[r, scored], position_document[r, scored] = 1.0, sub, doc
    return PreparedSource(
        name=name,
        subdomains=subdomains,
        inputs=inputs,
        targets=targets,
        segments=segments,
        mask=mask,
        position_subdomain=position_subdomain,
        position_document=position_document,
        bytes=counts[0],
        tokens=counts[1],
        documents=counts[2],
    )


@eqx.filter_jit
def position_nll(
    model: LlamaModel,
    inputs: Int[Array, "b t"],
    targets: Int[Array, "b t"],
    segments: Int[Array, "b t"],
    mask: Float[Array, "b t"],
) -> Float[Array, "b t"]:
    """Negative log-likelihood (nats) of each masked target, attention blocked between segments (windows)."""
    logits = model(inputs, segments).astype(jnp.float32)
    target_logits = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return (jax.nn.logsumexp(logits, axis=-1) - target_logits) * mask


def score_rows(model: LlamaModel, prepared: PreparedSource, batch_size: int = 16) -> np.ndarray:
    """[rows, seq_len] NLL in nats of every scored target, 0 elsewhere (batches padded to `batch_size` rows)."""
    count = prepared.inputs.shape[0]
    nats = np.zeros(prepared.inputs.shape, dtype=np.float64)
    arrays = (prepared.inputs, prepared.targets, prepared.segments, prepared.mask)
    for start in range(0, count, batch_size):
        stop = min(start + batch_size, count)
        batch = [np.pad(a[start:stop], ((0, batch_size - (stop - start)), (0, 0))) for a in arrays]
        nats[start:stop] = np.asarray(position_nll(model, *(jnp.asarray(a) for a in batch)))[: stop - start]
    return nats


def figures(nats: float, tokens: int, num_bytes: int) -> dict[str, float]:
    """Paloma's per-subdomain figures from summed NLL: bits per byte and per-token perplexity."""
    return {
        "bpb": nats / math.log(2) / max(num_bytes, 1),
        "ppl_token": math.exp(nats / max(tokens, 1)),
    }


def summarize_source(prepared: PreparedSource, position_nats: np.ndarray) -> dict[str, object]:
    """Per-subdomain figures and counts, their macro average (Paloma's per-source figure) and the pooled micro one."""
    scored = prepared.mask > 0
    nats = np.bincount(
        prepared.position_subdomain[scored], weights=position_nats[scored], minlength=len(prepared.subdomains)
    )
    subdomains = {
        name: {
            **figures(float(nats[i]), int(prepared.tokens[i]), int(prepared.bytes[i])),
            "nats": float(nats[i]),
            "tokens": int(prepared.tokens[i]),
            "bytes": int(prepared.bytes[i]),
            "documents": int(prepared.documents[i]),
        }
        for i, name in enumerate(prepared.subdomains)
    }
    micro = figures(float(nats.sum()), int(prepared.tokens.sum()), int(prepared.bytes.sum()))
    return {
        "macro_bpb": float(np.mean([s["bpb"] for s in subdomains.values()])),
        "macro_ppl_token": float(np.mean([s["ppl_token"] for s in subdomains.values()])),
        "micro_bpb": micro["bpb"],
        "micro_ppl_token": micro["ppl_token"],
        "subdomains": subdomains,
    }


def evaluate_source(model: LlamaModel, prepared: PreparedSource, batch_size: int = 16) -> dict[str, object]:
    """Score one prepared source with `model`: `summarize_source` of its targets' NLL."""
    return summarize_source(prepared, score_rows(model, prepared, batch_size))


def prepare_mirror(
    root: str | Path,
    tokenizer_file: str | Path,
    seq_len: int,
    split: str = "val",
    sources: Iterable[str] | None = None,
    max_documents: int | None = None,
    prefix_token: str = "bos",
) -> dict[str, PreparedSource]:
    """Every named source of a Paloma mirror (all when None), read, validated and cut into windows."""
    return {
        name: prepare_source(name, read_documents(name, files, max_documents), tokenizer_file, seq_len, prefix_token)
        for name, files in discover_sources(root, split, sources).items()
    }
