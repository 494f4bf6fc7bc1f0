"""Exact-answer math checking: read the final answer (`#### N` or `\\boxed{N}`), normalize it, compare as numbers.

The answer is the last `#### ` line (GSM8K's format, what `corpora.arithmetic`
writes) or the last `\\boxed{...}` (MATH's), whichever comes later in the text.
Numbers compare as exact rationals after normalization: thousands commas
(`1,000`), a leading `+`, the Unicode minus, a `$` or a trailing period go;
`12.0`, `12` and `24/2` are equal, as are `0.75`, `3/4` and `\\frac{3}{4}`.
A completion with no answer marker, or one whose answer is not a number, is a
`parse_failure`; a number that differs is `wrong`.

Example: `MathChecker().check(task_with_reference("1000"), "... #### 1,000.0")`
is `Verdict("right", "1000")`; `"... \\boxed{-3/4}"` against `"-0.75"` is right;
`"the answer is 12"` is a parse failure.
"""

import re
from dataclasses import dataclass
from fractions import Fraction

from tootsie.errors import TootsieError
from tootsie.rl.environments import Task, Verdict

HASH_ANSWER = re.compile(r"####[ \t]*([^\n]*)")
"""GSM8K's final answer: the rest of the line after `####`."""
BOXED = "\\boxed{"
"""MATH's final answer: the braces after `\\boxed`."""
NUMBER = re.compile(r"[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?(/\d+)?")
"""An integer (optionally with thousands commas), decimal or fraction `a/b`, after normalization."""
LATEX_FRACTION = re.compile(r"^([-+]?)\\d?frac\{([^{}]*)\}\{([^{}]*)\}$")
"""`\\frac{a}{b}` or `\\dfrac{a}{b}`, optionally signed."""


def parse_number(text: str) -> Fraction | None:
    """The exact value of a written number (see the module docstring for the forms), None when it is not one."""
    cleaned = text.strip().replace("\u2212", "-").replace("$", "").replace(" ", "").rstrip(".")
    latex = LATEX_FRACTION.match(cleaned)
    if latex:
        cleaned = f"{latex.group(1)}{latex.group(2)}/{latex.group(3)}"
    if not cleaned or not NUMBER.fullmatch(cleaned) or not any(c.isdigit() for c in cleaned.split("/")[0]):
        return None
    numerator, _, denominator = cleaned.replace(",", "").partition("/")
    if denominator and int(denominator) == 0:
        return None
    value = Fraction(numerator)
    return value / int(denominator) if denominator else value


def _boxed(text: str) -> tuple[int, str] | None:
    """Where the last `\\boxed{...}` starts and its contents (balanced braces), None when there is none."""
    start = text.rfind(BOXED)
    if start < 0:
        return None
    depth, begin = 1, start + len(BOXED)
    for position in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        if depth == 0:
            return start, text[begin:position]
    return None


def final_answer(text: str) -> str | None:
    """The text of the final answer: after the last `####` or inside the last `\\boxed{}`, whichever is later."""
    found = [(match.start(), match.group(1)) for match in HASH_ANSWER.finditer(text)][-1:]
    boxed = _boxed(text)
    found += [boxed] if boxed else []
    return max(found)[1].strip() if found else None


def format_number(value: Fraction) -> str:
    """A normalized number as text: an integer when whole, else `a/b`."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


@dataclass(frozen=True)
class MathChecker:
    """Exact-answer math: right when the completion's final answer equals the task's reference as a number."""

    name: str = "math"
    """Recorded in rollout provenance."""

    def check(self, task: Task, completion: str) -> Verdict:
        """`right`, `wrong` or `parse_failure` for `completion` against `task.reference` (a number)."""
        expected = parse_number(task.reference)
        if expected is None:
            raise TootsieError(
                f"task {task.id}: reference {task.reference!r} is not a number; "
                "give the exact answer as an integer, decimal or fraction"
            )
        answer = final_answer(completion)
        value = None if answer is None else parse_number(answer)
        if value is None:
            return Verdict("parse_failure")
        return Verdict("right" if value == expected else "wrong", format_number(value))
