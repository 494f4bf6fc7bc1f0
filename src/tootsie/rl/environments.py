"""Reward environments: a task's prompt, a completion, and a reward with the reason it was given.

An environment checks a finished completion against its task and says why:
`right`, `wrong` or `parse_failure` (no answer it could read: no `#### N`, a
program that does not parse). A completion cut off at the token budget never
reaches the checker: `score` records it as `truncated`, and `RewardConfig`
decides what it is worth, `truncated=None` (the default) meaning "no reward:
leave it out of the update", so a truncated completion is never silently a 0.

Environments: `math_checker.MathChecker` (exact numeric answers after `####`
or in `\\boxed{}`), `code_env.CodeEnvironment` (the program runs its tests in
the HumanEval sandbox); `arithmetic_task` draws the synthetic word problems the
math checker scores.

Example: with the default `RewardConfig`, `score(MathChecker(), Task("t", "Question: 2+3?\\nAnswer:", "5"),
" 2 + 3 = 5\\n#### 5", truncated=False, rewards=RewardConfig())` is `Reward(1.0, "right", "5")`, and the
same call with `truncated=True` is `Reward(None, "truncated", "")`.
"""

from dataclasses import dataclass
from typing import Protocol

REASONS = ("right", "wrong", "parse_failure", "truncated")
"""Why a reward was given: the checker's verdict, or a completion cut off at its token budget."""
CHECKER_REASONS = REASONS[:3]
"""The verdicts an environment's `check` may give (truncation is decided before it is called)."""


@dataclass(frozen=True)
class Task:
    """One prompt an environment poses, with what a completion is checked against."""

    id: str
    """Stable identifier (e.g. `arithmetic/train/0/17`), recorded with every rollout."""
    prompt: str
    """Text the policy continues."""
    reference: str
    """What the checker compares against: the exact answer (math) or the test code (code)."""


@dataclass(frozen=True)
class Verdict:
    """An environment's judgment of one completion."""

    reason: str
    """One of CHECKER_REASONS."""
    parsed: str = ""
    """What the checker read from the completion (the normalized answer), empty when nothing."""

    def __post_init__(self) -> None:
        if self.reason not in CHECKER_REASONS:
            raise ValueError(f"reason={self.reason!r} is not one of {', '.join(CHECKER_REASONS)}")


@dataclass(frozen=True)
class Reward:
    """The reward of one completion and why it was given."""

    value: float | None
    """The reward; None leaves the completion out of the update (by default, a truncated one)."""
    reason: str
    """One of REASONS."""
    parsed: str = ""
    """What the checker read from the completion, empty when nothing (or truncated)."""


@dataclass(frozen=True)
class RewardConfig:
    """What each reason is worth."""

    right: float = 1.0
    """Reward of a correct completion."""
    wrong: float = 0.0
    """Reward of a readable but incorrect completion."""
    parse_failure: float = 0.0
    """Reward of a completion whose answer could not be read."""
    truncated: float | None = None
    """Reward of a completion cut off at the token budget; None excludes it from the update."""

    def value(self, reason: str) -> float | None:
        """The reward for `reason` (one of REASONS)."""
        if reason not in REASONS:
            raise ValueError(f"reason={reason!r} is not one of {', '.join(REASONS)}")
        return getattr(self, reason)


class Environment(Protocol):
    """Checks a finished completion of a task."""

    name: str
    """Recorded in each rollout shard's provenance."""

    def check(self, task: Task, completion: str) -> Verdict:
        """Whether `completion` (the text after the prompt) answers `task`: right, wrong or parse_failure."""
        ...


def score(environment: Environment, task: Task, completion: str, *, truncated: bool, rewards: RewardConfig) -> Reward:
    """The reward of `completion`: `truncated` (never checked) when cut off at its budget, else the verdict."""
    if truncated:
        return Reward(rewards.truncated, "truncated")
    verdict = environment.check(task, completion)
    return Reward(rewards.value(verdict.reason), verdict.reason, verdict.parsed)
