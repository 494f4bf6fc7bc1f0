"""The benchmark registry: which lm-eval task configs make up `tootsie eval suite`'s named suites, and their data.

Each `Benchmark` names lm-eval's own stock task YAML (prompt, metrics,
filters), the Hugging Face dataset it reads (repository, config, splits) and
the metric reported as its headline. The suite loads the stock YAML and only
swaps its data source for local files in the Hub dataset's own schema, laid
out as `DATA_DIR/<repo>/<config>/<split>.jsonl` (or `.parquet`), which is what
`tootsie eval mirror` writes. Nothing here imports lm-eval, so the CLI can
list suites and mirror data without it.

Worked example: `arc_challenge` reads lm-eval's `arc/arc_challenge.yaml`
("Question: {{question}}\\nAnswer:" over `choices.text`, acc and acc_norm)
with its test split from `DATA_DIR/allenai/ai2_arc/ARC-Challenge/test.jsonl`,
and reports `acc_norm`.
"""

from dataclasses import dataclass

from tootsie.errors import TootsieError

BBH_SUBTASKS = (
    "boolean_expressions",
    "causal_judgement",
    "date_understanding",
    "disambiguation_qa",
    "dyck_languages",
    "formal_fallacies",
    "geometric_shapes",
    "hyperbaton",
    "logical_deduction_five_objects",
    "logical_deduction_seven_objects",
    "logical_deduction_three_objects",
    "movie_recommendation",
    "multistep_arithmetic_two",
    "navigate",
    "object_counting",
    "penguins_in_a_table",
    "reasoning_about_colored_objects",
    "ruin_names",
    "salient_translation_error_detection",
    "snarks",
    "sports_understanding",
    "temporal_sequences",
    "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects",
    "web_of_lies",
    "word_sorting",
)
"""lm-eval's 27 BIG-Bench Hard subtasks (bbh/cot_fewshot/_bbh_cot_fewshot.yaml), one Hub config each."""


@dataclass(frozen=True)
class Subtask:
    """One lm-eval task config and the Hub dataset config it reads."""

    stock_yaml: str
    """The task's YAML under lm_eval/tasks/ (its prompt, metrics and filters)."""
    config: str
    """The Hub dataset config (its directory under the repository in the data dir)."""


@dataclass(frozen=True)
class Benchmark:
    """A reported benchmark: one or more lm-eval task configs on one Hub dataset, and its headline metric."""

    name: str
    """Row name in the suite's results."""
    repo: str
    """The Hugging Face dataset repository (`owner/name`)."""
    subtasks: tuple[Subtask, ...]
    """lm-eval task configs; several (BBH) are pooled into one row, weighted by size, as lm-eval's group does."""
    metric: str
    """Headline metric as lm-eval names it, with its filter: `acc,none`, `exact_match,strict-match`."""
    splits: tuple[str, ...]
    """The Hub splits read: the evaluated one first, then any few-shot source."""
    olmes: str | None = None
    """The OLMES-style variant's name in `tootsie.eval.olmes_formats`, or None when the task has none."""
    overrides: tuple[tuple[str, object], ...] = ()
    """Task-config fields set on top of the stock YAML (JSON-like values)."""
    executes_code: bool = False
    """Whether scoring runs the model's output as code (HumanEval), which the suite does only in its sandbox."""

    def __post_init__(self) -> None:
        if not self.subtasks:
            raise ValueError(f"benchmark {self.name!r} has no subtasks")
        if "," not in self.metric:
            raise ValueError(f"metric must be 'name,filter' (e.g. 'acc,none'), got {self.metric!r}")


def _one(
    name: str, repo: str, stock_yaml: str, config: str, metric: str, splits: tuple[str, ...], **fields: object
) -> Benchmark:
    return Benchmark(name, repo, (Subtask(stock_yaml, config),), metric, splits, **fields)  # type: ignore[arg-type]


TEST_TRAIN = ("test", "train")

MMLU_DESCRIPTION = "The following are multiple choice questions (with answers) about {{subject.replace('_', ' ')}}.\n\n"
"""lm-eval's per-subject MMLU description, rendered per document so one task covers every subject."""

BENCHMARKS = {
    b.name: b
    for b in (
        _one(
            "arc_easy", "allenai/ai2_arc", "arc/arc_easy.yaml", "ARC-Easy", "acc_norm,none", TEST_TRAIN, olmes="arc_mc"
        ),
        _one(
            "arc_challenge",
            "allenai/ai2_arc",
            "arc/arc_challenge.yaml",
            "ARC-Challenge",
            "acc_norm,none",
            TEST_TRAIN,
            olmes="arc_mc",
        ),
        _one(
            "hellaswag",
            "Rowan/hellaswag",
            "hellaswag/hellaswag.yaml",
            "default",
            "acc_norm,none",
            ("validation", "train"),
            olmes="hellaswag_mc",
        ),
        _one("piqa", "baber/piqa", "piqa/piqa.yaml", "default", "acc_norm,none", ("validation",)),
        _one(
            "winogrande", "allenai/winogrande", "winogrande/default.yaml", "winogrande_xl", "acc,none", ("validation",)
        ),
        _one("boolq", "aps/super_glue", "super_glue/boolq/default.yaml", "boolq", "acc,none", ("validation",)),
        _one("openbookqa", "allenai/openbookqa", "openbookqa/openbookqa.yaml", "main", "acc_norm,none", ("test",)),
        _one(
            "lambada_openai",
            "EleutherAI/lambada_openai",
            "lambada/lambada_openai.yaml",
            "default",
            "acc,none",
            ("test",),
        ),
        _one(
            "gsm8k",
            "openai/gsm8k",
            "gsm8k/gsm8k.yaml",
            "main",
            "exact_match,strict-match",
            TEST_TRAIN,
            olmes="gsm8k_cot",
        ),
        _one(
            "math500",
            "HuggingFaceH4/MATH-500",
            "hendrycks_math/hendrycks_math500.yaml",
            "default",
            "exact_match,none",
            ("test",),
        ),
        _one(
            "mmlu",
            "cais/mmlu",
            "mmlu/default/_default_template_yaml",
            "all",
            "acc,none",
            ("test", "dev"),
            olmes="mmlu_mc",
            overrides=(("task", "mmlu"), ("description", MMLU_DESCRIPTION)),
        ),
        Benchmark(
            "bbh",
            "SaylorTwift/bbh",
            tuple(Subtask(f"bbh/cot_fewshot/{name}.yaml", name) for name in BBH_SUBTASKS),
            "exact_match,get-answer",
            ("test",),
        ),
        _one(
            "humaneval",
            "openai/openai_humaneval",
            "humaneval/humaneval.yaml",
            "openai_humaneval",
            "pass_at_1,create_test",
            ("test",),
            executes_code=True,
        ),
    )
}
"""Every benchmark by name. MATH is MATH-500 with lm-eval's hendrycks_math scoring (minerva_math needs math_verify)."""

SUITES = {
    "core": (
        "arc_easy",
        "arc_challenge",
        "hellaswag",
        "piqa",
        "winogrande",
        "boolq",
        "openbookqa",
        "lambada_openai",
    ),
    "reasoning": ("gsm8k", "math500", "mmlu", "bbh", "humaneval"),
}
"""Named task sets for `tootsie eval suite --suite NAME`."""


MARIN_BASE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("AGI Eval LSAT-AR", "agieval_lsat_ar"),
    ("ARC Easy", "arc_easy"),
    ("ARC Challenge", "arc_challenge"),
    ("BoolQ", "boolq"),
    ("CommonSense QA", "commonsense_qa"),
    ("COPA", "copa"),
    ("HellaSwag", "hellaswag"),
    ("lambada_openai", "lambada_openai"),
    ("OpenBookQA", "openbookqa"),
    ("PIQA", "piqa"),
    ("WinoGrande", "winogrande"),
    ("WSC", "wsc273"),
    ("MMLU", "mmlu"),
    ("GPQA", "gpqa"),
    ("BBH", "bbh"),
    ("MMLU Pro", "mmlu_pro"),
    ("HumanEval", "humaneval"),
    ("GSM8K", "gsm8k"),
    ("MATH", "math500"),
)
"""The 32B retrospective's base-model table, in its column order: (the seeds' column title, benchmark name)."""


def suite_benchmarks(suite: str) -> tuple[Benchmark, ...]:
    """The benchmarks of a named suite, or of a comma-separated list of benchmark names."""
    names = SUITES.get(suite) or tuple(name.strip() for name in suite.split(",") if name.strip())
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown or not names:
        raise TootsieError(
            f"unknown suite or benchmarks {unknown or suite!r}; suites: {sorted(SUITES)},"
            f" benchmarks: {sorted(BENCHMARKS)}"
        )
    return tuple(BENCHMARKS[name] for name in names)
