"""Synthetic text for the tiny recipes and case studies: grade-school math and instruction/response pairs.

The stdlib corpus (`tootsie.corpora.stdlib_source`) gives real code and prose,
but the recipes' mixtures also weight math (FineMath, MegaMath, ProofPile 2,
Dolmino math) and instruction data (FLAN, Tulu, StackExchange, science QA),
which a Python install does not hold. These generators make stand-ins from a
seeded `numpy.random.Generator`, so the same seed gives the same text on every
machine:

- `math_problem`: a GSM8K-style word problem and its integer answer, from the
  shared generator `tootsie.corpora.arithmetic` (ten templates, worked
  solutions in GSM8K's and OLMES's formats); the question and answer only, so
  the draws, and the tiny corpus, are those of the templates that lived here.
- `math_document`: a few problems with worked answers, plus an arithmetic drill.
- `instruction_document`: FLAN-style instruction/response pairs over small
  word and number tasks.

Example: `math_problem(numpy.random.default_rng(0))` returns a question such as
"On Friday, Maya bought 7 packs of pencils with 12 pencils in each pack. How
many pencils did Maya buy on Friday?" and its answer 84.
"""

import numpy as np

from tootsie.corpora.arithmetic import pick, word_problem

WORDS = (
    "apple",
    "river",
    "garden",
    "window",
    "silver",
    "planet",
    "forest",
    "candle",
    "market",
    "pencil",
    "rocket",
    "yellow",
    "bridge",
    "island",
    "violin",
    "orange",
    "shadow",
    "marble",
    "winter",
    "button",
    "castle",
    "dragon",
    "meadow",
    "copper",
    "lantern",
    "harbor",
)


def math_problem(rng: np.random.Generator) -> tuple[str, int]:
    """A GSM8K-style word problem (`corpora.arithmetic.word_problem`: one of ten templates) and its integer answer."""
    problem = word_problem(rng)
    return problem.question, problem.answer


def math_document(rng: np.random.Generator) -> str:
    """Two to five worked word problems followed by an arithmetic drill."""
    parts = []
    for _ in range(int(rng.integers(2, 6))):
        question, answer = math_problem(rng)
        parts.append(f"Question: {question}\nAnswer: The answer is {answer}.")
    drill = []
    for _ in range(int(rng.integers(3, 8))):
        a, b = int(rng.integers(2, 100)), int(rng.integers(2, 100))
        op = pick(rng, ("+", "-", "*"))
        drill.append(f"{a} {op} {b} = {a + b if op == '+' else a - b if op == '-' else a * b}")
    parts.append("Practice: " + "; ".join(drill) + ".")
    return "\n\n".join(parts)


def _task(rng: np.random.Generator) -> tuple[str, str]:
    kind = int(rng.integers(6))
    if kind == 0:
        # Sorted before the random key: a set's iteration order follows PYTHONHASHSEED, the rng's draws must not.
        distinct = sorted({pick(rng, WORDS) for _ in range(int(rng.integers(3, 6)))})
        words = sorted(distinct, key=lambda _: rng.random())
        return f"Sort these words alphabetically: {', '.join(words)}.", ", ".join(sorted(words)) + "."
    if kind == 1:
        word = pick(rng, WORDS)
        return f"Reverse the word '{word}'.", word[::-1]
    if kind == 2:
        word = pick(rng, WORDS)
        return f"How many letters are in the word '{word}'?", str(len(word))
    if kind == 3:
        a = int(rng.integers(2, 90))
        return f"Convert {a} kilometers to meters.", f"{a} kilometers is {a * 1000} meters."
    if kind == 4:
        a, b = (int(x) for x in rng.choice(1000, size=2, replace=False))
        return f"Which is larger, {a} or {b}?", f"{max(a, b)} is larger."
    word = pick(rng, WORDS)
    return f"Write the word '{word}' in capital letters.", word.upper()


def instruction_document(rng: np.random.Generator) -> str:
    """Two to six instruction/response pairs (FLAN-style small tasks)."""
    pairs = [_task(rng) for _ in range(int(rng.integers(2, 7)))]
    return "\n\n".join(f"Instruction: {instruction}\nResponse: {response}" for instruction, response in pairs)
