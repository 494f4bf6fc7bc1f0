"""Synthetic arithmetic word problems with worked solutions, rendered in GSM8K's (LM-Eval) or OLMES's format.

One generator serves every consumer of grade-school math: the tiny corpus's
math documents (`recipes.tiny.text.math_problem`), the cached-contamination
case study, the format-contamination phenomenon and RL's arithmetic
environment. `word_problem(rng)` draws one of ten templates from a seeded
`numpy.random.Generator` and returns a `WordProblem`: the question, the worked
solution as `SolutionStep`s (connecting text around one `Calculation`
`a op b = result` each) and the integer answer, the last step's result. The
same rng state gives the same problem, consuming the same draws, on every
machine; the solution adds no draws, so the questions and the rng stream are
those the tiny corpus was first built with.

Each template's fixed stretches are at most a few words long (a name, an
object, a day or a number every few words, the question's tail included), so
two problems from the same template share a word 13-gram only when every slot
inside that window has the same value: 13-gram decontamination tells a copied
test item from a sibling.

Two renderings of the solution, after the two harnesses the 32B retrospective
compares on GSM8K:

- `gsm8k_solution`: GSM8K's own answers, which LM-Eval's default prompt
  uses: every calculation carries a calculator tag, the answer ends `#### N`;
- `olmes_solution`: the same reasoning without the tags, ending
  `So the answer is N.` (OLMES's, and Dolmino's, GSM8K format).

Example: `word_problem(numpy.random.default_rng(1))` is a `wage` problem
whose question reads "Ivan earns 9 dollars an hour at the store and works 3
hours on Sunday. How much does Ivan earn at the store on Sunday?";
`gsm8k_solution` gives "Ivan earns 9 * 3 = <<9*3=27>>27 dollars on
Sunday.\n#### 27" and `olmes_solution` "Ivan earns 9 * 3 = 27 dollars on
Sunday.\nSo the answer is 27.".
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

NAMES = (
    "Maya",
    "Liam",
    "Noah",
    "Emma",
    "Ava",
    "Lucas",
    "Mia",
    "Ethan",
    "Zoe",
    "Omar",
    "Priya",
    "Kenji",
    "Sofia",
    "Mateo",
    "Leila",
    "Ivan",
    "Grace",
    "Hugo",
    "Nora",
    "Felix",
    "Amara",
    "Tariq",
    "Elena",
    "Jonas",
    "Wei",
    "Rosa",
    "Diego",
    "Hana",
    "Samir",
    "Ingrid",
)
ITEMS = (
    "apples",
    "pencils",
    "marbles",
    "stickers",
    "cookies",
    "books",
    "stamps",
    "shells",
    "cards",
    "buttons",
    "oranges",
    "crayons",
    "coins",
    "beads",
    "tickets",
    "muffins",
    "plums",
    "candles",
    "ribbons",
    "blocks",
)
CONTAINERS = ("box", "basket", "jar", "bag", "crate", "drawer", "bucket", "tin")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
GROUPS = ("friends", "children", "teams", "neighbors", "classmates", "cousins")
SHOPS = ("market", "bakery", "shop", "kiosk", "store", "stall")
SUBJECTS = ("music", "soccer", "chess", "painting", "science", "history", "swimming", "drama")

OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a // b,
}
"""GSM8K's operators (integer division only where it is exact)."""
GSM8K_ANSWER = re.compile(r"#### (-?\d+)")
"""LM-Eval's strict match on GSM8K: the number after `#### `."""
OLMES_ANSWER = re.compile(r"So the answer is (-?\d+)")
"""OLMES's GSM8K answer: the number after `So the answer is `."""


@dataclass(frozen=True)
class Calculation:
    """One arithmetic step `a op b = result`."""

    a: int
    """Left operand."""
    op: str
    """One of OPERATIONS."""
    b: int
    """Right operand."""

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise ValueError(f"op {self.op!r} is not one of {', '.join(OPERATIONS)}")
        if self.op == "/" and (self.b == 0 or self.a % self.b):
            raise ValueError(f"{self.a} / {self.b} is not an exact integer division; draw operands that divide")

    @property
    def result(self) -> int:
        """The value of `a op b`."""
        return OPERATIONS[self.op](self.a, self.b)


@dataclass(frozen=True)
class SolutionStep:
    """One sentence of a worked solution: `before`, the calculation and its result, then `after`."""

    before: str
    """Text leading up to the calculation (ends with a space)."""
    calculation: Calculation
    """The step's arithmetic."""
    after: str
    """Text after the result (units, the sentence's end)."""


@dataclass(frozen=True)
class WordProblem:
    """A word problem, its worked solution and its integer answer."""

    template: str
    """Which template drew it (`TEMPLATES` key)."""
    question: str
    """The question, as a student reads it."""
    steps: tuple[SolutionStep, ...]
    """The worked solution, one calculation per step."""

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError(f"a word problem needs at least one solution step; {self.template!r} gave none")

    @property
    def answer(self) -> int:
        """The final answer: the last step's result."""
        return self.steps[-1].calculation.result


def _step(before: str, a: int, op: str, b: int, after: str) -> SolutionStep:
    return SolutionStep(before, Calculation(a, op, b), after)


def _sentence(step: SolutionStep, tagged: bool) -> str:
    calc = step.calculation
    tag = f"<<{calc.a}{calc.op}{calc.b}={calc.result}>>" if tagged else ""
    return f"{step.before}{calc.a} {calc.op} {calc.b} = {tag}{calc.result}{step.after}"


def gsm8k_solution(problem: WordProblem) -> str:
    """The solution as GSM8K (LM-Eval's default prompt) writes it: calculator tags, then `#### N`."""
    return "\n".join(_sentence(step, tagged=True) for step in problem.steps) + f"\n#### {problem.answer}"


def olmes_solution(problem: WordProblem) -> str:
    """The solution as OLMES writes GSM8K: the same sentences without tags, then `So the answer is N.`."""
    return "\n".join(_sentence(step, tagged=False) for step in problem.steps) + f"\nSo the answer is {problem.answer}."


SOLUTION_FORMATS: dict[str, Callable[[WordProblem], str]] = {"gsm8k": gsm8k_solution, "olmes": olmes_solution}
"""Format name → its renderer: `gsm8k` (LM-Eval's tagged GSM8K) and `olmes` (untagged)."""
ANSWER_PATTERNS = {"gsm8k": GSM8K_ANSWER, "olmes": OLMES_ANSWER}
"""Format name → the pattern its harness extracts the final answer with."""


def prompt(question: str) -> str:
    """`Question: ...\\nAnswer:`, the zero-shot prompt both harnesses put before a GSM8K solution."""
    return f"Question: {question}\nAnswer:"


def document(problem: WordProblem, solution_format: str) -> str:
    """The prompt followed by the solution in `solution_format` (a key of SOLUTION_FORMATS)."""
    if solution_format not in SOLUTION_FORMATS:
        raise ValueError(f"solution_format {solution_format!r} is not one of {', '.join(SOLUTION_FORMATS)}")
    return f"{prompt(problem.question)} {SOLUTION_FORMATS[solution_format](problem)}"


def problem_record(problem: WordProblem) -> dict[str, object]:
    """A JSON-ready record of `problem` (`problem_from_record` reads it back): question, steps, answer."""
    return {
        "template": problem.template,
        "question": problem.question,
        "steps": [
            {"before": s.before, "a": s.calculation.a, "op": s.calculation.op, "b": s.calculation.b, "after": s.after}
            for s in problem.steps
        ],
        "answer": problem.answer,
    }


def problem_from_record(record: dict[str, object]) -> WordProblem:
    """The `WordProblem` a `problem_record` holds (its answer is recomputed from the steps)."""
    return WordProblem(
        str(record["template"]),
        str(record["question"]),
        tuple(
            _step(str(s["before"]), int(s["a"]), str(s["op"]), int(s["b"]), str(s["after"])) for s in record["steps"]
        ),
    )


def extract_answer(text: str, solution_format: str) -> int | None:
    """The final answer a harness reads from generated `text` in `solution_format`, None when it finds none."""
    match = ANSWER_PATTERNS[solution_format].search(text)
    return int(match.group(1)) if match else None


def pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    """One of `options`, uniformly (one draw)."""
    return options[int(rng.integers(len(options)))]


def _name_pair(rng: np.random.Generator) -> tuple[str, str]:
    first, second = rng.choice(len(NAMES), size=2, replace=False)
    return NAMES[first], NAMES[second]


def _two(rng: np.random.Generator, options: tuple[str, ...]) -> tuple[str, str]:
    first, second = rng.choice(len(options), size=2, replace=False)
    return options[first], options[second]


def _more(rng: np.random.Generator) -> WordProblem:
    (name, other), item, a, b = _name_pair(rng), pick(rng, ITEMS), int(rng.integers(3, 60)), int(rng.integers(2, 40))
    return WordProblem(
        "more",
        f"{name} has {a} {item}. On {pick(rng, DAYS)}, {other} gives "
        f"{name} {b} more {item}. How many {item} does {name} have now?",
        (_step(f"{name} has ", a, "+", b, f" {item} now."),),
    )


def _packs(rng: np.random.Generator) -> WordProblem:
    name, item, day, a, b = (
        pick(rng, NAMES),
        pick(rng, ITEMS),
        pick(rng, DAYS),
        int(rng.integers(2, 13)),
        int(rng.integers(3, 25)),
    )
    return WordProblem(
        "packs",
        f"On {day}, {name} bought {a} packs of {item} with {b} {item} "
        f"in each pack. How many {item} did {name} buy on {day}?",
        (_step(f"{name} bought ", a, "*", b, f" {item} on {day}."),),
    )


def _container(rng: np.random.Generator) -> WordProblem:
    name, item, box, day = pick(rng, NAMES), pick(rng, ITEMS), pick(rng, CONTAINERS), pick(rng, DAYS)
    a, b, c = int(rng.integers(20, 90)), int(rng.integers(2, 19)), int(rng.integers(2, 30))
    return WordProblem(
        "container",
        f"A {box} holds {a} {item}. On {day}, {name} takes out {b} {item} "
        f"and puts in {c}. How many {item} are in the {box} after {day}?",
        (
            _step(f"After {name} takes out {b}, the {box} holds ", a, "-", b, f" {item}."),
            _step(f"After {name} puts in {c}, it holds ", a - b, "+", c, f" {item}."),
        ),
    )


def _pages(rng: np.random.Generator) -> WordProblem:
    name, (day, day2) = pick(rng, NAMES), _two(rng, DAYS)
    a, b = int(rng.integers(5, 60)), int(rng.integers(5, 60))
    c = a + b + int(rng.integers(10, 200))
    return WordProblem(
        "pages",
        f"{name} reads {a} pages on {day} and {b} pages on {day2}. The book "
        f"has {c} pages. How many pages does {name} have left after {day2}?",
        (
            _step(f"{name} reads ", a, "+", b, " pages in total."),
            _step(f"{name} has ", c, "-", a + b, " pages left."),
        ),
    )


def _wage(rng: np.random.Generator) -> WordProblem:
    name, shop, day, a, b = (
        pick(rng, NAMES),
        pick(rng, SHOPS),
        pick(rng, DAYS),
        int(rng.integers(8, 40)),
        int(rng.integers(2, 11)),
    )
    return WordProblem(
        "wage",
        f"{name} earns {a} dollars an hour at the {shop} and works {b} "
        f"hours on {day}. How much does {name} earn at the {shop} on {day}?",
        (_step(f"{name} earns ", a, "*", b, f" dollars on {day}."),),
    )


def _share(rng: np.random.Generator) -> WordProblem:
    item, group, day, b, k = (
        pick(rng, ITEMS),
        pick(rng, GROUPS),
        pick(rng, DAYS),
        int(rng.integers(2, 12)),
        int(rng.integers(2, 15)),
    )
    return WordProblem(
        "share",
        f"There are {b * k} {item} shared equally among {b} {group} "
        f"on {day}. How many {item} does each of the {b} {group} get?",
        (_step(f"Each of the {group} gets ", b * k, "/", b, f" {item}."),),
    )


def _run(rng: np.random.Generator) -> WordProblem:
    name, day, a, b, c = (
        pick(rng, NAMES),
        pick(rng, DAYS),
        int(rng.integers(2, 15)),
        int(rng.integers(3, 10)),
        int(rng.integers(1, 25)),
    )
    return WordProblem(
        "run",
        f"{name} runs {a} kilometers each morning for {b} days and {c} "
        f"kilometers on {day}. How many kilometers did {name} run in total?",
        (
            _step(f"In the mornings {name} runs ", a, "*", b, " kilometers."),
            _step("In total that is ", a * b, "+", c, " kilometers."),
        ),
    )


def _change(rng: np.random.Generator) -> WordProblem:
    name, item, shop = pick(rng, NAMES), pick(rng, ITEMS), pick(rng, SHOPS)
    a, c = int(rng.integers(2, 15)), int(rng.integers(2, 9))
    b = a * c + int(rng.integers(1, 50))
    return WordProblem(
        "change",
        f"A {shop} sells {item} at {a} dollars each. {name} pays {b} dollars "
        f"for {c} {item}. How much change does {name} get from the {shop}?",
        (
            _step(f"The {item} cost ", a, "*", c, " dollars."),
            _step(f"{name} gets ", b, "-", a * c, " dollars in change."),
        ),
    )


def _age(rng: np.random.Generator) -> WordProblem:
    (name, other), a, b, c = (
        _name_pair(rng),
        int(rng.integers(4, 50)),
        int(rng.integers(1, 30)),
        int(rng.integers(2, 20)),
    )
    return WordProblem(
        "age",
        f"{name} is {a} years old. {other} is {b} years older than {name}. How old will {other} be in {c} years?",
        (
            _step(f"{other} is ", a, "+", b, " years old."),
            _step(f"In {c} years {other} will be ", a + b, "+", c, " years old."),
        ),
    )


def _class(rng: np.random.Generator) -> WordProblem:
    name, (subject, other), a = pick(rng, NAMES), _two(rng, SUBJECTS), int(rng.integers(15, 45))
    b = int(rng.integers(1, a))
    return WordProblem(
        "class",
        f"{name} has {a} classmates: {b} of them like {subject} and the rest "
        f"like {other}. How many of the {a} classmates of {name} like {other}?",
        (_step(f"{other.capitalize()} is liked by ", a, "-", b, " classmates."),),
    )


TEMPLATES: dict[str, Callable[[np.random.Generator], WordProblem]] = {
    "more": _more,
    "packs": _packs,
    "container": _container,
    "pages": _pages,
    "wage": _wage,
    "share": _share,
    "run": _run,
    "change": _change,
    "age": _age,
    "class": _class,
}
"""The ten templates in draw order (the first draw of `word_problem` indexes this)."""


def word_problem(rng: np.random.Generator) -> WordProblem:
    """A GSM8K-style word problem from one of the ten templates, with its worked solution."""
    draw = tuple(TEMPLATES.values())[int(rng.integers(len(TEMPLATES)))]
    return draw(rng)
