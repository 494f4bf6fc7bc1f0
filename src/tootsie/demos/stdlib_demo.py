"""The tootsie demo: raw text to an evaluated model on one CPU, every stage a versioned step.

Flow (each line is a step; its output path hashes its config and inputs):

    stdlib corpus (code + prose)           raw JSONL from the running Python
    pydoc WARC → extract (web)             stdlib docs rendered to HTML, packed as a WARC, main text taken out,
                                           lines repeated across the pages removed (site boilerplate)
    → normalize, per source                Parquet with xxh3 ids, exact duplicates dropped (prose: + web pages)
    → quality + dedup attributes           length/compression rules; MinHash-LSH near-duplicates
    → consolidate → split by id            drop flagged documents; hold out 5 % by id
    → decontaminate train vs held-out      13-gram overlap with the held-out documents, dropped
    → tokenizer                            byte-level BPE trained on the clean train splits
    → tokenize, per source and split       memory-mapped token caches
    → train/pretrain                       small Llama, WSD warmup + stable, mix 50/50
    → train/cooldown                       warm start, WSD decay, mix 30 code / 70 prose
    → eval/bpb                             held-out bits-per-byte: init, pretrain, final
    → summary                              merged metrics.jsonl, loss.png, summary.json, report.html

`tootsie demo` runs `build_steps(DemoSettings())` from any install of the
package; `tootsie demo --tiny` runs `build_steps(TINY)`, the copy the tests
use (seconds of training instead of minutes).

The web pages join the prose source rather than forming a third: pydoc pages
carry the same docstrings as the prose documents, and dedup and
decontamination work within a source, so only in one source do they see
both (a held-out docstring cannot come back through a web page); the mixture
stays code/prose (docs/demo.md has the measurements). `experiments/demo.py` builds the
same steps for `tootsie run`; a second run skips every finished step.

The raw steps read the running Python; their configs name it
(`corpora.stdlib_source.PythonIdentity`: version, build, platform, linked
libraries, a digest of its stdlib) and hold no path, and the pages and
docstrings are read in a stdlib-only interpreter. So a clone in another
directory, or another virtualenv over the same Python, gets the same hashes
and the same bytes; another Python gets other hashes (docs/reproducibility.md).
"""

from dataclasses import dataclass

from tootsie.corpora.pydoc_source import PydocWarcConfig, build_pydoc_warc
from tootsie.corpora.stdlib_source import StdlibSourceConfig, build_stdlib_corpus
from tootsie.data.batch_schedule import BatchSchedule
from tootsie.data.mixture import MixtureConfig, MixtureStage
from tootsie.datakit.consolidate import AttributeFilter, ConsolidateConfig, consolidate
from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate
from tootsie.datakit.dedup import DedupConfig, dedup
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.extract import ExtractConfig, extract
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.quality import QualityConfig, QualityRules, quality
from tootsie.datakit.split import SPLITS, SplitConfig, split_documents
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TOKENIZER_FILE, TokenizerTrainConfig, train_tokenizer
from tootsie.eval.bpb_step import BPB_FILE, EvalBPBConfig, evaluate_bpb
from tootsie.eval.training import run_training
from tootsie.executor import Step
from tootsie.models.llama import LlamaConfig
from tootsie.report.run_summary import RunSummaryConfig, summarize_runs
from tootsie.train.config import CheckpointConfig, TrainConfig, WarmStartConfig
from tootsie.train.optimizer import AdamWConfig
from tootsie.train.schedule import WSDConfig

SOURCES = ("code", "prose")
PRETRAIN_MIX = {"code": 0.5, "prose": 0.5}
COOLDOWN_MIX = {"code": 0.3, "prose": 0.7}
# The corpus is a few MB: worker processes would cost more than they save (engine settings are not hashed).
INLINE = EngineConfig(workers=1, progress=False)


@dataclass(frozen=True)
class DemoSettings:
    """Sizes of the demo; the defaults finish in a few minutes on 2 CPU cores."""

    max_code_bytes: int = 4_000_000
    """Bytes of standard-library source read into the code source."""
    web_pages: int = 100
    """Stdlib modules whose pydoc HTML pages go into the web WARC (their main text joins the prose source)."""
    heldout_fraction: float = 0.05
    """Share of documents (by id) held out for bits-per-byte."""
    vocab_size: int = 4096
    """BPE vocabulary size, and the model's."""
    hidden_dim: int = 128
    """Model width."""
    intermediate_dim: int = 512
    """SwiGLU hidden width."""
    num_layers: int = 4
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads."""
    num_kv_heads: int = 2
    """Key/value heads (grouped-query attention)."""
    seq_len: int = 128
    """Tokens per training and evaluation sequence."""
    batch_size: int = 16
    """Sequences per training step."""
    pretrain_steps: int = 300
    """Steps of the pretraining phase."""
    cooldown_steps: int = 100
    """Steps of the cooldown phase (the WSD decay)."""
    warmup_steps: int = 30
    """Linear warmup steps at the start of pretraining."""
    peak_lr: float = 3e-3
    """Learning rate after warmup."""
    eval_sequences: int = 64
    """Held-out sequences per source in the bits-per-byte step."""
    checkpoint_every: int = 100
    """Steps between permanent checkpoints."""


TINY = DemoSettings(
    max_code_bytes=300_000,
    web_pages=20,
    heldout_fraction=0.3,
    vocab_size=512,
    hidden_dim=32,
    intermediate_dim=64,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    seq_len=32,
    batch_size=4,
    pretrain_steps=12,
    cooldown_steps=4,
    warmup_steps=2,
    eval_sequences=8,
    checkpoint_every=5,
)
"""The demo at test size (`tootsie demo --tiny`): every step of the flow, seconds of training."""


def build_data_steps(settings: DemoSettings) -> tuple[Step, dict[tuple[str, str], Step]]:
    """The datakit steps: the tokenizer step and the token-cache step of every (source, split)."""
    raw = Step("demo/raw/stdlib", build_stdlib_corpus, StdlibSourceConfig(max_code_bytes=settings.max_code_bytes))
    warc = Step("demo/raw/pydoc-warc", build_pydoc_warc, PydocWarcConfig(max_pages=settings.web_pages))
    # extract's default removes site boilerplate: pydoc's headings and the inherited-method docs it repeats on every
    # page with a class (22 % of the extracted characters of the 100 pages; docs/datakit.md "Site boilerplate").
    web = Step("demo/extracted/web", extract, ExtractConfig(inputs=(warc.ref(),), engine=INLINE))
    # Web pages first: normalize keeps the order of its inputs, and held-out BPB reads the first `eval_sequences`
    # packed sequences, so this order decides which prose is evaluated (pages, as before inputs kept their order).
    inputs = {"code": (raw.ref("code"),), "prose": (web.ref(), raw.ref("prose"))}
    splits, train_docs = {}, {}
    for source in SOURCES:
        normalized = Step(f"demo/normalized/{source}", normalize, NormalizeConfig(inputs=inputs[source], engine=INLINE))
        # Docstrings and code are not web prose: only the length and compression rules apply to both.
        scored = Step(
            f"demo/quality/{source}",
            quality,
            QualityConfig(input=normalized.ref(), rules=QualityRules.for_code(), engine=INLINE),
        )
        duplicates = Step(f"demo/dedup/{source}", dedup, DedupConfig(input=normalized.ref(), fuzzy=True, engine=INLINE))
        filters = (
            AttributeFilter("quality", scored.ref(), "quality_pass", drop_value=False),
            AttributeFilter("exact_duplicate", duplicates.ref(), "exact_duplicate", drop_value=True),
            AttributeFilter("fuzzy_duplicate", duplicates.ref(), "fuzzy_duplicate", drop_value=True),
        )
        clean = Step(
            f"demo/clean/{source}",
            consolidate,
            ConsolidateConfig(input=normalized.ref(), attributes=filters, engine=INLINE),
        )
        splits[source] = Step(
            f"demo/split/{source}",
            split_documents,
            SplitConfig(input=clean.ref(), heldout_fraction=settings.heldout_fraction),
        )
        leaks = Step(
            f"demo/decontaminate/{source}",
            decontaminate,
            DecontaminateConfig(
                input=splits[source].ref("train"),
                eval_files=(splits[source].ref("heldout"),),
                eval_field="text",
                engine=INLINE,
            ),
        )
        overlap = AttributeFilter("heldout_overlap", leaks.ref(), "contaminated", drop_value=True)
        train_docs[source] = Step(
            f"demo/train-docs/{source}",
            consolidate,
            ConsolidateConfig(input=splits[source].ref("train"), attributes=(overlap,), engine=INLINE),
        )
    tokenizer = Step(
        "demo/tokenizer",
        train_tokenizer,
        TokenizerTrainConfig(inputs=tuple(train_docs[s].ref() for s in SOURCES), vocab_size=settings.vocab_size),
    )
    caches = {
        (source, split): Step(
            f"demo/tokenized/{source}/{split}",
            tokenize_documents,
            TokenizeConfig(
                input=train_docs[source].ref() if split == "train" else splits[source].ref(split),
                tokenizer=tokenizer.ref(TOKENIZER_FILE),
                engine=INLINE,
            ),
        )
        for source in SOURCES
        for split in SPLITS
    }
    return tokenizer, caches


def build_steps(settings: DemoSettings) -> list[Step]:
    """All demo steps for `settings`, ending with the summary step."""
    tokenizer, caches = build_data_steps(settings)
    model = LlamaConfig(
        vocab_size=settings.vocab_size,
        hidden_dim=settings.hidden_dim,
        intermediate_dim=settings.intermediate_dim,
        num_layers=settings.num_layers,
        num_heads=settings.num_heads,
        num_kv_heads=settings.num_kv_heads,
    )
    total_steps = settings.pretrain_steps + settings.cooldown_steps
    schedule = WSDConfig(
        peak_lr=settings.peak_lr,
        warmup_steps=settings.warmup_steps,
        decay_steps=settings.cooldown_steps,
        total_steps=total_steps,
    )
    train_caches = {source: caches[source, "train"].ref() for source in SOURCES}

    def train_config(mix: dict[str, float], num_steps: int, warm_start: WarmStartConfig | None = None) -> TrainConfig:
        data = MixtureConfig(
            caches=train_caches,
            stages=(MixtureStage(0, mix),),
            seq_len=settings.seq_len,
            batch_schedule=BatchSchedule.constant(settings.batch_size),
        )
        return TrainConfig(
            model=model,
            data=data,
            num_steps=num_steps,
            optimizer=AdamWConfig(weight_decay=0.1),
            schedule=schedule,
            warm_start=warm_start,
            checkpoints=CheckpointConfig(every_steps=settings.checkpoint_every),
        )

    pretrain = Step("demo/train/pretrain", run_training, train_config(PRETRAIN_MIX, settings.pretrain_steps))
    cooldown = Step(
        "demo/train/cooldown",
        run_training,
        train_config(COOLDOWN_MIX, total_steps, warm_start=WarmStartConfig(pretrain.ref())),
    )
    bpb = Step(
        "demo/eval/bpb",
        evaluate_bpb,
        EvalBPBConfig(
            model=model,
            checkpoints={"init": None, "pretrain": pretrain.ref(), "final": cooldown.ref()},
            heldout={source: caches[source, "heldout"].ref() for source in SOURCES},
            tokenizer=tokenizer.ref(TOKENIZER_FILE),
            seq_len=settings.seq_len,
            max_sequences=settings.eval_sequences,
        ),
    )
    summary = Step(
        "demo/summary",
        summarize_runs,
        RunSummaryConfig(runs={"pretrain": pretrain.ref(), "cooldown": cooldown.ref()}, bpb=bpb.ref(BPB_FILE)),
    )
    return [summary]
