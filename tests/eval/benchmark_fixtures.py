"""Tiny local copies of every suite benchmark, in each Hub dataset's own schema (made up rows, not the real data).

`write_fixtures(data_dir)` writes `data_dir/<repo>/<config>/<split>.jsonl` for
every benchmark in `tootsie.eval.benchmarks.BENCHMARKS`, the layout
`tootsie eval mirror` writes, with 5 rows per split (enough for 5-shot prompts).
"""

import json
from pathlib import Path
from typing import Any

from tootsie.eval.benchmarks import BENCHMARKS

ROWS = 5
WORDS = ("red", "blue", "green", "small", "large")


def arc(index: int) -> dict[str, Any]:
    """allenai/ai2_arc: id, question, choices {text, label}, answerKey."""
    texts = [f"the {word} one" for word in WORDS[:4]]
    if index % 2:
        texts[index % 4] = "it"  # the shortest choice, so a length-preferring scorer differs by document
    return {
        "id": f"q{index}",
        "question": f"Which {WORDS[index]} thing grows fastest {index}?",
        "choices": {"text": texts, "label": ["A", "B", "C", "D"]},
        "answerKey": "ABCD"[index % 4],
    }


def hellaswag(index: int) -> dict[str, Any]:
    """Rowan/hellaswag: activity_label, ctx_a, ctx_b, endings, label (a string), and the rest."""
    return {
        "ind": index,
        "activity_label": "Cooking",
        "ctx_a": f"A man puts {WORDS[index]} eggs in a pan.",
        "ctx_b": "he",
        "ctx": f"A man puts {WORDS[index]} eggs in a pan. he",
        "endings": ["stirs them slowly.", "sings [title] a song.", "flies away.", "reads a book."],
        "source_id": f"activitynet~v_{index}",
        "split": "val",
        "split_type": "indomain",
        "label": str(index % 4),
    }


def piqa(index: int) -> dict[str, Any]:
    """baber/piqa: goal, sol1, sol2, label."""
    return {"goal": f"To dry {WORDS[index]} socks", "sol1": "hang them up.", "sol2": "soak them.", "label": index % 2}


def winogrande(index: int) -> dict[str, Any]:
    """allenai/winogrande: sentence with one `_`, option1, option2, answer ("1" or "2")."""
    return {
        "sentence": f"The {WORDS[index]} cup did not fit in the box because the _ was too big.",
        "option1": "cup",
        "option2": "box",
        "answer": "1" if index % 2 == 0 else "2",
    }


def boolq(index: int) -> dict[str, Any]:
    """aps/super_glue boolq: question, passage, idx, label."""
    return {
        "question": f"is the sky {WORDS[index]}",
        "passage": "The sky looks blue on a clear day.",
        "idx": index,
        "label": int(WORDS[index] == "blue"),
    }


def openbookqa(index: int) -> dict[str, Any]:
    """allenai/openbookqa main: id, question_stem, choices {text, label}, answerKey."""
    row = arc(index)
    return {"id": row["id"], "question_stem": row["question"], "choices": row["choices"], "answerKey": row["answerKey"]}


def lambada(index: int) -> dict[str, Any]:
    """EleutherAI/lambada_openai: text (its last word is the target)."""
    return {"text": f"She opened the {WORDS[index]} door and saw her dog"}


def gsm8k(index: int) -> dict[str, Any]:
    """openai/gsm8k main: question, answer (a rationale ending `#### N`)."""
    return {
        "question": f"Tom has {index + 2} apples and buys 3 more. How many apples does he have?",
        "answer": f"Tom has {index + 2} + 3 = <<{index + 2}+3={index + 5}>>{index + 5} apples.\n#### {index + 5}",
    }


def math500(index: int) -> dict[str, Any]:
    """HuggingFaceH4/MATH-500: problem, solution (with a \\boxed answer), answer, subject, level, unique_id."""
    return {
        "problem": f"What is ${index} + 1$?",
        "solution": f"We add: ${index} + 1 = \\boxed{{{index + 1}}}$.",
        "answer": str(index + 1),
        "subject": "Prealgebra",
        "level": 1,
        "unique_id": f"test/prealgebra/{index}.json",
    }


def mmlu(index: int) -> dict[str, Any]:
    """cais/mmlu all: question, subject, choices, answer (an index)."""
    return {
        "question": f"What colour is item {index}?",
        "subject": ("anatomy", "high_school_physics")[index % 2],
        "choices": list(WORDS[:4]),
        "answer": index % 4,
    }


def bbh(index: int) -> dict[str, Any]:
    """SaylorTwift/bbh (every subtask): input, target."""
    return {"input": f"not ( True ) and ( {('True', 'False')[index % 2]} ) is", "target": "False"}


def humaneval(index: int) -> dict[str, Any]:
    """openai/openai_humaneval: task_id, prompt, canonical_solution, test, entry_point."""
    return {
        "task_id": f"HumanEval/{index}",
        "prompt": f'def add_{index}(a, b):\n    """Return a + b + {index}."""\n',
        "canonical_solution": f"    return a + b + {index}\n",
        "test": f"def check(candidate):\n    assert candidate(1, 2) == {3 + index}\n",
        "entry_point": f"add_{index}",
    }


ROW_MAKERS = {
    "arc_easy": arc,
    "arc_challenge": arc,
    "hellaswag": hellaswag,
    "piqa": piqa,
    "winogrande": winogrande,
    "boolq": boolq,
    "openbookqa": openbookqa,
    "lambada_openai": lambada,
    "gsm8k": gsm8k,
    "math500": math500,
    "mmlu": mmlu,
    "bbh": bbh,
    "humaneval": humaneval,
}


def write_fixtures(data_dir: Path, names: tuple[str, ...] = tuple(BENCHMARKS)) -> list[Path]:
    """Write ROWS rows per split for each named benchmark; return the files."""
    written = []
    for name in names:
        benchmark = BENCHMARKS[name]
        for subtask in benchmark.subtasks:
            for split in benchmark.splits:
                path = Path(data_dir) / benchmark.repo / subtask.config / f"{split}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("".join(json.dumps(ROW_MAKERS[name](i)) + "\n" for i in range(ROWS)))
                written.append(path)
    return written


def fixture_texts() -> list[str]:
    """Every string in the fixtures, for training a tokenizer that covers them."""
    texts = []
    for maker in ROW_MAKERS.values():
        for index in range(ROWS):
            texts.extend(str(value) for value in maker(index).values())
    return texts
