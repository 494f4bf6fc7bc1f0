"""Exposure accounting: how often each document was trained on over a step range.

Computed from the permutations, not from logs: because `batch(step)` is a pure
function, the sequences of any step range can be listed after the fact and
mapped back to the documents they cut through. A sequence covering
`tokens[s:e]` of a cache credits every document it overlaps with the tokens it
took from it; a document's exposure is tokens seen / its length, so 1.0 is
"seen once in full" and 2.0 "twice", even when sequences split it.

A document-packed component credits each drawn document with the tokens that
fit in one sequence, so a document longer than seq_len never reaches 1.0.

Example: a 4-step range over a component of 10 one-sequence documents drawn
40 times gives every document an exposure of 4.0 (four epochs).
"""

import numpy as np

from tootsie.data.mixture import MixtureDataset
from tootsie.data.sequences import DocumentSequences, WholeDocumentSequences

CHUNK_SEQUENCES = 1 << 16


def _credit(offsets: np.ndarray, starts: np.ndarray, ends: np.ndarray, tokens_seen: np.ndarray) -> None:
    """Add the tokens of each [start, end) window to the documents it overlaps."""
    first = np.searchsorted(offsets, starts, side="right") - 1
    last = np.searchsorted(offsets, ends - 1, side="right") - 1
    single = first == last
    np.add.at(tokens_seen, first[single], (ends - starts)[single])
    multi = ~single
    np.add.at(tokens_seen, first[multi], offsets[first[multi] + 1] - starts[multi])
    np.add.at(tokens_seen, last[multi], ends[multi] - offsets[last[multi]])
    inner = np.zeros(len(tokens_seen) + 1, dtype=np.int64)
    np.add.at(inner, first[multi] + 1, 1)
    np.add.at(inner, last[multi], -1)
    tokens_seen += np.cumsum(inner)[:-1] * np.diff(offsets)


def document_exposure(dataset: MixtureDataset, start_step: int, end_step: int) -> dict[str, np.ndarray]:
    """Per component, each document's exposure (tokens seen / document length) over steps [start, end)."""
    schedule, seq_len = dataset.config.batch_schedule, dataset.config.seq_len
    tokens_seen = {name: np.zeros(source.cache.num_docs, dtype=np.int64) for name, source in dataset.sources.items()}
    first, stop = int(schedule.offset(start_step)), int(schedule.offset(end_step))
    for chunk_start in range(first, stop, CHUNK_SEQUENCES):
        components, local = dataset.sequence_sources(np.arange(chunk_start, min(chunk_start + CHUNK_SEQUENCES, stop)))
        for c in np.unique(components):
            name = dataset.component_names[c]
            source = dataset.sources[name]
            if isinstance(source, DocumentSequences | WholeDocumentSequences):
                documents = local[components == c]
                if isinstance(source, WholeDocumentSequences):
                    first_docs = source.first_documents
                    documents = np.concatenate([np.arange(first_docs[s], first_docs[s + 1]) for s in documents])
                np.add.at(tokens_seen[name], documents, np.minimum(np.diff(source.cache.offsets)[documents], seq_len))
                continue
            starts = local[components == c] * seq_len
            _credit(source.cache.offsets, starts, starts + seq_len, tokens_seen[name])
    return {
        name: seen / np.maximum(np.diff(dataset.sources[name].cache.offsets), 1) for name, seen in tokens_seen.items()
    }
