"""Code execution rewards: a completion passes when its program runs its task's tests in the HumanEval sandbox.

The program is HumanEval's: the task's prompt (a signature and docstring),
the completion, then the task's test code (`check(...)` calls that raise on a
wrong answer), run by `eval.code_sandbox.run_program` (a stdlib-only
subprocess in a user + network namespace under rlimits). A program that does
not parse as Python is a `parse_failure`, found by `ast.parse` without running
anything; one that parses but fails, raises or times out is `wrong`.

Example: the task `Task("add", "def add(a, b):\\n", "assert add(2, 3) == 5\\n")`
with the completion `"    return a + b\\n"` is right; `"    return a - b\\n"` is
wrong; `"    return a +\\n"` is a parse failure.
"""

import ast
from dataclasses import dataclass

from tootsie.eval.code_sandbox import run_program
from tootsie.rl.environments import Task, Verdict


def program(task: Task, completion: str) -> str:
    """The source that runs: prompt and completion, then the task's tests (HumanEval's layout)."""
    return f"{task.prompt}{completion}\n\n{task.reference}\n"


@dataclass(frozen=True)
class CodeEnvironment:
    """Python completions scored by running the task's tests in the sandbox."""

    name: str = "code"
    """Recorded in rollout provenance."""

    def check(self, task: Task, completion: str) -> Verdict:
        """`right` when the tests pass, `wrong` when they fail, `parse_failure` when the code does not parse."""
        try:
            ast.parse(task.prompt + completion)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return Verdict("parse_failure")
        return Verdict("right" if run_program(program(task, completion)) else "wrong")
