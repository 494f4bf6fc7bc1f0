"""Case study: cached contamination (GSM8K test items from a cached math bundle in the 32B Bison cooldown).

Steps (see `tootsie.recipes.cases.contamination`):

    case_contam/bundle                      math bundle: train.jsonl, test.jsonl (planted eval split), and the eval set
    case_contam/math-docs  (unfixed, fixed) the bundle as documents; the fix drops test.jsonl, a hashed field: new path
    case_contam/normalized (x2)             Parquet documents with content ids
    case_contam/tokenizer                   a small BPE tokenizer on the fixed documents
    case_contam/math-cache (x2)             the cached component: a token cache per version, each at its own path
    case_contam/decontaminate (x2)          13-gram overlap of each version's documents with the eval set
    case_contam/analysis                    figure.png + results.json

    tootsie run experiments/case_contamination.py
"""

from tootsie.datakit.decontaminate import DecontaminateConfig, decontaminate
from tootsie.datakit.engine import EngineConfig
from tootsie.datakit.normalize import NormalizeConfig, normalize
from tootsie.datakit.tokenize import TokenizeConfig, tokenize_documents
from tootsie.datakit.tokenizer import TokenizerTrainConfig, train_tokenizer
from tootsie.executor import Step, step_hash
from tootsie.recipes.cases.contamination import (
    EVAL_FILE,
    TEST_FILE,
    BundleDocsConfig,
    ContaminationAnalysisConfig,
    MarinStyleBundleDocsConfig,
    MathBundleConfig,
    analyze_contamination,
    bundle_documents,
    write_math_bundle,
)

INLINE = EngineConfig(workers=1, progress=False)
FIXES = {"unfixed": (), "fixed": (TEST_FILE,)}


def build_steps(train_problems: int = 2000, test_problems: int = 200) -> list[Step]:
    """The case study's steps for a bundle of the given size (tests build a smaller one)."""
    bundle = Step(
        "case_contam/bundle",
        write_math_bundle,
        MathBundleConfig(train_problems=train_problems, test_problems=test_problems),
    )
    docs = {
        version: Step("case_contam/math-docs", bundle_documents, BundleDocsConfig(bundle.ref(), drop))
        for version, drop in FIXES.items()
    }
    marin_style = {
        version: Step("case_contam/math-docs", bundle_documents, MarinStyleBundleDocsConfig(bundle.ref(), drop))
        for version, drop in FIXES.items()
    }
    normalized = {
        version: Step("case_contam/normalized", normalize, NormalizeConfig(inputs=(step.ref(),), engine=INLINE))
        for version, step in docs.items()
    }
    tokenizer = Step(
        "case_contam/tokenizer",
        train_tokenizer,
        TokenizerTrainConfig(inputs=(normalized["fixed"].ref(),), vocab_size=512),
    )
    caches = {
        version: Step(
            "case_contam/math-cache",
            tokenize_documents,
            TokenizeConfig(input=step.ref(), tokenizer=tokenizer.ref("tokenizer.json"), engine=INLINE),
        )
        for version, step in normalized.items()
    }
    checks = {
        version: Step(
            "case_contam/decontaminate",
            decontaminate,
            DecontaminateConfig(
                input=step.ref(), eval_files=(bundle.ref(EVAL_FILE),), eval_field="question", engine=INLINE
            ),
        )
        for version, step in normalized.items()
    }
    versions = {
        "tootsie": {version: step_hash(step) for version, step in docs.items()},
        "marin_style": {version: step_hash(step) for version, step in marin_style.items()},
    }
    analysis = Step(
        "case_contam/analysis",
        analyze_contamination,
        ContaminationAnalysisConfig(
            caches={version: step.ref() for version, step in caches.items()},
            decontamination={version: step.ref() for version, step in checks.items()},
            versions=versions,
        ),
    )
    return [analysis]


STEPS = build_steps()
