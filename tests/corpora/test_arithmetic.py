"""The shared word-problem generator: worked solutions that add up, two renderings, and the tiny corpus unchanged."""

import ast
import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from tootsie.corpora import arithmetic
from tootsie.corpora.arithmetic import (
    TEMPLATES,
    Calculation,
    document,
    extract_answer,
    gsm8k_solution,
    olmes_solution,
    problem_from_record,
    problem_record,
    word_problem,
)
from tootsie.recipes.tiny.text import math_document, math_problem

TINY_MATH_DOCS_SHA256 = "756bc12b3f52426f1a6b677acbb6db04685ba2c6d6dbad00cbf6c9c552eb9051"
"""sha256 of the 2,500 math documents of the tiny corpus (seed 0), from the templates as they were in
recipes/tiny/text.py at commit ba07220, before they moved here."""
TINY_PROBLEMS_SHA256 = "0ed9f3106b0a012c97fe5bfd69270437c38fdff8b29bcf0be3bec6bbec21d9eb"
"""sha256 of `_problems_then_next_draw()` under the same code: 50 seeds x 40 problems, then one more draw each."""


def _problems_then_next_draw() -> list[object]:
    out: list[object] = []
    for seed in range(50):
        rng = np.random.default_rng(seed)
        out += [math_problem(rng) for _ in range(40)]
        out.append(("next", int(rng.integers(1 << 30))))  # the same number of draws consumed
    return out


def test_the_tiny_corpus_math_is_byte_for_byte_what_the_old_templates_wrote() -> None:
    rng = np.random.default_rng(0)
    docs = [math_document(rng) for _ in range(2500)]  # TinyCorpusConfig(math_docs=2500, seed=0): tiny/raw's math kind
    assert hashlib.sha256("\n\x00".join(docs).encode()).hexdigest() == TINY_MATH_DOCS_SHA256
    assert hashlib.sha256(repr(_problems_then_next_draw()).encode()).hexdigest() == TINY_PROBLEMS_SHA256


def test_math_problem_is_the_worked_problem_and_every_step_adds_up() -> None:
    templates = set()
    for seed in range(200):
        problem = word_problem(np.random.default_rng(seed))
        assert math_problem(np.random.default_rng(seed)) == (problem.question, problem.answer)
        templates.add(problem.template)
        values = [int(n) for n in re.findall(r"\d+", problem.question)]
        for step in problem.steps:
            calc = step.calculation
            assert calc.result == {"+": calc.a + calc.b, "-": calc.a - calc.b, "*": calc.a * calc.b}.get(
                calc.op, calc.a // calc.b
            )
            assert calc.result >= 0
        # The first step reads its operands off the question (later ones may use earlier results).
        first = problem.steps[0].calculation
        assert {first.a, first.b} <= set(values), (problem.question, first)
        assert problem.answer == problem.steps[-1].calculation.result
    assert templates == set(TEMPLATES)


def test_the_two_formats_are_the_same_reasoning_with_and_without_tags() -> None:
    for seed in range(50):
        problem = word_problem(np.random.default_rng(seed))
        tagged, plain = gsm8k_solution(problem), olmes_solution(problem)
        assert len(re.findall(r"<<\d+[-+*/]\d+=\d+>>", tagged)) == len(problem.steps)
        assert "<<" not in plain and "####" not in plain
        assert tagged.endswith(f"\n#### {problem.answer}") and plain.endswith(f"\nSo the answer is {problem.answer}.")
        assert re.sub(r"<<[^>]*>>", "", tagged).splitlines()[:-1] == plain.splitlines()[:-1]
        assert extract_answer(tagged, "gsm8k") == problem.answer == extract_answer(plain, "olmes")
        assert extract_answer(plain, "gsm8k") is None and extract_answer(tagged, "olmes") is None
        assert document(problem, "gsm8k") == f"Question: {problem.question}\nAnswer: {tagged}"
        assert problem_from_record(problem_record(problem)) == problem


def test_the_docstring_example_renders_as_gsm8k_writes_it() -> None:
    problem = word_problem(np.random.default_rng(1))
    assert problem.question.startswith("Ivan earns 9 dollars an hour at the store and works 3 hours on Sunday.")
    assert gsm8k_solution(problem) == "Ivan earns 9 * 3 = <<9*3=27>>27 dollars on Sunday.\n#### 27"
    assert olmes_solution(problem) == "Ivan earns 9 * 3 = 27 dollars on Sunday.\nSo the answer is 27."


def test_bad_calculations_and_formats_are_refused() -> None:
    with pytest.raises(ValueError, match="not one of"):
        Calculation(1, "^", 2)
    with pytest.raises(ValueError, match="exact integer division"):
        Calculation(7, "/", 2)
    with pytest.raises(ValueError, match="solution_format"):
        document(word_problem(np.random.default_rng(0)), "latex")


def test_the_generator_imports_no_other_tootsie_layer() -> None:
    tree = ast.parse(Path(arithmetic.__file__).read_text(encoding="utf-8"))
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names} | {
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    }
    assert {m.split(".")[0] for m in modules} <= {"re", "collections", "dataclasses", "numpy"}
