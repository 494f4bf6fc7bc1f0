"""OLMES-style prompt variants of lm-eval tasks, as edits of the stock task config.

OLMES (Gu et al. 2024, "OLMES: A Standard for Language Model Evaluations")
fixes one prompt per task: "Question: ... Answer:" prompts, 5 curated shots,
and for multiple-choice tasks a choice between the cloze formulation (score
each answer text, lm-eval's default) and the MC formulation (list the options
as " A. text" lines and score the letter). GSM8K is 8-shot chain of thought
(the Wei et al. exemplars) in "Question:/Answer:" form, each ending
"So the answer is N.", the answer extracted from that phrase.

Each variant here takes lm-eval's stock config of the task (a dict, its
`!function` fields already resolved) and returns the OLMES-style config with
the same data and task logic otherwise, so the two formats differ only in the
prompt. These are OLMES-style, not the OLMES code: the shots come from the
task's own few-shot split (first 5, `first_n`) rather than OLMES's curated
lists, except GSM8K, whose 8 exemplars are lm-eval's `gsm8k-cot` ones.
"""

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lm_eval.tasks
from lm_eval.tasks._yaml_loader import load_yaml

LETTERS = "ABCDEFGHIJ"
MC_SHOTS = 5
"""Few-shot examples in OLMES's multiple-choice prompts (OLMES uses 5 for every MC task)."""
GSM8K_SHOTS = 8
"""OLMES's GSM8K shots: the 8 chain-of-thought exemplars of Wei et al. (2022)."""

ACC = [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]


def _options(texts: str) -> str:
    """Jinja lines " A. text" for a list expression `texts`, letters by position (ARC's labels may be digits)."""
    return f"{{% for text in {texts} %}} {{{{ '{LETTERS}'[loop.index0] }}}}. {{{{ text }}}}\n{{% endfor %}}"


def _mc(config: dict[str, Any], question: str, texts: str, target: str, fewshot_split: str) -> dict[str, Any]:
    return config | {
        "doc_to_text": f"Question: {question}\n{_options(texts)}Answer:",
        "doc_to_choice": f"{{{{ '{LETTERS}'[:{texts}|length] | list }}}}",
        "doc_to_target": target,
        "target_delimiter": " ",
        "num_fewshot": MC_SHOTS,
        "fewshot_split": fewshot_split,
        "fewshot_config": {"sampler": "first_n"},
        "metric_list": ACC,
    }


def arc_mc(config: dict[str, Any]) -> dict[str, Any]:
    """ARC in OLMES's MC formulation: the question, lettered options, " A"-style answers, 5 shots from train."""
    return _mc(config, "{{question}}", "choices.text", "{{choices.label.index(answerKey)}}", "train")


def hellaswag_mc(config: dict[str, Any]) -> dict[str, Any]:
    """HellaSwag in MC formulation over lm-eval's preprocessed `query`/`choices`, 5 shots from train."""
    return _mc(config, "{{query}}", "choices", "{{label}}", "train")


def mmlu_mc(config: dict[str, Any]) -> dict[str, Any]:
    """MMLU with OLMES's "Question:" prefix and " A." options, 5 shots from dev (lm-eval's default is 0-shot)."""
    return _mc(config, "{{question.strip()}}", "choices", "{{answer}}", "dev")


def gsm8k_cot(config: dict[str, Any]) -> dict[str, Any]:
    """GSM8K as OLMES runs it: 8-shot CoT, "Question:/Answer:", answers ending "So the answer is N."."""
    cot = load_yaml(Path(lm_eval.tasks.__file__).parent / "gsm8k" / "gsm8k-cot.yaml", resolve_func=False)
    shots = [
        {"question": shot["question"], "target": re.sub(r"The answer is", "So the answer is", shot["target"])}
        for shot in cot["fewshot_config"]["samples"][:GSM8K_SHOTS]
    ]
    return config | {
        "doc_to_text": "Question: {{question}}\nAnswer:",
        "doc_to_target": "{{answer.split('####')[-1].strip() if answer is defined else target}}",
        "fewshot_config": {"sampler": "first_n", "samples": shots},
        "fewshot_split": None,
        "num_fewshot": GSM8K_SHOTS,
        "generation_kwargs": {"until": ["Question:", "</s>", "<|im_end|>", "\n\n"], "do_sample": False},
        "filter_list": [
            {
                "name": "strict-match",
                "filter": [
                    {"function": "regex", "regex_pattern": r"So the answer is (\-?[0-9\.\,]+)"},
                    {"function": "take_first"},
                ],
            },
            {
                "name": "flexible-extract",
                "filter": [
                    {"function": "regex", "group_select": -1, "regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)"},
                    {"function": "take_first"},
                ],
            },
        ],
    }


VARIANTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "arc_mc": arc_mc,
    "hellaswag_mc": hellaswag_mc,
    "mmlu_mc": mmlu_mc,
    "gsm8k_cot": gsm8k_cot,
}
"""OLMES-style variants by the name a `Benchmark.olmes` gives."""

HEADLINE = {
    "arc_mc": "acc,none",
    "hellaswag_mc": "acc,none",
    "mmlu_mc": "acc,none",
    "gsm8k_cot": "exact_match,strict-match",
}
"""Each variant's reported metric (MC formulations score one letter, so acc and acc_norm agree)."""
