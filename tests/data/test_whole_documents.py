"""Whole-document packing: every document lands whole in one sequence, masks follow the tokens."""

import tempfile
import typing
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tootsie.configfile import load_config
from tootsie.data.mixture import MixtureConfig, MixtureDataset, MixtureStage
from tootsie.data.sequences import (
    PACKINGS,
    PackingChoice,
    WholeDocumentsConfig,
    WholeDocumentSequences,
    next_token_loss_mask,
)
from tootsie.datakit.token_cache import TokenCacheWriter, open_token_cache


def _chat_cache(directory: Path, lengths: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    writer = TokenCacheWriter(directory, vocab_size=500, ledger_extra={}, loss_mask=True)
    for doc, length in enumerate(lengths):
        writer.append(np.full(length, doc % 500), rng.integers(0, 2, length).astype(np.uint8))
    writer.close()


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=30),
    seq_len=st.integers(4, 32),
    seed=st.integers(0, 100),
)
def test_documents_are_never_split_and_long_ones_are_truncated_alone(lengths, seq_len, seed) -> None:
    with tempfile.TemporaryDirectory() as root:
        _chat_cache(Path(root), lengths, seed)
        cache = open_token_cache(root)
        source = WholeDocumentSequences(cache, seq_len)
        everything = np.arange(source.num_sequences)
        tokens, segments = source.read(everything)
        token_mask = source.token_mask(everything)
        seen = []
        for row in range(source.num_sequences):
            docs = [int(d) for d in np.unique(segments[row]) if d >= 0]
            used = 0
            for doc in docs:
                where = np.flatnonzero(segments[row] == doc)
                kept = min(lengths[doc], seq_len)
                assert where.tolist() == list(range(used, used + kept))
                assert (tokens[row, where] == doc % 500).all()
                assert (token_mask[row, where] == cache.loss_mask[cache.offsets[doc] : cache.offsets[doc] + kept]).all()
                used += kept
            assert (segments[row, used:] == -1).all() and (token_mask[row, used:] == 0).all()
            if any(lengths[doc] > seq_len for doc in docs):
                assert len(docs) == 1
            if row + 1 < source.num_sequences:
                next_first = int(source.first_documents[row + 1])
                assert used + min(lengths[next_first], seq_len) > seq_len
            seen.extend(docs)
        assert seen == list(range(len(lengths)))
        loss = next_token_loss_mask(segments, token_mask)
        expected = (segments[:, 1:] == segments[:, :-1]) & (segments[:, :-1] >= 0) & (token_mask[:, 1:] > 0)
        assert (loss[:, :-1] == expected).all() and (loss[:, -1] == 0).all()


def test_mixture_reads_packing_from_a_file_and_masks_targets(tmp_path) -> None:
    _chat_cache(tmp_path / "chat", [5, 9, 3, 12, 7, 4], seed=1)
    (tmp_path / "m.yaml").write_text(
        f"caches: {{chat: {tmp_path / 'chat'}}}\n"
        "stages: [{start_step: 0, weights: {chat: 1.0}}]\n"
        "seq_len: 16\nbatch_schedule: {stages: [[0, 2]]}\npacking: {kind: whole_documents}\n",
        encoding="utf-8",
    )
    config = load_config(tmp_path / "m.yaml", MixtureConfig)
    assert config.packing == WholeDocumentsConfig()
    batch = MixtureDataset(config).batch(0)
    cache = open_token_cache(tmp_path / "chat")
    for row in range(2):
        for t in np.flatnonzero(batch.loss_mask[row]):
            doc = batch.segment_ids[row, t + 1]
            position = int(cache.offsets[doc]) + int((batch.segment_ids[row, : t + 2] == doc).sum()) - 1
            assert cache.loss_mask[position] == 1
    (tmp_path / "bad.yaml").write_text(
        (tmp_path / "m.yaml").read_text().replace("whole_documents", "whole_docs"), encoding="utf-8"
    )
    with pytest.raises(Exception, match="whole_documents"):
        load_config(tmp_path / "bad.yaml", MixtureConfig)


def test_text_caches_keep_their_loss_mask(make_cache) -> None:
    path = make_cache("text", [list(range(1, 30)), list(range(30, 50))])
    config = MixtureConfig(caches={"text": path}, stages=(MixtureStage(0, {"text": 1.0}),), seq_len=8)
    batch = MixtureDataset(config).batch(0)
    assert (batch.loss_mask == next_token_loss_mask(batch.segment_ids)).all()


@pytest.mark.parametrize("kind", sorted(PACKINGS))
def test_every_packing_builds_reads_shapes_and_loads_by_kind(kind, tmp_path) -> None:
    _chat_cache(tmp_path / "c", [5, 30, 3, 12, 7, 4, 20], seed=2)
    assert typing.get_args(PackingChoice) == tuple(PACKINGS.values())
    (tmp_path / "m.yaml").write_text(
        f"caches: {{c: {tmp_path / 'c'}}}\nstages: [{{start_step: 0, weights: {{c: 1.0}}}}]\n"
        f"seq_len: 8\npacking: {{kind: {kind}}}\n",
        encoding="utf-8",
    )
    config = load_config(tmp_path / "m.yaml", MixtureConfig)
    assert type(config.packing) is PACKINGS[kind]
    source = config.packing.build(open_token_cache(tmp_path / "c"), 8)
    rows = np.arange(source.num_sequences)
    tokens, segments = source.read(rows)
    mask = source.token_mask(rows)
    assert tokens.shape == segments.shape == mask.shape == (source.num_sequences, 8)
    assert set(np.unique(mask)) <= {0.0, 1.0} and (mask[segments < 0] == 0).all()
