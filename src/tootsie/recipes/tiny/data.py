"""Local stand-ins for the recipes' datasets: five kinds of text, tokenized, sliced into one cache per component.

The recipes name 36 components (Nemotron-CC buckets, StarCoder, FineMath, FLAN,
...). At tiny scale each is backed by a distinct local source, so a mixture
change is a real change of what the model reads:

    kind        text                                              components (examples)
    web         stdlib module docstrings (prose)                  nemotron_cc/*, dclm_baseline, dolmino/dclm_hq
    reference   `pydoc` topics (the language reference)           arxiv, pes2o, wiki, megawika
    code        stdlib `.py` files                                starcoderdata, StackV2 Python, MegaMath code
    math        synthetic word problems and drills (`tiny_text`)  FineMath, MegaMath, ProofPile 2, Dolmino math
    qa          synthetic instruction/response pairs              FLAN, Tulu v3, StackExchange, science QA

Steps: `tiny/raw` (`build_tiny_corpus`: the five kinds as JSONL) → per kind
normalize and a held-out split by id → one BPE tokenizer over the train
splits → per kind a train and a held-out token cache → `tiny/components`
(`slice_components`): component j of the n components of a kind gets the
kind's train documents i with i mod n == j, so no two components share a
document. Both recipes use the same steps, so their second run skips them.

Example: `tiny_data_steps().components["starcoderdata"]` is a reference to
`<tiny/components output>/starcoderdata`, a slice of the stdlib code cache.
"""

import gzip
import io
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tootsie.corpora.stdlib_source import StdlibSourceConfig, iter_code_and_prose
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.split import SplitConfig, split_documents
from tootsie.datakit.stats import STATS_FILE
from tootsie.datakit.token_cache import TokenCacheWriter, open_token_cache
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TOKENIZER_FILE, TokenizerTrainConfig, train_tokenizer
from tootsie.errors import TootsieError
from tootsie.executor import Step, StepRef
from tootsie.jsonfile import write_json_atomic
from tootsie.recipes.tiny.text import instruction_document, math_document

KINDS = ("web", "reference", "code", "math", "qa")
TINY_VOCAB = 1024
"""BPE vocabulary of the tiny runs (small enough for a 64-wide model's embedding to train in minutes)."""
HELDOUT_FRACTION = 0.05
INLINE = EngineConfig(
    workers=1, progress=False
)  # a few MB of text: worker processes cost more than they save (not hashed)

COMPONENT_KINDS: dict[str, str] = {
    **{
        f"nemotron_cc/{bucket}": "web"
        for bucket in ("hq_actual", "hq_synth", "medium_high", "medium", "medium_low", "low_actual", "low_synth")
    },
    "dclm_baseline": "web",
    "dolmino/dclm_hq": "web",
    **dict.fromkeys(
        (
            "arxiv_markdownified",
            "dolmino/pes2o",
            "dolma/pes2o",
            "dolma/arxiv",
            "wikipedia_markdown",
            "dolmino/wiki",
            "dolma/wiki",
            "dolma/megawika",
        ),
        "reference",
    ),
    **dict.fromkeys(
        (
            "starcoderdata",
            "common_pile_stackv2_edu_filtered_python",
            "megamath/text_code_block",
            "megamath/translated_code",
        ),
        "code",
    ),
    **dict.fromkeys(
        (
            "proofpile_2",
            "finemath-3-plus",
            "all_math",
            "megamath/web",
            "megamath/web_pro",
            "megamath/qa",
            "dolmino/math",
            "dolma/algebraic_stack",
            "dolma/open_web_math",
        ),
        "math",
    ),
    **dict.fromkeys(
        (
            "dolmino/flan",
            "tulu_v3",
            "medu_science_qa",
            "stackexchange_custom",
            "dolmino/stackexchange",
            "dolma/stackexchange",
        ),
        "qa",
    ),
}
"""Every component the two recipes weight → the kind of local text that stands in for it."""


@dataclass(frozen=True)
class TinyCorpusConfig:
    """Which stdlib text and how much synthetic text make the five kinds."""

    stdlib: StdlibSourceConfig = field(default_factory=lambda: StdlibSourceConfig(max_code_bytes=1_000_000))
    """The stdlib to read (code, docstrings, pydoc topics)."""
    math_docs: int = 2500
    """Synthetic math documents (`tiny_text.math_document`)."""
    qa_docs: int = 2500
    """Synthetic instruction documents (`tiny_text.instruction_document`)."""
    seed: int = 0
    """Seed of the synthetic text."""

    def __post_init__(self) -> None:
        if self.math_docs <= 0 or self.qa_docs <= 0:
            raise ValueError(f"math_docs and qa_docs must be positive, got {self.math_docs=}, {self.qa_docs=}")


def tiny_documents(config: TinyCorpusConfig) -> Iterable[tuple[str, str, str]]:
    """`(kind, id, text)` of every document: stdlib code, docstrings and topics, then the synthetic kinds."""
    for source, doc_id, text in iter_code_and_prose(config.stdlib):
        yield (
            ("code" if source == "code" else "reference" if doc_id.startswith("pydoc-topic:") else "web"),
            doc_id,
            text,
        )
    rng = np.random.default_rng(config.seed)
    for index in range(config.math_docs):
        yield "math", f"math:{index}", math_document(rng)
    for index in range(config.qa_docs):
        yield "qa", f"qa:{index}", instruction_document(rng)


def write_jsonl_gz(path: Path, records: Iterable[dict[str, str]]) -> int:
    """Write records as gzipped JSONL atomically (temp file, then rename); return how many.

    The gzip header holds no time and no file name (`gzip.open` would write the clock and the temporary name, which
    holds the PID), so the same records give the same bytes in every run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    count = 0
    with (
        open(tmp, "wb") as handle,
        gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0) as packed,
        io.TextIOWrapper(packed, encoding="utf-8") as out,
    ):
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def build_tiny_corpus(config: TinyCorpusConfig, output_path: str) -> dict[str, int]:
    """Write `<out>/<kind>/docs-00000.jsonl.gz` for the five kinds and `stats.json`; return documents per kind."""
    grouped: dict[str, list[dict[str, str]]] = {kind: [] for kind in KINDS}
    for kind, doc_id, text in tiny_documents(config):
        grouped[kind].append({"id": doc_id, "text": text})
    counts = {
        kind: write_jsonl_gz(Path(output_path) / kind / "docs-00000.jsonl.gz", records)
        for kind, records in grouped.items()
    }
    write_json_atomic(Path(output_path) / STATS_FILE, counts)
    return counts


@dataclass(frozen=True)
class ComponentSlicesConfig:
    """Kind token caches and the component → kind table that slices them."""

    caches: dict[str, str]
    """Kind → its train token cache."""
    components: dict[str, str]
    """Component name → kind; the components of a kind share out its documents."""

    def __post_init__(self) -> None:
        unknown = sorted({kind for kind in self.components.values()} - set(self.caches))
        if unknown:
            raise ValueError(f"components name kinds {unknown} that have no cache; caches has {sorted(self.caches)}")


def slice_components(config: ComponentSlicesConfig, output_path: str) -> dict[str, dict[str, int]]:
    """Write `<out>/<component>/` token caches: the j-th of n components of a kind holds its documents i ≡ j (mod n)."""
    counts = {}
    for kind, path in sorted(config.caches.items()):
        names = sorted(name for name, k in config.components.items() if k == kind)
        cache = open_token_cache(path)
        if cache.num_docs < len(names):
            raise TootsieError(
                f"kind {kind!r} has {cache.num_docs} documents in {path}, "
                f"fewer than its {len(names)} components; add text to that kind"
            )
        lengths = np.diff(cache.offsets)
        for j, name in enumerate(names):
            writer = TokenCacheWriter(
                Path(output_path) / name,
                vocab_size=int(cache.ledger["vocab_size"]),
                ledger_extra={"kind": kind, "slice": [j, len(names)]},
            )
            for doc in range(j, cache.num_docs, len(names)):
                writer.append_flat(cache.document(doc), lengths[doc : doc + 1])
            ledger = writer.close()
            counts[name] = {"docs": int(ledger["num_docs"]), "tokens": int(ledger["num_tokens"])}
    write_json_atomic(Path(output_path) / STATS_FILE, counts)
    return counts


@dataclass(frozen=True)
class ConcatCachesConfig:
    """Token caches to join, in order, into one cache (an ordered, not pre-shuffled corpus)."""

    caches: tuple[str, ...]
    """Caches in the order their documents are stored."""
    tokens_each: int | None = None
    """Take each cache's first documents up to about this many tokens (equal parts); None takes them all."""

    def __post_init__(self) -> None:
        if self.tokens_each is not None and self.tokens_each <= 0:
            raise ValueError(f"tokens_each must be positive or None, got {self.tokens_each}")


def concatenate_caches(config: ConcatCachesConfig, output_path: str) -> dict[str, object]:
    """One cache holding the documents of `config.caches` in order; its ledger records where each input starts."""
    opened = [open_token_cache(path) for path in config.caches]
    budget = config.tokens_each
    counts = [
        cache.num_docs if budget is None else max(1, int(np.searchsorted(cache.offsets, budget, side="left")))
        for cache in opened
    ]
    short = [
        path
        for path, cache in zip(config.caches, opened, strict=True)
        if budget is not None and cache.num_tokens < budget
    ]
    if short:
        raise TootsieError(f"caches {short} hold fewer than tokens_each={budget} tokens; lower tokens_each or add text")
    writer = TokenCacheWriter(
        output_path,
        vocab_size=max(int(cache.ledger["vocab_size"]) for cache in opened),
        ledger_extra={"doc_starts": np.cumsum([0, *counts]).tolist()},
    )
    for cache, count in zip(opened, counts, strict=True):
        writer.append_flat(np.asarray(cache.tokens[: cache.offsets[count]]), np.diff(cache.offsets[: count + 1]))
    return writer.close()


@dataclass(frozen=True)
class TinyData:
    """Where the tiny runs' data is: references to the tiny data steps' outputs (or paths, in tests)."""

    tokenizer: StepRef | str
    """The tokenizer.json."""
    train: dict[str, StepRef | str]
    """Kind → train token cache."""
    heldout: dict[str, StepRef | str]
    """Kind → held-out token cache (documents held out by id)."""
    components: dict[str, StepRef | str]
    """Component name → its slice cache."""


def tiny_data_steps(corpus: TinyCorpusConfig = TinyCorpusConfig()) -> TinyData:
    """The tiny data steps and references to their outputs.

    The steps are shared by every tiny run: every component of `COMPONENT_KINDS` is sliced.
    """
    raw = Step(
        "tiny/raw",
        build_tiny_corpus,
        corpus,
        description="stdlib code/docstrings/pydoc topics and synthetic math/instructions, by kind",
    )
    splits = {}
    for kind in KINDS:
        docs = Step(f"tiny/normalized/{kind}", normalize, NormalizeConfig(inputs=(raw.ref(kind),), engine=INLINE))
        splits[kind] = Step(
            f"tiny/split/{kind}", split_documents, SplitConfig(input=docs.ref(), heldout_fraction=HELDOUT_FRACTION)
        )
    tokenizer = Step(
        "tiny/tokenizer",
        train_tokenizer,
        TokenizerTrainConfig(inputs=tuple(splits[k].ref("train") for k in KINDS), vocab_size=TINY_VOCAB),
    )
    tokenizer_file = tokenizer.ref(TOKENIZER_FILE)
    caches = {
        (kind, split): Step(
            f"tiny/tokenized/{kind}/{split}",
            tokenize_documents,
            TokenizeConfig(input=splits[kind].ref(split), tokenizer=tokenizer_file, engine=INLINE),
        )
        for kind in KINDS
        for split in ("train", "heldout")
    }
    train = {kind: caches[kind, "train"].ref() for kind in KINDS}
    sliced = Step("tiny/components", slice_components, ComponentSlicesConfig(caches=train, components=COMPONENT_KINDS))
    return TinyData(
        tokenizer_file,
        train,
        {kind: caches[kind, "heldout"].ref() for kind in KINDS},
        {name: sliced.ref(name) for name in COMPONENT_KINDS},
    )
