"""Made-up benchmark rows in each Hub dataset's own schema, for offline runs and tests (not the real data).

`write_benchmark_rows(data_dir, names, rows)` writes the layout `tootsie eval
mirror` writes, `DATA_DIR/<repo>/<config>/<split>.jsonl` for every split each
named benchmark reads, and records the files' sha256 in `DATA_DIR/manifest.json`,
so `tootsie eval suite` and `tootsie eval crosscheck` run on it without a
network. The rows are invented: scores on them say nothing about a model's
ability, only whether two scoring paths agree and whether scoring works.

Every row is drawn from `random.Random(f"{benchmark}/{split}/{index}")`, so the
bytes are the same on every machine and run, and rows differ from each other:
the gold answer's position, the number of choices where the schema allows it,
and the lengths of questions and answers all vary, so a scorer that ignores the
text (always "A", always the shortest choice) cannot get every row right.

Worked example: `write_benchmark_rows(d, ["arc_easy"], rows=50)` writes
`d/allenai/ai2_arc/ARC-Easy/test.jsonl` and `.../train.jsonl`, 50 rows each of
`{"id", "question", "choices": {"text", "label"}, "answerKey"}` with 3 to 5
choices, and lists both files in `d/manifest.json`.
"""

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tootsie.errors import TootsieError
from tootsie.eval.benchmark_data import MANIFEST_FILE, record_files
from tootsie.eval.benchmarks import BENCHMARKS
from tootsie.jsonfile import read_json

WORDS = (
    "red",
    "blue",
    "green",
    "small",
    "large",
    "river",
    "stone",
    "garden",
    "window",
    "teacher",
    "bottle",
    "morning",
    "quiet",
    "heavy",
    "bright",
    "paper",
    "engine",
    "forest",
    "market",
    "winter",
)
"""The vocabulary every made-up text is drawn from (short, so a tiny test tokenizer covers it)."""

Row = dict[str, Any]
Maker = Callable[[random.Random, int], Row]


def _phrase(rng: random.Random, low: int, high: int) -> str:
    """Between `low` and `high` words from WORDS, so texts differ in length."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _options(rng: random.Random, count: int) -> list[str]:
    """`count` distinct phrases of 1 to 6 words (distinct so exactly one choice is gold)."""
    options: list[str] = []
    while len(options) < count:
        option = _phrase(rng, 1, 6)
        if option not in options:
            options.append(option)
    return options


def arc(rng: random.Random, index: int) -> Row:
    """allenai/ai2_arc: id, question, choices {text, label}, answerKey (3 to 5 choices, as in ARC)."""
    count = rng.choice((3, 4, 4, 5))
    labels = list("ABCDE"[:count]) if rng.random() < 0.8 else [str(i + 1) for i in range(count)]
    return {
        "id": f"q{index}",
        "question": f"Which {_phrase(rng, 1, 8)} thing is {_phrase(rng, 1, 3)}?",
        "choices": {"text": _options(rng, count), "label": labels},
        "answerKey": rng.choice(labels),
    }


def hellaswag(rng: random.Random, index: int) -> Row:
    """Rowan/hellaswag: activity_label, ctx_a, ctx_b, endings, label (a string), and the rest."""
    ctx_a, ctx_b = f"A man puts the {_phrase(rng, 1, 6)} on the table.", rng.choice(("he", "she", "they"))
    return {
        "ind": index,
        "activity_label": rng.choice(("Cooking", "Gardening", "Painting")),
        "ctx_a": ctx_a,
        "ctx_b": ctx_b,
        "ctx": f"{ctx_a} {ctx_b}",
        "endings": [f"{ending}." for ending in _options(rng, 4)],
        "source_id": f"activitynet~v_{index}",
        "split": "val",
        "split_type": "indomain",
        "label": str(rng.randrange(4)),
    }


def piqa(rng: random.Random, index: int) -> Row:
    """baber/piqa: goal, sol1, sol2, label."""
    sol1, sol2 = _options(rng, 2)
    return {"goal": f"To {_phrase(rng, 1, 5)}", "sol1": f"{sol1}.", "sol2": f"{sol2}.", "label": rng.randrange(2)}


def winogrande(rng: random.Random, index: int) -> Row:
    """allenai/winogrande: sentence with one `_`, option1, option2, answer ("1" or "2")."""
    option1, option2 = _options(rng, 2)
    return {
        "sentence": f"The {option1} did not fit in the {option2} because the _ was too {_phrase(rng, 1, 4)}.",
        "option1": option1,
        "option2": option2,
        "answer": rng.choice(("1", "2")),
    }


def boolq(rng: random.Random, index: int) -> Row:
    """aps/super_glue boolq: question, passage, idx, label."""
    return {
        "question": f"is the {_phrase(rng, 1, 5)} {rng.choice(WORDS)}",
        "passage": f"The {_phrase(rng, 2, 12)} looks {rng.choice(WORDS)} on a clear day.",
        "idx": index,
        "label": rng.randrange(2),
    }


def openbookqa(rng: random.Random, index: int) -> Row:
    """allenai/openbookqa main: id, question_stem, choices {text, label} (4, A-D), answerKey."""
    return {
        "id": f"{index}-{rng.randrange(1000)}",
        "question_stem": f"The {_phrase(rng, 1, 8)} is",
        "choices": {"text": _options(rng, 4), "label": list("ABCD")},
        "answerKey": rng.choice("ABCD"),
    }


def lambada(rng: random.Random, index: int) -> Row:
    """EleutherAI/lambada_openai: text (its last word is the target)."""
    return {"text": f"She opened the {_phrase(rng, 1, 10)} door and saw her {rng.choice(WORDS)}"}


def gsm8k(rng: random.Random, index: int) -> Row:
    """openai/gsm8k main: question, answer (a rationale ending `#### N`)."""
    have, buy = rng.randint(2, 90), rng.randint(1, 90)
    total = have + buy
    return {
        "question": f"Tom has {have} {rng.choice(WORDS)} apples and buys {buy} more. How many apples does he have?",
        "answer": f"Tom has {have} + {buy} = <<{have}+{buy}={total}>>{total} apples.\n#### {total}",
    }


def math500(rng: random.Random, index: int) -> Row:
    """HuggingFaceH4/MATH-500: problem, solution (with a \\boxed answer), answer, subject, level, unique_id."""
    a, b = rng.randint(1, 500), rng.randint(1, 500)
    return {
        "problem": f"What is ${a} + {b}$?",
        "solution": f"We add: ${a} + {b} = \\boxed{{{a + b}}}$.",
        "answer": str(a + b),
        "subject": rng.choice(("Prealgebra", "Algebra")),
        "level": rng.randint(1, 5),
        "unique_id": f"test/prealgebra/{index}.json",
    }


def mmlu(rng: random.Random, index: int) -> Row:
    """cais/mmlu all: question, subject, choices (4), answer (an index)."""
    return {
        "question": f"What is the {_phrase(rng, 1, 8)}?",
        "subject": rng.choice(("anatomy", "high_school_physics", "world_religions")),
        "choices": _options(rng, 4),
        "answer": rng.randrange(4),
    }


def bbh(rng: random.Random, index: int) -> Row:
    """SaylorTwift/bbh (every subtask): input, target (here a truth value of a nested boolean expression)."""
    value = rng.choice((True, False))
    expression = f"( {value} )"
    for _ in range(rng.randint(2, 5)):
        term, negate, operator = rng.choice((True, False)), rng.random() < 0.3, rng.choice(("and", "or"))
        operand = (not term) if negate else term
        value = (value and operand) if operator == "and" else (value or operand)
        expression = f"( {expression} {operator} {'not ' if negate else ''}{term} )"
    return {"input": f"{expression} is", "target": str(value)}


def humaneval(rng: random.Random, index: int) -> Row:
    """openai/openai_humaneval: task_id, prompt, canonical_solution, test, entry_point."""
    offset, a, b = rng.randint(0, 50), rng.randint(1, 9), rng.randint(1, 9)
    return {
        "task_id": f"HumanEval/{index}",
        "prompt": f'def add_{index}(a, b):\n    """Return a + b + {offset}."""\n',
        "canonical_solution": f"    return a + b + {offset}\n",
        "test": f"def check(candidate):\n    assert candidate({a}, {b}) == {a + b + offset}\n",
        "entry_point": f"add_{index}",
    }


def agieval_lsat_ar(rng: random.Random, index: int) -> Row:
    """hails/agieval-lsat-ar: query (passage, question, lettered choices, "A: Among A through E, the answer is"),
    choices ("(A)..." strings), gold (a one-item list of the right choice's index)."""
    choices = [f"({letter}){option}" for letter, option in zip("ABCDE", _options(rng, 5), strict=True)]
    return {
        "query": f"Q: Exactly {rng.randint(3, 9)} of the {_phrase(rng, 2, 12)} are chosen. Which one could be"
        f" {_phrase(rng, 1, 4)}? Answer Choices: {' '.join(choices)}\nA: Among A through E, the answer is",
        "choices": choices,
        "gold": [rng.randrange(5)],
    }


def commonsense_qa(rng: random.Random, index: int) -> Row:
    """tau/commonsense_qa: id, question, question_concept, choices {label A-E, text}, answerKey."""
    concept = rng.choice(WORDS)
    return {
        "id": f"{index:032x}",
        "question": f"Where would you put a {concept} {_phrase(rng, 0, 8)}?",
        "question_concept": concept,
        "choices": {"label": list("ABCDE"), "text": _options(rng, 5)},
        "answerKey": rng.choice("ABCDE"),
    }


def copa(rng: random.Random, index: int) -> Row:
    """aps/super_glue copa: premise (ending in "."), choice1, choice2, question (cause/effect), idx, label."""
    choice1, choice2 = (f"The {option} moved." for option in _options(rng, 2))
    return {
        "premise": f"The {_phrase(rng, 1, 8)} fell over.",
        "choice1": choice1,
        "choice2": choice2,
        "question": rng.choice(("cause", "effect")),
        "idx": index,
        "label": rng.randrange(2),
    }


def wsc273(rng: random.Random, index: int) -> Row:
    """lighteval/winograd_wsc wsc273: text, pronoun, pronoun_loc, quote, quote_loc, options, label, source."""
    first, second = _options(rng, 2)
    prefix, pronoun = f"The {first} could not lift the {second} because ", rng.choice(("it", "they"))
    rest = f" was too {_phrase(rng, 1, 5)}."
    return {
        "text": f"{prefix}{pronoun}{rest}",
        "pronoun": pronoun,
        "pronoun_loc": len(prefix),
        "quote": f"{pronoun}{rest}",
        "quote_loc": len(prefix),
        "options": [f"the {first}", f"the {second}"],
        "label": rng.randrange(2),
        "source": "made up",
    }


def gpqa(rng: random.Random, index: int) -> Row:
    """Idavidrein/gpqa gpqa_main: Question, Correct Answer, Incorrect Answer 1-3, Explanation, domains, Record ID."""
    right, *wrong = _options(rng, 4)
    return {
        "Record ID": f"rec{index:05d}",
        "Question": f"Which {_phrase(rng, 1, 10)} explains the {rng.choice(WORDS)} result?",
        "Correct Answer": right,
        "Incorrect Answer 1": wrong[0],
        "Incorrect Answer 2": wrong[1],
        "Incorrect Answer 3": wrong[2],
        "Explanation": f"Because {_phrase(rng, 2, 8)}.",
        "Subdomain": rng.choice(("Physics (general)", "Organic Chemistry", "Molecular Biology")),
        "High-level domain": rng.choice(("Physics", "Chemistry", "Biology")),
    }


def mmlu_pro(rng: random.Random, index: int) -> Row:
    """TIGER-Lab/MMLU-Pro: question_id, question, options (up to 10), answer (a letter), answer_index, cot_content,
    category, src."""
    count = rng.choice((4, 7, 10, 10))
    answer = rng.randrange(count)
    return {
        "question_id": index,
        "question": f"What is the {_phrase(rng, 1, 10)}?",
        "options": _options(rng, count),
        "answer": "ABCDEFGHIJ"[answer],
        "answer_index": answer,
        "cot_content": "",
        "category": rng.choice(("physics", "law", "history")),
        "src": "made up",
    }


ROW_MAKERS: dict[str, Maker] = {
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
    "agieval_lsat_ar": agieval_lsat_ar,
    "commonsense_qa": commonsense_qa,
    "copa": copa,
    "wsc273": wsc273,
    "gpqa": gpqa,
    "mmlu_pro": mmlu_pro,
}
"""The row maker of every benchmark, in its Hub dataset's schema."""


def benchmark_rows(name: str, split: str, rows: int) -> list[Row]:
    """`rows` made-up rows of benchmark `name`'s `split`, the same on every call."""
    if name not in ROW_MAKERS:
        raise TootsieError(f"no made-up rows for benchmark {name!r}; known: {sorted(ROW_MAKERS)}")
    return [ROW_MAKERS[name](random.Random(f"{name}/{split}/{index}"), index) for index in range(rows)]


def write_benchmark_rows(data_dir: Path, names: Sequence[str], rows: int = 50) -> list[Path]:
    """Write `rows` made-up rows per split of each named benchmark in the mirror layout, with sha256s; return the files.

    Deterministic bytes, so a manifest written on one machine checks a copy made on another. The manifest marks
    each file `made_up`; a file the manifest records as mirrored from the Hub is never overwritten.
    """
    if rows < 1:
        raise TootsieError(f"rows must be at least 1, got {rows=}")
    mirrored = (read_json(Path(data_dir) / MANIFEST_FILE) or {"files": {}})["files"]
    written, sources = [], {}
    for name in names:
        if name not in BENCHMARKS:
            raise TootsieError(f"unknown benchmark {name!r}; benchmarks: {sorted(BENCHMARKS)}")
        benchmark = BENCHMARKS[name]
        for subtask in benchmark.subtasks:
            for split in benchmark.splits:
                path = Path(data_dir) / benchmark.repo / subtask.config / f"{split}.jsonl"
                key = path.relative_to(data_dir).as_posix()
                if "repo" in mirrored.get(key, {}):
                    raise TootsieError(
                        f"{path} holds data mirrored from {mirrored[key]['repo']} (see {MANIFEST_FILE});"
                        " refusing to overwrite it with made-up rows: write them into another directory"
                    )
                path.parent.mkdir(parents=True, exist_ok=True)
                lines = (json.dumps(row, sort_keys=True) + "\n" for row in benchmark_rows(name, split, rows))
                path.write_text("".join(lines), encoding="utf-8")
                written.append(path)
                sources[key] = {"made_up": name, "split": split, "rows": rows}
    record_files(Path(data_dir), written, sources)
    return written
