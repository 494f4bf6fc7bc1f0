"""The benchmark registry: which lm-eval task configs make up `tootsie eval suite`'s named suites, and their data.

Each `Benchmark` names lm-eval's own stock task YAML (prompt, metrics,
filters), the Hugging Face dataset it reads (repository, config, splits) and
the metric reported as its headline. The suite loads the stock YAML and only
swaps its data source for local files in the Hub dataset's own schema, laid
out as `DATA_DIR/<repo>/<config>/<split>.jsonl` (or `.parquet`), which is what
`tootsie eval mirror` writes. Nothing here imports lm-eval, so the CLI can
list suites and mirror data without it.

Suites name sets of benchmarks. A suite that stands for a published table
(`marin-base`, the 32B retrospective's base-model table) is a tuple of
`Column`s: each column's benchmark, few-shot count, metric and lm-eval
variant, with the source of each choice; the seeds state none of them, so
every source starts NOT IN SEEDS. `docs/eval-marin-base.md` tabulates them.

Worked example: `arc_challenge` reads lm-eval's `arc/arc_challenge.yaml`
("Question: {{question}}\\nAnswer:" over `choices.text`, acc and acc_norm)
with its test split from `DATA_DIR/allenai/ai2_arc/ARC-Challenge/test.jsonl`,
and reports `acc_norm`; in `marin-base` its column sets 10 shots, drawn from
`.../ARC-Challenge/train.jsonl`.
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
    access: str = ""
    """How to get a gated dataset's files (GPQA), said when one is missing; empty for open datasets."""

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

MATH500_SHOTS = (("fewshot_split", "test"),)
"""MATH-500's shots come from its only split, test; naming it makes lm-eval leave each problem out of its own shots
(with no fewshot_split, lm-eval 0.4.13 falls back to test and may show a problem its own answer)."""

AGIEVAL_TARGET = "{{gold[0]}}"
"""AGIEval's target as a choice index: the stock `{{gold}}` renders a list, which lm-eval 0.4.13's few-shot context
refuses ("Answer is not a string"); scoring reads `gold` itself (process_results_mcqa), so only shots change."""

GPQA_ACCESS = (
    "Idavidrein/gpqa is gated: accept its terms at https://huggingface.co/datasets/Idavidrein/gpqa with a Hugging Face"
    " account, then log in (`huggingface-cli login`, or set HF_TOKEN) where a network exists before mirroring"
)
"""How to get GPQA's files (the dataset asks that its questions not be published in plain text on the web)."""

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
        _one("piqa", "baber/piqa", "piqa/piqa.yaml", "default", "acc_norm,none", ("validation", "train")),
        _one(
            "winogrande", "allenai/winogrande", "winogrande/default.yaml", "winogrande_xl", "acc,none", ("validation",)
        ),
        _one("boolq", "aps/super_glue", "super_glue/boolq/default.yaml", "boolq", "acc,none", ("validation", "train")),
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
            overrides=MATH500_SHOTS,
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
        _one(
            "agieval_lsat_ar",
            "hails/agieval-lsat-ar",
            "agieval/lsat-ar.yaml",
            "default",
            "acc_norm,none",
            ("test",),
            overrides=(("doc_to_target", AGIEVAL_TARGET),),
        ),
        _one(
            "commonsense_qa",
            "tau/commonsense_qa",
            "commonsense_qa/default.yaml",
            "default",
            "acc,none",
            ("validation", "train"),
        ),
        _one("copa", "aps/super_glue", "super_glue/copa/default.yaml", "copa", "acc,none", ("validation", "train")),
        _one("wsc273", "lighteval/winograd_wsc", "wsc273/default.yaml", "wsc273", "acc,none", ("test",)),
        _one(
            "gpqa",
            "Idavidrein/gpqa",
            "leaderboard/gpqa/gpqa_main_zeroshot.yaml",
            "gpqa_main",
            "acc_norm,none",
            ("train",),
            access=GPQA_ACCESS,
        ),
        _one(
            "mmlu_pro",
            "TIGER-Lab/MMLU-Pro",
            "leaderboard/mmlu_pro/mmlu_pro.yaml",
            "default",
            "acc,none",
            ("test", "validation"),
        ),
    )
}
"""Every benchmark by name. MATH is MATH-500 with lm-eval's hendrycks_math scoring (minerva_math needs math_verify).

GPQA is the main set (448 questions) read by the Open LLM Leaderboard's config; its only split is train, which
that config evaluates. MMLU-Pro is the leaderboard's config too: 5-shot, the first five of the validation split.
"""


MARIN_TASK_CONFIGS = (
    "marin-community/marin experiments/evals/task_configs.py (commit 01eb4f95bb252b2f1ecd55690292b7606166e5de)"
)
"""Marin's own lm-eval task list, the best public guide to how the retrospective's columns were run."""
NOT_IN_SEEDS = "NOT IN SEEDS"
"""The mark on every choice the seeds do not state (the retrospective says only "LM Eval Harness defaults")."""
ACC_NORM_RULE = "acc_norm where lm-eval's task reports it, else acc (Marin's file names no metric)"


@dataclass(frozen=True)
class Column:
    """One column of a published table: the benchmark that fills it and how it is run, each choice with its source."""

    title: str
    """The column's title in the seeds' table."""
    benchmark: str
    """The benchmark (a key of BENCHMARKS) that fills it."""
    num_fewshot: int
    """Few-shot examples per prompt, set on the stock task config."""
    metric: str
    """The reported `metric,filter`; one the benchmark's task computes."""
    variant: str
    """The lm-eval task run (its stock YAML's `task`)."""
    source: str
    """Where the few-shot count, metric and variant come from, starting with NOT_IN_SEEDS when the seeds lack them."""

    def __post_init__(self) -> None:
        if self.num_fewshot < 0:
            raise ValueError(f"column {self.title!r}: num_fewshot must be >= 0, got {self.num_fewshot=}")
        if "," not in self.metric:
            raise ValueError(f"column {self.title!r}: metric must be 'name,filter', got {self.metric!r}")


def _marin(title: str, benchmark: str, shots: int, metric: str, variant: str, why: str) -> Column:
    return Column(title, benchmark, shots, metric, variant, f"{NOT_IN_SEEDS}: {why}")


MARIN_BASE = (
    _marin(
        "AGI Eval LSAT-AR",
        "agieval_lsat_ar",
        3,
        "acc_norm,none",
        "agieval_lsat_ar",
        f"3-shot from {MARIN_TASK_CONFIGS} CORE_TASKS; the task has only a test split, so lm-eval draws the"
        " shots from it, and (no fewshot_split set) lm-eval 0.4.13 may draw the document itself, as any stock run"
        f" does; {ACC_NORM_RULE}",
    ),
    _marin(
        "ARC Easy",
        "arc_easy",
        10,
        "acc_norm,none",
        "arc_easy",
        f"10-shot from {MARIN_TASK_CONFIGS} CORE_TASKS; {ACC_NORM_RULE}",
    ),
    _marin(
        "ARC Challenge",
        "arc_challenge",
        10,
        "acc_norm,none",
        "arc_challenge",
        f"10-shot from {MARIN_TASK_CONFIGS} CORE_TASKS; {ACC_NORM_RULE}",
    ),
    _marin(
        "BoolQ",
        "boolq",
        10,
        "acc,none",
        "boolq",
        f"10-shot from {MARIN_TASK_CONFIGS} CORE_TASKS, shots from train; {ACC_NORM_RULE}",
    ),
    _marin(
        "CommonSense QA",
        "commonsense_qa",
        10,
        "acc,none",
        "commonsense_qa",
        f"10-shot from {MARIN_TASK_CONFIGS} CORE_TASKS, shots from train, the validation split scored (the"
        f" test split has no answers); {ACC_NORM_RULE}",
    ),
    _marin(
        "COPA",
        "copa",
        0,
        "acc,none",
        "copa",
        f"0-shot from {MARIN_TASK_CONFIGS} CORE_TASKS (SuperGLUE's copa); {ACC_NORM_RULE}",
    ),
    _marin(
        "HellaSwag",
        "hellaswag",
        0,
        "acc_norm,none",
        "hellaswag",
        f"0-shot: {MARIN_TASK_CONFIGS} CORE_TASKS runs both hellaswag_0shot and hellaswag_10shot; 0-shot is"
        f" the harness default the retrospective names; {ACC_NORM_RULE}",
    ),
    _marin(
        "lambada_openai",
        "lambada_openai",
        0,
        "acc,none",
        "lambada_openai",
        f"0-shot from {MARIN_TASK_CONFIGS} CORE_TASKS; acc (lm-eval also reports perplexity)",
    ),
    _marin(
        "OpenBookQA",
        "openbookqa",
        0,
        "acc_norm,none",
        "openbookqa",
        f"0-shot from {MARIN_TASK_CONFIGS} CORE_TASKS; {ACC_NORM_RULE}",
    ),
    _marin(
        "PIQA",
        "piqa",
        10,
        "acc_norm,none",
        "piqa",
        f"10-shot from {MARIN_TASK_CONFIGS} CORE_TASKS, shots from train; {ACC_NORM_RULE}",
    ),
    _marin(
        "WinoGrande",
        "winogrande",
        0,
        "acc,none",
        "winogrande",
        f"0-shot from {MARIN_TASK_CONFIGS} CORE_TASKS (winogrande_xl); {ACC_NORM_RULE}",
    ),
    _marin(
        "WSC",
        "wsc273",
        0,
        "acc,none",
        "wsc273",
        f"wsc273, 0-shot, from {MARIN_TASK_CONFIGS} CORE_TASKS (not SuperGLUE's wsc); {ACC_NORM_RULE}",
    ),
    _marin(
        "MMLU",
        "mmlu",
        5,
        "acc,none",
        "mmlu",
        f"5-shot from dev: {MARIN_TASK_CONFIGS} runs mmlu_0shot and mmlu_5shot; 5-shot is MMLU's own protocol"
        f" (Hendrycks et al. 2021); all 57 subjects as one task, pooled by question; {ACC_NORM_RULE}",
    ),
    _marin(
        "GPQA",
        "gpqa",
        0,
        "acc_norm,none",
        "leaderboard_gpqa_main",
        f"the Open LLM Leaderboard's config on the main set, 0-shot as in {MARIN_TASK_CONFIGS}"
        " OPEN_LM_LEADERBOARD_MCQ (lb_gpqa_0shot) and the stock YAML (gpqa_main_zeroshot); issue 31's"
        " '5-shot' is not what that file says; acc_norm, the task's only metric",
    ),
    _marin(
        "BBH",
        "bbh",
        3,
        "exact_match,get-answer",
        "bbh_cot_fewshot",
        f"bbh_cot_fewshot, 3-shot (the stock CoT exemplars), from {MARIN_TASK_CONFIGS} KEY_GENERATION_TASKS;"
        " exact match after the get-answer filter, the 27 subtasks pooled by question as lm-eval's group does",
    ),
    _marin(
        "MMLU Pro",
        "mmlu_pro",
        5,
        "acc,none",
        "leaderboard_mmlu_pro",
        f"leaderboard_mmlu_pro, 5-shot (the first five of validation), from {MARIN_TASK_CONFIGS}"
        " MMLU_PRO_5_SHOT; acc, the task's only metric",
    ),
    _marin(
        "HumanEval",
        "humaneval",
        0,
        "pass_at_1,create_test",
        "humaneval",
        f"0-shot from {MARIN_TASK_CONFIGS} CODE_TASKS (its KEY_GENERATION_TASKS asks 10 shots of a task with no"
        " few-shot split); pass@1 of greedy decoding, run in tootsie's sandbox",
    ),
    _marin(
        "GSM8K",
        "gsm8k",
        5,
        "exact_match,strict-match",
        "gsm8k",
        f"gsm8k, 5-shot from train, from {MARIN_TASK_CONFIGS} MATH_TASKS (gsm8k_5shot, 'included in core"
        " tasks'; Marin also runs gsm8k_cot 8-shot); exact match on the '#### N' answer (strict-match)",
    ),
    _marin(
        "MATH",
        "math500",
        4,
        "exact_match,none",
        "hendrycks_math500",
        f"4-shot as {MARIN_TASK_CONFIGS} runs minerva_math (math_4shot); tootsie scores MATH-500 with"
        " hendrycks_math's answer check instead (minerva_math needs math_verify), and MATH-500 has only a test"
        " split, so the 4 shots are other MATH-500 problems (MATH500_SHOTS), not Minerva's fixed prompt",
    ),
)
"""The `marin-base` suite: the 32B retrospective's base-model table, column by column, in its order."""

MARIN_BASE_COLUMNS: tuple[tuple[str, str], ...] = tuple((column.title, column.benchmark) for column in MARIN_BASE)
"""The 32B retrospective's base-model table, in its column order: (the seeds' column title, benchmark name)."""

SUITE_COLUMNS = {"marin-base": MARIN_BASE}
"""Suites that stand for a published table: their columns, whose few-shot counts and metrics the runner uses."""

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
} | {name: tuple(column.benchmark for column in columns) for name, columns in SUITE_COLUMNS.items()}
"""Named task sets for `tootsie eval suite --suite NAME`; core and reasoning run each stock task as configured."""


def suite_columns(suite: str) -> dict[str, Column]:
    """The documented per-benchmark choices of a table suite (marin-base), by benchmark; empty for other suites."""
    return {column.benchmark: column for column in SUITE_COLUMNS.get(suite, ())}


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
