"""MinHash signatures estimate Jaccard without bias, LSH finds near-duplicates, union-find clusters transitively."""

import hashlib
import re

import numpy as np
import pytest
import xxhash

from tootsie.datakit import minhash
from tootsie.datakit.minhash import (
    EMPTY,
    MinHashConfig,
    UnionFind,
    cluster_firsts,
    estimated_jaccard,
    is_empty,
    lsh_clusters,
    normalize_for_shingles,
    words,
)

VOCAB = np.array([f"w{i}" for i in range(50_000)])


def _random_words(rng: np.random.Generator, n: int) -> list[str]:
    return VOCAB[rng.integers(0, len(VOCAB), n)].tolist()


def _grams(tokens: list[str], n: int = 5) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def _jaccard(a: list[str], b: list[str]) -> float:
    ga, gb = _grams(a), _grams(b)
    return len(ga & gb) / len(ga | gb)


def _variant(rng: np.random.Generator, tokens: list[str], target: float) -> list[str]:
    """Deletions, substitutions and insertions at a rate that lands the word 5-gram Jaccard near `target`."""
    shared = 2 * target / (1 + target)  # J = s / (2 - s) for sets of equal size sharing a fraction s
    rate = 1 - shared ** (1 / 5)  # an edited word breaks the 5 grams covering it
    out: list[str] = []
    for token, r, new in zip(tokens, rng.random(len(tokens)), _random_words(rng, len(tokens)), strict=True):
        if r < rate / 3:
            continue
        out += [new] if r < 2 * rate / 3 else [token, new] if r < rate else [token]
    return out


def _clustered(n_docs: int, signatures: np.ndarray, threshold: float | None) -> np.ndarray:
    """Each document's cluster first (itself when unclustered)."""
    hasher = MinHashConfig().build()
    clusters = lsh_clusters(iter(hasher.band_keys(signatures)), np.arange(n_docs), signatures, threshold)
    first = np.arange(n_docs)
    first[clusters.members] = clusters.firsts
    return first


def test_normalization_lowercases_and_drops_punctuation_on_both_paths() -> None:
    assert words("Hello,   World!\tfoo_bar x-y 42") == [b"hello", b"world", b"foo_bar", b"x", b"y", b"42"]
    assert normalize_for_shingles("Ünïcode — “quoted” TEXT…") == "ünïcode quoted text"
    assert normalize_for_shingles("A, b. C!") == normalize_for_shingles("a b c — ")


def test_non_word_is_exactly_not_alnum_and_not_underscore() -> None:
    """`words` replaces non-ASCII non-word characters found with `not str.isalnum()`.

    Python's `\\W` agrees on every code point.
    """
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    assert re.sub(r"\W", " ", everything) == "".join(c if c.isalnum() or c == "_" else " " for c in everything)


@pytest.mark.parametrize("box_drawing", [0, 40])  # few distinct non-word characters: one replace each; many: the regex
def test_words_match_the_regex_definition(box_drawing: int) -> None:
    rng = np.random.default_rng(box_drawing)
    pool = [*"aZ9_ \t\n.,-—“”…\u00a0\u2003\ud800ÄéßİKﬁ٣²½😀", *(chr(0x2500 + i) for i in range(box_drawing))]
    for _ in range(300):
        text = "".join(rng.choice(pool, int(rng.integers(0, 80))))
        assert words(text) == re.sub(r"\W+", " ", text.lower()).encode("utf-8").split()


def test_vectorized_xxh3_matches_xxhash_on_every_short_length() -> None:
    rng = np.random.default_rng(0)
    pieces = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in rng.integers(1, 17, 20_000)]
    pieces += [bytes([byte]) * n for byte in (0, 255) for n in range(1, 17)]
    lengths = np.array([len(p) for p in pieces])
    starts = np.cumsum(lengths) - lengths
    expected = np.array([xxhash.xxh3_64_intdigest(p) for p in pieces], dtype=np.uint64)
    np.testing.assert_array_equal(minhash._xxh3_64_short(b"".join(pieces) + bytes(8), starts, lengths), expected)


def test_word_tokens_are_the_low_bits_of_each_words_xxh3() -> None:
    texts = [
        "",
        "  ...  ",
        "a",
        "Hello, World! " * 3,
        "x" * 17 + " " + "y" * 300 + " z",
        "naïve café — “quoted” İstanbul",
        PINNED_TEXTS[4],
        "",
    ]
    tokens, counts = minhash.word_tokens(texts)
    expected = [[(xxhash.xxh3_64_intdigest(w) & 0xFFFFFFFF) | 1 for w in words(t)] for t in texts]
    assert counts.tolist() == [len(e) for e in expected]
    assert tokens.tolist() == [t for e in expected for t in e]
    assert MinHashConfig().build().signatures([]).shape == (0, 286)


def test_signatures_are_deterministic_and_depend_on_the_seed() -> None:
    texts = [
        "the quick brown fox jumps over the lazy dog again",
        "a completely different sentence with many words in it",
    ]
    first = MinHashConfig().build().signatures(texts)
    assert first.shape == (2, 286) and first.dtype == np.uint32
    np.testing.assert_array_equal(first, MinHashConfig().build().signatures(texts))
    assert (first != MinHashConfig(seed=1).build().signatures(texts)).mean() > 0.99


PINNED_TEXTS = [
    "The quick brown fox jumps over the lazy dog, again and again.",
    "Ünïcode — “quoted” TEXT… with naïve café words",
    "two words",
    "",
    "def f(x):\n    return x_1 + 42  # comment",
    " ".join(f"w{i}" for i in np.random.default_rng(7).integers(0, 3000, 5000)),
    "a-b-c-d-e-f-g " * 3,
]


@pytest.mark.parametrize(
    ("config", "signatures_sha256", "first_row", "bands_sha256"),
    [
        (
            MinHashConfig(),
            "57ab47ee431e21f3fbc643c708ca0f100ff74d782444bc5306eb7ac106f2dad3",
            [25091613, 230398277, 28701613, 777569393],
            "f74dddfe689cb3213fbef55f16dc66332a3d34b47e42e2114b81c8c77b6b15ec",
        ),
        (
            MinHashConfig(shingle="char", ngram=4),
            "81ddb201157fa2a47c5a1197154445341dc350d0ea8c3baeb605397eb28b164f",
            [78283285, 48358803, 28816655, 346349002],
            "977e5733e8713c2cb8a738a6094b2c40f6e7075f763d3f0a3815167bdb02ca98",
        ),
        (
            MinHashConfig(num_perms=64, num_bands=8, ngram=3, seed=5),
            "622ba040505ab406c6025b8d436809e0d75fdaffef16855bbe9f45ce07886e9b",
            [370730968, 930944226, 889902020, 150876995],
            "b39a7df2c39de44ae3c58dd4969a3a839c539b9e6ad4a873e9b06a7dfb9bf972",
        ),
    ],
)
def test_signatures_and_band_keys_are_pinned(
    config: MinHashConfig, signatures_sha256: str, first_row: list[int], bands_sha256: str
) -> None:
    """Values from the per-word xxh3 reference implementation: a speed-up must not change a single bit."""
    hasher = config.build()
    signatures = hasher.signatures(PINNED_TEXTS)
    assert signatures[0, :4].tolist() == first_row
    assert hashlib.sha256(signatures.tobytes()).hexdigest() == signatures_sha256
    assert hashlib.sha256(hasher.band_keys(signatures).tobytes()).hexdigest() == bands_sha256


def test_batching_and_block_boundaries_do_not_change_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    texts = [" ".join(_random_words(rng, n)) for n in (3, 0, 40, 1, 200, 7)]
    hasher = MinHashConfig().build()
    one_by_one = np.concatenate([hasher.signatures([t]) for t in texts])
    monkeypatch.setattr(minhash, "_CHUNK_ROWS", 7)  # documents now straddle many blocks
    monkeypatch.setattr(minhash, "_TEXT_CHARS", 50)  # and are tokenized in several buffers
    np.testing.assert_array_equal(hasher.signatures(texts), one_by_one)


def test_short_documents_get_a_signature_and_empty_ones_the_empty_marker() -> None:
    signatures = MinHashConfig().build().signatures(["two words", "", "  ...  ", "two words!"])
    np.testing.assert_array_equal(is_empty(signatures), [False, True, True, False])
    assert (signatures[1] == EMPTY).all()
    np.testing.assert_array_equal(signatures[0], signatures[3])


def test_estimated_jaccard_is_close_to_the_true_jaccard() -> None:
    rng = np.random.default_rng(1)
    hasher = MinHashConfig().build()
    errors = []
    for target in np.linspace(0.3, 1.0, 24):
        base = _random_words(rng, 300)
        variant = _variant(rng, base, target)
        signatures = hasher.signatures([" ".join(base), " ".join(variant)])
        errors.append(estimated_jaccard(signatures[[0]], signatures[[1]])[0] - _jaccard(base, variant))
    errors_array = np.array(errors)
    assert np.abs(errors_array).max() < 0.1  # 286 permutations: standard deviation <= 0.03
    assert abs(errors_array.mean()) < 0.02  # no bias


def test_char_shingles_estimate_character_ngram_jaccard() -> None:
    hasher = MinHashConfig(shingle="char", ngram=4).build()
    a, b = "the cat sat on the mat with a hat", "the cat sat on the mat with a bat"
    grams_a = {a[i : i + 4] for i in range(len(a) - 3)}
    grams_b = {b[i : i + 4] for i in range(len(b) - 3)}
    signatures = hasher.signatures([a, b])
    assert estimated_jaccard(signatures[[0]], signatures[[1]])[0] == pytest.approx(
        len(grams_a & grams_b) / len(grams_a | grams_b), abs=0.1
    )


def test_identical_documents_always_share_every_band() -> None:
    hasher = MinHashConfig().build()
    signatures = hasher.signatures(
        ["Some text, repeated here.", "some TEXT repeated   here", "other text entirely here"]
    )
    keys = hasher.band_keys(signatures)
    assert keys.shape == (26, 3)
    assert (keys[:, 0] == keys[:, 1]).all() and not (keys[:, 0] == keys[:, 2]).any()


def test_near_duplicates_are_clustered_and_unrelated_documents_are_not() -> None:
    rng = np.random.default_rng(2)
    bases = [_random_words(rng, 300) for _ in range(20)]
    docs = []
    for base in bases:
        edited = list(base)
        for position in rng.choice(len(edited), 3, replace=False):
            edited[position] = "edited"
        docs += [base, edited]
    first = _clustered(len(docs), MinHashConfig().build().signatures([" ".join(d) for d in docs]), threshold=0.8)
    np.testing.assert_array_equal(first, np.repeat(np.arange(0, len(docs), 2), 2))


def test_union_find_clusters_are_transitive_and_keep_the_first_member() -> None:
    sets = UnionFind(6)
    sets.union(4, 5)
    sets.union(5, 3)
    assert sets.find(3) == sets.find(4) and sets.find(0) != sets.find(3)
    members, firsts = cluster_firsts(np.array([[7, 9], [9, 12], [3, 20], [12, 30]]))
    np.testing.assert_array_equal(members, [3, 7, 9, 12, 20, 30])
    np.testing.assert_array_equal(firsts, [3, 7, 7, 7, 3, 7])


def test_verification_keeps_pairs_below_the_threshold_apart() -> None:
    rng = np.random.default_rng(3)
    base = _random_words(rng, 400)
    variant = _variant(rng, base, 0.55)
    truth = _jaccard(base, variant)
    hasher = MinHashConfig(num_perms=40, num_bands=40).build()  # 1-row bands: the pair is surely a candidate
    signatures = hasher.signatures([" ".join(base), " ".join(variant)])
    keys = hasher.band_keys(signatures)
    assert 0.45 < truth < 0.65
    assert lsh_clusters(iter(keys), np.arange(2), signatures, threshold=0.8).merged_pairs == 0
    assert lsh_clusters(iter(keys), np.arange(2), signatures, threshold=None).merged_pairs == 1


def test_recall_of_pairs_above_the_threshold_is_at_least_95_percent() -> None:
    rng = np.random.default_rng(0)
    docs, truths = [], []
    for _ in range(800):
        base = _random_words(rng, 300)
        variant = _variant(rng, base, rng.uniform(0.5, 1.0))
        docs += [" ".join(base), " ".join(variant)]
        truths.append(_jaccard(base, variant))
    first = _clustered(len(docs), MinHashConfig().build().signatures(docs), threshold=0.8)
    found = first[0::2] == first[1::2]
    above = np.array(truths) >= 0.8
    assert above.sum() > 300
    assert found[above].mean() >= 0.95
    assert found[np.array(truths) < 0.7].mean() < 0.02


@pytest.mark.parametrize(("field", "value"), [("num_bands", 25), ("ngram", 0), ("shingle", "token"), ("seed", -1)])
def test_config_errors_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        MinHashConfig(**{field: value})  # type: ignore[arg-type]
