"""What is in a token cache or a mixture: counts, a decoded sample, realized vs target weights.

`inspect_cache` summarizes a cache from its ledger and offsets (document
lengths, token id range) and can decode its first document. `inspect_mixture`
decodes the start of a batch and compares, over a step range, the share of
sequences each component actually got with the target weights averaged over
the same steps: the first thing to check when a mixture looks wrong
("does your dataloader produce real tokens?" in the curve-reading guide).
"""

import time

import numpy as np
from tokenizers import Tokenizer

from tootsie.data.mixture import MixtureConfig, MixtureDataset
from tootsie.datakit.token_cache import TokenCache

SAMPLE_CHARS = 300


def inspect_cache(cache: TokenCache, tokenizer: Tokenizer | None = None) -> dict[str, object]:
    """Counts, document-length percentiles and token-id range of a cache.

    Its first document is decoded if a tokenizer is given.
    """
    lengths = np.diff(cache.offsets)
    sample = np.asarray(cache.tokens[: min(cache.num_tokens, 1 << 20)])
    summary: dict[str, object] = {
        "kind": "cache",
        "path": str(cache.directory),
        "docs": cache.num_docs,
        "tokens": cache.num_tokens,
        "dtype": cache.ledger["dtype"],
        "doc_tokens": {f"p{q}": float(np.percentile(lengths, q)) for q in (0, 50, 90, 99, 100)} if len(lengths) else {},
        "token_id_range_first_1M": [int(sample.min()), int(sample.max())] if len(sample) else None,
        "tokenizer_sha256": cache.ledger.get("tokenizer_sha256"),
    }
    if tokenizer is not None and cache.num_docs:
        summary["first_document"] = tokenizer.decode(cache.document(0).tolist(), skip_special_tokens=False)[
            :SAMPLE_CHARS
        ]
    return summary


def realized_mixture(dataset: MixtureDataset, start_step: int, end_step: int) -> dict[str, dict[str, float]]:
    """Per component: share of sequences drawn over steps [start, end) and the target share over the same steps."""
    schedule = dataset.config.batch_schedule
    first, stop = int(schedule.offset(start_step)), int(schedule.offset(end_step))
    components, _ = dataset.draws(np.arange(first, stop))
    realized = np.bincount(components, minlength=len(dataset.component_names)) / max(stop - first, 1)
    sizes = np.array([schedule.batch_size(s) for s in range(start_step, end_step)], dtype=np.float64)
    targets = np.stack([dataset.config.weights_at(s) for s in range(start_step, end_step)])
    target = (targets * sizes[:, None]).sum(axis=0) / sizes.sum()
    return {
        name: {"realized": float(r), "target": float(t)}
        for name, r, t in zip(dataset.component_names, realized, target)
    }


def inspect_mixture(
    config: MixtureConfig, step: int, step_range: tuple[int, int], tokenizer: Tokenizer | None = None
) -> dict[str, object]:
    """A batch's composition (and decoded first sequence) plus realized vs target weights over `step_range`."""
    dataset = MixtureDataset(config)
    batch = dataset.batch(step)
    summary: dict[str, object] = {
        "kind": "mixture",
        "step": step,
        "batch_size": int(batch.tokens.shape[0]),
        "seq_len": config.seq_len,
        "batch_components": {name: int((batch.component == i).sum()) for i, name in enumerate(dataset.component_names)},
        "loss_mask_fraction": float(batch.loss_mask.mean()),
        "mixture": realized_mixture(dataset, *step_range),
        "step_range": list(step_range),
    }
    if tokenizer is not None:
        summary["first_sequence"] = tokenizer.decode(batch.tokens[0].tolist(), skip_special_tokens=False)[:SAMPLE_CHARS]
    return summary


def batch_throughput(config: MixtureConfig, steps: int) -> dict[str, float]:
    """Sequences/s and tokens/s of `batch(step)` over `steps` consecutive steps (after one warm-up step)."""
    dataset = MixtureDataset(config)
    dataset.batch(0)
    started = time.perf_counter()
    sequences = sum(dataset.batch(step).tokens.shape[0] for step in range(1, steps + 1))
    seconds = time.perf_counter() - started
    return {
        "steps": steps,
        "seconds": seconds,
        "sequences_per_s": sequences / seconds,
        "tokens_per_s": sequences * config.seq_len / seconds,
    }
