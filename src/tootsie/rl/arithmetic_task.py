"""The synthetic arithmetic task: GSM8K-style word problems drawn deterministically, in disjoint splits.

Problems come from the shared generator `corpora.arithmetic` (the one the tiny
corpus, the contamination case and the phenomena use), so the RL loop runs
offline on CPU. Problem `index` of a split is drawn from
`numpy.random.default_rng([seed, split number, index, attempt])` for attempt
0, 1, ... until the draw belongs to the split, and a question belongs to the
held-out split when the first 8 bytes of its sha256, read as a fraction of
2^64, fall below `heldout_fraction`. The split is a function of the question
text alone, so no held-out question ever appears in training, under any seed.
The task's prompt is `corpora.arithmetic.prompt` (`Question: ...\\nAnswer:`)
and its reference the integer answer, which `math_checker.MathChecker` scores
(a GSM8K solution ends `#### N`). `answer_text` is the short answer format the
RL demo's starting model is fine-tuned to write: the steps' calculations, then
`#### N`.

Example: `arithmetic_tasks(ArithmeticTaskConfig(seed=0), "heldout", 0, 3)`
gives the same three tasks on every machine, with ids `arithmetic/heldout/0/0`
.. `arithmetic/heldout/0/2`, none of whose questions any train index draws.
"""

import hashlib
import itertools
from dataclasses import dataclass

import numpy as np

from tootsie.corpora.arithmetic import WordProblem, prompt, word_problem
from tootsie.rl.environments import Environment, Task
from tootsie.rl.math_checker import MathChecker

SPLITS = ("train", "heldout")
"""The two disjoint splits."""


@dataclass(frozen=True)
class ArithmeticTaskConfig:
    """Which word problems the task draws."""

    seed: int = 0
    """Seed of every draw; problem i of a split is a function of (seed, split, i)."""
    heldout_fraction: float = 0.2
    """Share of question texts (by hash) that belong to the held-out split."""

    def __post_init__(self) -> None:
        if not 0.01 <= self.heldout_fraction <= 0.99:
            raise ValueError(f"heldout_fraction={self.heldout_fraction} must be in [0.01, 0.99]; 0.2 is the default")

    def tasks(self, split: str, start: int, count: int) -> list[Task]:
        """Tasks `start` .. `start + count - 1` of `split` (`arithmetic_tasks`)."""
        return arithmetic_tasks(self, split, start, count)

    def checker(self) -> Environment:
        """What scores a completion: the exact-answer math checker (`#### N` or `\\boxed{N}`)."""
        return MathChecker()


def split_of(question: str, heldout_fraction: float) -> str:
    """The split a question belongs to, by the hash of its text."""
    position = int.from_bytes(hashlib.sha256(question.encode("utf-8")).digest()[:8], "big") / 2**64
    return "heldout" if position < heldout_fraction else "train"


def arithmetic_problem(config: ArithmeticTaskConfig, split: str, index: int) -> WordProblem:
    """Problem `index` of `split`: the first draw of its (seed, split, index) stream whose question is in the split."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not one of {', '.join(SPLITS)}")
    if index < 0:
        raise ValueError(f"index={index} must be >= 0")
    stream = (
        word_problem(np.random.default_rng([config.seed, SPLITS.index(split), index, attempt]))
        for attempt in itertools.count()
    )
    return next(problem for problem in stream if split_of(problem.question, config.heldout_fraction) == split)


def answer_text(problem: WordProblem) -> str:
    """The answer format an SFT'd policy writes: one `a op b = r` line per step, then `#### N` (what MathChecker reads).

    The worked steps without their words: short completions, so a small model learns the format in minutes.
    """
    lines = [f"{s.calculation.a} {s.calculation.op} {s.calculation.b} = {s.calculation.result}" for s in problem.steps]
    return "\n".join([*lines, f"#### {problem.answer}"])


def arithmetic_tasks(config: ArithmeticTaskConfig, split: str, start: int, count: int) -> list[Task]:
    """Tasks `start` .. `start + count - 1` of `split`: the problem's prompt, its answer as the reference."""
    tasks = []
    for index in range(start, start + count):
        problem = arithmetic_problem(config, split, index)
        tasks.append(Task(f"arithmetic/{split}/{config.seed}/{index}", prompt(problem.question), str(problem.answer)))
    return tasks
