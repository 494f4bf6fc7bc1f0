"""Environments: the math checker's normalization and verdicts, code through the sandbox, the arithmetic splits."""

from fractions import Fraction

import pytest

from tootsie.corpora.arithmetic import extract_answer, gsm8k_solution
from tootsie.errors import TootsieError
from tootsie.rl.arithmetic_task import ArithmeticTaskConfig, arithmetic_problem, arithmetic_tasks, split_of
from tootsie.rl.code_env import CodeEnvironment
from tootsie.rl.environments import Reward, RewardConfig, Task, Verdict, score
from tootsie.rl.math_checker import MathChecker, final_answer, parse_number

MATH = MathChecker()
REWARDS = RewardConfig()


def _task(reference: str) -> Task:
    return Task("t", "Question: ?\nAnswer:", reference)


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("1,000", Fraction(1000)),
        ("12.0", Fraction(12)),
        ("+7", Fraction(7)),
        ("\u22125", Fraction(-5)),
        ("$3.50", Fraction(7, 2)),
        ("3/4", Fraction(3, 4)),
        ("0.75", Fraction(3, 4)),
        ("\\frac{3}{4}", Fraction(3, 4)),
        ("-\\dfrac{1}{2}", Fraction(-1, 2)),
        ("42.", Fraction(42)),
        ("1,00", None),
        ("twelve", None),
        ("3/0", None),
        ("", None),
        ("-", None),
    ],
)
def test_parse_number_normalizes(written: str, value: Fraction | None) -> None:
    assert parse_number(written) == value


def test_final_answer_takes_the_later_marker() -> None:
    assert final_answer("x\n#### 5\nmore text") == "5"
    assert final_answer("#### 5 then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert final_answer("\\boxed{1}\n#### 7") == "7"
    assert final_answer("#### 1\n#### 2") == "2"
    assert final_answer("no marker at all") is None


def test_math_right_wrong_parse_failure_and_truncated() -> None:
    task = _task("1000")
    assert score(MATH, task, " 10 * 100 = 1000\n#### 1,000.0", truncated=False, rewards=REWARDS) == Reward(
        1.0, "right", "1000"
    )
    assert score(MATH, task, " \\boxed{999}", truncated=False, rewards=REWARDS) == Reward(0.0, "wrong", "999")
    assert score(MATH, task, " the answer is 1000", truncated=False, rewards=REWARDS) == Reward(0.0, "parse_failure")
    assert score(MATH, task, " #### lots", truncated=False, rewards=REWARDS) == Reward(0.0, "parse_failure")
    # A truncated completion is its own reason, never checked: even a right answer is not rewarded.
    assert score(MATH, task, " #### 1000", truncated=True, rewards=REWARDS) == Reward(None, "truncated")
    penalized = RewardConfig(truncated=-0.5, parse_failure=-1.0)
    assert score(MATH, task, " #### 10", truncated=True, rewards=penalized) == Reward(-0.5, "truncated")
    assert score(MATH, task, " 10", truncated=False, rewards=penalized).value == -1.0
    assert MATH.check(_task("-0.75"), "\\boxed{-3/4}") == Verdict("right", "-3/4")
    with pytest.raises(TootsieError, match="not a number"):
        MATH.check(_task("seven"), "#### 7")
    with pytest.raises(ValueError, match="reason"):
        Verdict("truncated")


def test_checker_agrees_with_the_shared_generator_on_its_own_solutions() -> None:
    for task_index in range(20):
        problem = arithmetic_problem(ArithmeticTaskConfig(seed=3), "train", task_index)
        solution = " " + gsm8k_solution(problem)
        assert extract_answer(solution, "gsm8k") == problem.answer
        assert MATH.check(_task(str(problem.answer)), solution) == Verdict("right", str(problem.answer))
        assert MATH.check(_task(str(problem.answer + 1)), solution).reason == "wrong"


ADD = Task("add", 'def add(a, b):\n    """Sum of a and b."""\n', "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n")


def test_code_passes_fails_and_parse_fails_through_the_sandbox() -> None:
    code = CodeEnvironment()
    assert score(code, ADD, "    return a + b\n", truncated=False, rewards=REWARDS) == Reward(1.0, "right")
    assert score(code, ADD, "    return a - b\n", truncated=False, rewards=REWARDS) == Reward(0.0, "wrong")
    assert score(code, ADD, "    return a +\n", truncated=False, rewards=REWARDS) == Reward(0.0, "parse_failure")
    # The sandbox has no network: a program that opens a socket to the outside fails its run.
    leak = "    import socket\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    return a + b\n"
    assert code.check(ADD, leak).reason == "wrong"
    assert score(code, ADD, "    return a + b\n", truncated=True, rewards=REWARDS).reason == "truncated"


def test_arithmetic_splits_are_deterministic_and_disjoint() -> None:
    config = ArithmeticTaskConfig(seed=0)
    train = arithmetic_tasks(config, "train", 0, 300)
    heldout = arithmetic_tasks(config, "heldout", 0, 100)
    assert arithmetic_tasks(config, "train", 0, 300) == train
    assert arithmetic_tasks(config, "heldout", 40, 5) == heldout[40:45]
    assert {t.prompt for t in train}.isdisjoint(t.prompt for t in heldout)
    other_seed = arithmetic_tasks(ArithmeticTaskConfig(seed=1), "train", 0, 300)
    assert [t.prompt for t in other_seed] != [t.prompt for t in train]
    assert {t.prompt for t in other_seed}.isdisjoint(t.prompt for t in heldout)
    assert all(
        split_of(t.prompt.removeprefix("Question: ").removesuffix("\nAnswer:"), 0.2) == "heldout" for t in heldout
    )
    assert train[0].id == "arithmetic/train/0/0" and train[0].prompt.startswith("Question: ")
    assert len({t.prompt for t in train}) > 250  # the ten templates draw varied problems
    with pytest.raises(ValueError, match="heldout_fraction"):
        ArithmeticTaskConfig(heldout_fraction=0.0)
    with pytest.raises(ValueError, match="split"):
        arithmetic_problem(config, "test", 0)
